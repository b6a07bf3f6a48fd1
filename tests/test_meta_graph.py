"""tf.train.import_meta_graph / export_meta_graph and Variable.to_proto / from_proto: a model
rebuilt from the ``.meta`` file a Saver writes (TF 1.15's saver.py and meta_graph.py).

Book section: "Saving and restoring models".  TensorFlow 1.15.0 itself imports minitf's
``.meta`` files (checked by hand in a throw-away venv; see the nineteenth session's note).
"""

import numpy as np
import pytest
from google.protobuf import text_format

import minitf as tf
from minitf.lib.protobuf.tf_protos_pb2 import MetaGraphDef, VariableDef

FEED_X = np.arange(6, dtype=np.float32).reshape(2, 3)
FEED_Y = np.array([[1.0], [2.0]], np.float32)


def _model():
    """A linear model trained by SGD, with a global step and a ``train_op`` collection."""
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(np.ones((3, 1), np.float32), name="w")
    b = tf.Variable(0.5, name="b")
    step = tf.Variable(0, trainable=False, name="step")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    tf.add_to_collection("train_op", train)
    return x, y, train


def _saved(tmp_path):
    """Saves the model after one step; returns (checkpoint prefix, the variables after two)."""
    with tf.Graph().as_default():
        x, y, train = _model()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {x: FEED_X, y: FEED_Y})
            path = saver.save(sess, str(tmp_path / "model"), global_step=1)
            sess.run(train, {x: FEED_X, y: FEED_Y})
            return path, sess.run(tf.global_variables())


def test_an_imported_model_restores_and_trains_on_as_the_original(tmp_path):
    path, after_two = _saved(tmp_path)
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta")
        assert [v.name for v in tf.global_variables()] == ["w:0", "b:0", "step:0"]
        assert [v.name for v in tf.trainable_variables()] == ["w:0", "b:0"]
        assert tf.trainable_variables()[0] is tf.global_variables()[0]  # one object, two lists
        train = tf.get_collection("train_op")[0]
        with tf.Session() as sess:
            saver.restore(sess, path)
            sess.run(train, {g.get_tensor_by_name("x:0"): FEED_X, "y:0": FEED_Y})
            got = sess.run(tf.global_variables())
    for a, b in zip(got, after_two):
        np.testing.assert_array_equal(a, b)


def test_imported_initializers_and_saver_save_a_new_checkpoint(tmp_path):
    path, _ = _saved(tmp_path)
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(path + ".meta")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())  # the imported w/Assign ...
            np.testing.assert_array_equal(sess.run("w:0"), np.ones((3, 1), np.float32))
            again = saver.save(sess, str(tmp_path / "again"))
    assert dict(tf.train.list_variables(again))["w"] == [3, 1]


def test_variable_def_names_the_four_ops_of_a_variable():
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        c = tf.Variable(3, trainable=False, name="c")
        msg = w.to_proto()
        assert (msg.variable_name, msg.initializer_name, msg.snapshot_name) == (
            "w:0",
            "w/Assign",
            "w/read:0",
        )
        assert msg.initial_value_name == "w/initial_value:0" and msg.trainable
        assert not c.to_proto().trainable
        again = tf.Variable.from_proto(VariableDef.FromString(msg.SerializeToString()))
        assert again.op is w.op and again.initializer is w.initializer
        assert again.value() is w.value() and again.initial_value is w.initial_value


def test_a_partitioned_variable_keeps_its_slices(tmp_path):
    with tf.Graph().as_default():
        v = tf.get_variable(
            "v", [4, 2], initializer=tf.ones_initializer(), partitioner=tf.fixed_size_partitioner(2)
        )
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "parts"))
        assert len(list(v)) == 2
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(path + ".meta")
        shards = tf.global_variables()
        assert [s._save_slice_info.spec for s in shards] == ["4 2 0,2:0,2", "4 2 2,2:0,2"]
        with tf.Session() as sess:
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(shards[1]), np.ones((2, 2), np.float32))


def test_clear_devices_and_import_scope(tmp_path):
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            x, y, train = _model()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "model"))
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(path + ".meta")
        assert g.get_operation_by_name("w").device == "/device:CPU:0"
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta", clear_devices=True)
        assert {op.device for op in g.get_operations()} == {""}
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta", import_scope="copy")
        assert [v.name for v in tf.trainable_variables()] == ["copy/w:0", "copy/b:0"]
        assert g.get_operation_by_name("copy/w/read").colocation_groups() == [b"loc:@copy/w"]
        with tf.Session() as sess:
            saver.restore(sess, path)  # the checkpoint's keys are the unscoped names
            np.testing.assert_array_equal(sess.run("copy/w:0"), np.ones((3, 1), np.float32))


def test_text_format_files_and_export_meta_graph(tmp_path):
    with tf.Graph().as_default():
        tf.Variable(2.0, name="v")
        meta = tf.train.export_meta_graph(str(tmp_path / "binary.meta"))
    assert isinstance(meta, MetaGraphDef) and not meta.HasField("saver_def")
    (tmp_path / "text.meta").write_text(text_format.MessageToString(meta))
    for name in ("binary.meta", "text.meta"):
        with tf.Graph().as_default():
            saver = tf.train.import_meta_graph(str(tmp_path / name))
            assert isinstance(saver, tf.train.Saver)  # variables but no SaverDef: a new Saver
            assert [v.name for v in tf.global_variables()] == ["v:0"]


def test_a_graph_without_variables_gives_no_saver_and_lists_keep_their_values(tmp_path):
    with tf.Graph().as_default():
        tf.constant(1.0, name="c")
        meta = tf.train.export_meta_graph()
    meta.collection_def["counts"].int64_list.value.extend([3, 4])  # a list TF may write
    with tf.Graph().as_default() as g:
        assert tf.train.import_meta_graph(meta) is None
        assert g.get_operation_by_name("c").type == "Const"
        assert tf.get_collection("counts") == [3, 4]


def test_bad_files_get_tf_errors(tmp_path):
    with pytest.raises(OSError, match="File .*nothing.meta does not exist."):
        tf.train.import_meta_graph(str(tmp_path / "nothing.meta"))
    (tmp_path / "junk.meta").write_bytes(b"\xff\xfe not a graph")
    with pytest.raises(OSError, match="Cannot parse file .*junk.meta"):
        tf.train.import_meta_graph(str(tmp_path / "junk.meta"))
    with tf.Graph().as_default():
        tf.constant(1.0, name="c")
        meta = tf.train.export_meta_graph()
    del meta.graph_def.node[0].attr["_output_types"]  # as TensorFlow writes a node
    with tf.Graph().as_default(), pytest.raises(tf.errors.InvalidArgumentError, match="Node c has"):
        tf.train.import_meta_graph(meta)


def _rich_graph():
    """Ops with attrs of every kind: dtypes, shapes, tensors, str, bytes groups, lists."""
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    logits = tf.layers.dense(tf.layers.dense(x, 8, activation=tf.nn.relu), 3)
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    tf.train.AdamOptimizer(0.01).minimize(tf.reduce_mean(xent))
    q = tf.FIFOQueue(5, [tf.float32, tf.string], shapes=[[2], []], name="q")
    q.enqueue([[1.0, 2.0], "a"])
    tf.constant(["ab", "c"], name="words")
    tf.concat([x, x], axis=1, name="both")
    tf.train.Saver()


def _same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, tf.TensorShape):  # (== of unknown dimensions is not True)
        return a.ndims == b.ndims and (a.ndims is None or a.as_list() == b.as_list())
    return a == b


def test_every_attr_comes_back_as_it_was():
    with tf.Graph().as_default() as original:
        _rich_graph()
        meta = tf.train.export_meta_graph()
    with tf.Graph().as_default() as imported:
        tf.train.import_meta_graph(meta)  # no SaverDef given: a new Saver, save_1, after them
    ops = original.get_operations()
    names = [op.name for op in imported.get_operations()]
    assert names[: len(ops)] == [op.name for op in ops]
    assert all(name.startswith("save_1/") for name in names[len(ops) :])
    for op in ops:
        new = imported.get_operation_by_name(op.name)
        assert new.type == op.type and new.device == op.device
        assert [t.name for t in new.inputs] == [t.name for t in op.inputs]
        assert [c.name for c in new.control_inputs] == [c.name for c in op.control_inputs]
        assert [t.dtype for t in new.outputs] == [t.dtype for t in op.outputs]
        assert set(new._attrs) == set(op._attrs), op.name
        for key, value in op._attrs.items():
            assert _same(new._attrs[key], value), (op.name, key, value, new._attrs[key])


@pytest.mark.cluster
def test_a_model_saved_on_a_cluster_restores_on_one_machine(tmp_path):
    """Trained on two ps tasks with a sharded Saver, rebuilt from its ``.meta`` with
    ``clear_devices=True`` in a local session: the imported restore ops read both shards."""
    from minitf.distributed import LocalCluster

    with LocalCluster({"ps": 2, "worker": 1}) as cluster, tf.Graph().as_default():
        setter = tf.train.replica_device_setter(ps_tasks=2, cluster=cluster.cluster_spec)
        with tf.device(setter):
            w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
            b = tf.Variable([1.0, 2.0], name="b")
            out = tf.matmul(tf.ones([1, 3]), w) + b
        saver = tf.train.Saver(sharded=True)
        with tf.Session(cluster.target("worker", 0)) as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "model"))
            want = sess.run(out)
    assert {w.device, b.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta", clear_devices=True)
        assert {op.device for op in g.get_operations()} == {""}
        with tf.Session() as sess:
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(out.name), want)
