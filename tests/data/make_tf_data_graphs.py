"""Seven ``tf.data`` pipelines and the main graph each builds: ``python make_tf_data_graphs.py``
with TensorFlow installed prints ``tf_data_graphs.txt`` (recorded with tensorflow-cpu 1.15.0,
Python 3.7).  ``test_data.py`` builds the same pipelines with minitf (``PIPELINES``, given the
module as ``tf``) and compares the listings."""

import numpy as np


def nb12(tf):
    d = tf.data.Dataset.from_tensor_slices(np.arange(10)).repeat(3).batch(7)
    d.make_one_shot_iterator().get_next()


def interleave(tf):
    d = tf.data.Dataset.from_tensor_slices(np.arange(10)).repeat(3).batch(7)
    d = d.interleave(tf.data.Dataset.from_tensor_slices, cycle_length=3, block_length=2)
    d.make_one_shot_iterator().get_next()


def csv(tf):
    def decode_csv_line(line):
        x1, x2, y = tf.decode_csv(line, record_defaults=[[-1.0], [-1.0], [-1.0]])
        return tf.stack([x1, x2]), y

    d = tf.data.TextLineDataset(["my_test.csv"]).skip(1).map(decode_csv_line)
    d.make_one_shot_iterator().get_next()


def initializable(tf):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.int64, [None])
    c = tf.constant(2.0)
    d = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * c, b))
    d.shuffle(100, seed=7).batch(4).make_initializable_iterator().get_next()


def reinitializable(tf):
    train = tf.data.Dataset.range(10).filter(lambda v: tf.equal(v % 2, 0)).take(3)
    valid = tf.data.Dataset.range(5).prefetch(1)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    it.get_next(name="next")
    it.make_initializer(train)
    it.make_initializer(valid, name="valid_init")


def zipped(tf):
    a = tf.data.Dataset.range(3)
    b = tf.data.Dataset.from_tensors({"k": [1.0, 2.0]}).repeat()
    d = tf.data.Dataset.zip((a, b))
    d = d.flat_map(lambda i, e: tf.data.Dataset.from_tensors(e["k"]).repeat(i))
    d.make_one_shot_iterator().get_next()


def padded(tf):
    d = tf.data.Dataset.range(5).map(lambda x: tf.fill([x], x)).padded_batch(2, [None])
    d.make_one_shot_iterator().get_next()
    d = tf.data.Dataset.range(3).map(lambda x: (tf.fill([x, 2], tf.cast(x, tf.float32)), x))
    d = d.padded_batch(2, ([4, None], []), padding_values=(-1.0, np.int64(7)), drop_remainder=True)
    d.make_one_shot_iterator().get_next()


PIPELINES = [nb12, interleave, csv, initializable, reinitializable, zipped, padded]


def listing(tf):
    """Each pipeline's title, then one line per op (name, type, inputs, control inputs) and
    one per output (name, dtype, static shape)."""
    lines = []
    for build in PIPELINES:
        g = tf.Graph()
        with g.as_default():
            build(tf)
        lines.append("### " + build.__name__)
        for op in g.get_operations():
            lines.append(
                "%s %s %s %s"
                % (
                    op.name,
                    op.type,
                    [t.name for t in op.inputs],
                    [c.name for c in op.control_inputs],
                )
            )
            lines += ["    %s %s %s" % (t.name, t.dtype.name, t.shape) for t in op.outputs]
    return lines


if __name__ == "__main__":
    import tensorflow.compat.v1 as tf1

    tf1.disable_v2_behavior()
    print("\n".join(listing(tf1)))
