"""Writes tests/data/tf_checkpoint/model-5.{index,data-00000-of-00001} with real TensorFlow
(run once with TF 2.21, tensorflow-cpu: ``python tests/data/tf_checkpoint/make_checkpoint.py``).

tests/test_saver.py restores it with minitf and compares with the values below; TF itself is
not needed at test time.
"""

import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model")
w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) / 4, name="w")
b = tf.Variable(np.float32(-1.5), name="b")
with tf.variable_scope("layer"):
    k = tf.Variable(np.array([[1, -2], [3, 2**40]], dtype=np.int64), name="kernel")
    d = tf.Variable(np.linspace(0, 1, 5), name="d")  # float64
step = tf.Variable(7, name="global_step")  # int32
empty = tf.Variable(np.zeros((0, 4), np.float32), name="empty")
s = tf.Variable(np.array([b"ab", b"", b"x" * 200], dtype=object), name="s")  # string
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    print(
        tf.train.Saver().save(sess, out, global_step=5, write_meta_graph=False, write_state=False)
    )

# partitioned-3.*: variables split by a partitioner, saved as slices of their full tensors
# (a ps-sharded model's checkpoint); 200 rows in 3 parts put slice offsets past 63 (two-byte
# keys); tests/test_saver.py restores it whole and with other partitionings.
tf.reset_default_graph()
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "partitioned")
full = np.arange(600, dtype=np.float32).reshape(200, 3) / 8
emb = tf.get_variable(
    "emb", [200, 3], tf.float32, tf.zeros_initializer(), partitioner=tf.fixed_size_partitioner(3)
)
with tf.variable_scope("layer"):
    cols = tf.get_variable(
        "w",
        [2, 5],
        tf.int64,
        tf.zeros_initializer(),
        partitioner=tf.fixed_size_partitioner(2, axis=1),
    )
bias = tf.Variable(np.float32(0.5), name="bias")
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    starts = [0, 67, 134, 200]
    for i, part in enumerate(emb):
        sess.run(part.assign(full[starts[i] : starts[i + 1]]))
    values = np.arange(10, dtype=np.int64).reshape(2, 5) - 4
    sess.run([cols._get_variable_list()[0].assign(values[:, :3])])
    sess.run([cols._get_variable_list()[1].assign(values[:, 3:])])
    print(
        tf.train.Saver().save(sess, out, global_step=3, write_meta_graph=False, write_state=False)
    )
