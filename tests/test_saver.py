"""tf.train.Saver, latest_checkpoint, get_checkpoint_state, load_checkpoint ...: the reference's
§19 (TF 1.15's saver.py and checkpoint_management.py, observed in TF 2.21's tf.compat.v1).

Book section: "Saving and restoring"; the distributed chapter's sharded saves.
"""

import os
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from minitf.lib.protobuf.tf_protos_pb2 import MetaGraphDef
from minitf.ops import array_ops, io_ops

TF_DIR = Path(__file__).parent / "data" / "tf_checkpoint"


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _wb():
    w = tf.Variable([1.0, 2.0], name="w")
    b = tf.Variable(3, name="b")
    return w, b


def _lines(path):
    return Path(path).read_text().splitlines()


# -- §19.4 conformance cases --------------------------------------------------------------------


def test_max_to_keep_files_state_file_and_absolute_dirs(in_tmp):
    w, _ = _wb()
    saver = tf.train.Saver(max_to_keep=2)
    os.mkdir("ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = [saver.save(sess, "ckpt/model", global_step=i) for i in (1, 2, 3)]
        assert got == ["ckpt/model-1", "ckpt/model-2", "ckpt/model-3"]
        assert sorted(os.listdir("ckpt")) == [
            "checkpoint",
            "model-2.data-00000-of-00001",
            "model-2.index",
            "model-2.meta",
            "model-3.data-00000-of-00001",
            "model-3.index",
            "model-3.meta",
        ]
        assert _lines("ckpt/checkpoint") == [
            'model_checkpoint_path: "model-3"',
            'all_model_checkpoint_paths: "model-2"',
            'all_model_checkpoint_paths: "model-3"',
        ]
        assert tf.train.latest_checkpoint("ckpt") == "ckpt/model-3"
        assert saver.last_checkpoints == ["ckpt/model-2", "ckpt/model-3"]

        d = str(in_tmp)
        os.mkdir("abs")
        assert saver.save(sess, d + "/abs/model.ckpt") == d + "/abs/model.ckpt"
        assert _lines("abs/checkpoint") == [
            'model_checkpoint_path: "%s/abs/model.ckpt"' % d,
            'all_model_checkpoint_paths: "ckpt/model-3"',
            'all_model_checkpoint_paths: "%s/abs/model.ckpt"' % d,
        ]
        assert not os.path.exists("ckpt/model-2.index")  # the history is the Saver's own

        sess.run(w.assign([9.0, 9.0]))
        saver.restore(sess, "ckpt/model-3")
        np.testing.assert_array_equal(sess.run(w), [1.0, 2.0])
        with pytest.raises(ValueError) as e:
            saver.restore(sess, "ckpt/model-1")
        assert str(e.value) == "The passed save_path is not a valid checkpoint: ckpt/model-1"


def _saved_wb(tmp_path):
    with tf.Graph().as_default():
        _wb()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return saver.save(sess, str(tmp_path / "model"))


def test_restore_missing_key_is_not_found(tmp_path):
    prefix = _saved_wb(tmp_path)
    _wb()
    tf.Variable(0.0, name="z")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.NotFoundError) as e:
            saver.restore(sess, prefix)
    assert e.value.message.startswith(
        "Restoring from checkpoint failed. This is most likely due to a Variable name or other "
        "graph key that is missing from the checkpoint. Please ensure that you have not altered "
        "the graph expected based on the checkpoint. Original error:\n\n"
        "Key z not found in checkpoint"
    )
    assert "save/RestoreV2" in e.value.message


def test_restore_shape_mismatch_is_invalid_argument(tmp_path):
    prefix = _saved_wb(tmp_path)
    tf.Variable([1.0, 2.0, 3.0], name="w")
    tf.Variable(3, name="b")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            saver.restore(sess, prefix)
    assert e.value.message.startswith(
        "Restoring from checkpoint failed. This is most likely due to a mismatch between the "
        "current graph and the graph from the checkpoint. Please ensure that you have not "
        "altered the graph expected based on the checkpoint. Original error:\n\n"
        "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= [2]"
    )


def test_restore_dtype_mismatch_is_invalid_argument(tmp_path):
    prefix = _saved_wb(tmp_path)
    tf.Variable([1.0, 2.0], name="w", dtype=tf.float64)
    tf.Variable(3, name="b")
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="expected dtype double does "
                           "not equal original dtype float"):  # fmt: skip
            tf.train.Saver().restore(sess, prefix)


def test_no_variables_to_save():
    with pytest.raises(ValueError, match="^No variables to save$"):
        tf.train.Saver()
    saver = tf.train.Saver(allow_empty=True)
    assert saver.saver_def is None
    with tf.Session() as sess:
        assert saver.save(sess, "unused", write_meta_graph=False) is None
        assert saver.restore(sess, "unused") is None


def test_sharded_over_two_cpus(in_tmp):
    with tf.device("/cpu:0"):
        a = tf.Variable([1.0, 2.0], name="a")
    with tf.device("/cpu:1"):
        c = tf.Variable(5, name="c")
    saver = tf.train.Saver(sharded=True)
    assert saver.saver_def.save_tensor_name == "save/Identity:0"
    assert saver.saver_def.sharded
    g = tf.get_default_graph()
    assert g.get_operation_by_name("save/SaveV2").device == "/device:CPU:0"
    assert g.get_operation_by_name("save/Assign_1").device == "/device:CPU:1"
    assert g.get_operation_by_name("save/MergeV2Checkpoints").type == "MergeV2Checkpoints"
    os.mkdir("sh")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, "sh/model", global_step=7) == "sh/model-7"
        assert sorted(os.listdir("sh")) == [
            "checkpoint",
            "model-7.data-00000-of-00002",
            "model-7.data-00001-of-00002",
            "model-7.index",
            "model-7.meta",
        ]
        sess.run([a.assign([0.0, 0.0]), c.assign(0)])
        saver.restore(sess, "sh/model-7")
        assert sess.run(a).tolist() == [1.0, 2.0] and sess.run(c) == 5
    assert tf.train.list_variables("sh") == [("a", [2]), ("c", [])]


@pytest.mark.parametrize("sharded", [False, True])
def test_variables_on_gpus(in_tmp, two_gpus, sharded):
    with tf.device("/gpu:0"):
        a = tf.Variable([1.0, 2.0], name="a")
    with tf.device("/gpu:1"):
        b = tf.Variable([3.0, 4.0], name="b")
    saver = tf.train.Saver(sharded=sharded)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = saver.save(sess, "g")
        sess.run([a.assign([0.0, 0.0]), b.assign([0.0, 0.0])])
        saver.restore(sess, prefix)
        assert [v.tolist() for v in sess.run([a, b])] == [[1.0, 2.0], [3.0, 4.0]]
    shards = sorted(f for f in os.listdir(".") if ".data-" in f)
    assert len(shards) == (2 if sharded else 1)


# -- the graph and the SaverDef ------------------------------------------------------------------


def test_ops_names_and_saver_def():
    _wb()
    saver = tf.train.Saver()
    g = tf.get_default_graph()
    names = [op.name for op in g.get_operations() if op.name.startswith("save")]
    assert names == [
        "save/filename/input",
        "save/filename",
        "save/Const",
        "save/SaveV2/tensor_names",
        "save/SaveV2/shape_and_slices",
        "save/SaveV2",
        "save/control_dependency",
        "save/RestoreV2/tensor_names",
        "save/RestoreV2/shape_and_slices",
        "save/RestoreV2",
        "save/Assign",
        "save/Assign_1",
        "save/restore_all",
    ]
    assert g.get_operation_by_name("save/Const").type == "PlaceholderWithDefault"
    assert g.get_operation_by_name("save/RestoreV2").device == "/device:CPU:0"
    save = g.get_operation_by_name("save/SaveV2")
    assert [t.name for t in save.inputs][3:] == ["b:0", "w:0"]  # sorted keys, the variables
    sd = saver.saver_def
    assert (sd.filename_tensor_name, sd.save_tensor_name, sd.restore_op_name, sd.version) == (
        "save/Const:0",
        "save/control_dependency:0",
        "save/restore_all",
        tf.train.SaverDef.V2,
    )
    assert (sd.max_to_keep, sd.sharded, sd.keep_checkpoint_every_n_hours) == (5, False, 10000.0)
    assert saver.as_saver_def() is sd
    tf.train.Saver(name="mine")
    tf.train.Saver()
    assert g.get_operation_by_name("mine/restore_all") is not None
    assert g.get_operation_by_name("save_1/restore_all") is not None


def test_var_list_forms_and_local_variables(in_tmp):
    w, b = _wb()
    tf.Variable(0, name="epochs", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    extra = tf.Variable(1.0, name="extra", collections=["saveable_objects"])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(extra.initializer)
        tf.train.Saver().save(sess, "all", write_meta_graph=False)
        assert tf.train.list_variables("all") == [("b", []), ("extra", []), ("w", [2])]
        tf.train.Saver({"my/w": w}).save(sess, "one", write_meta_graph=False)
        assert tf.train.list_variables("one") == [("my/w", [2])]
        tf.train.Saver([b]).save(sess, "list", write_meta_graph=False)
        assert tf.train.list_variables("list") == [("b", [])]
    with pytest.raises(ValueError, match="At least two variables have the same name: w"):
        tf.train.Saver([w, w])
    with pytest.raises(TypeError, match="should be passed in a dict or a list"):
        tf.train.Saver(var_list=5)
    with pytest.raises(ValueError, match="build cannot be deferred"):
        tf.train.Saver([w], defer_build=True)
    deferred = tf.train.Saver(defer_build=True)
    with tf.Session() as sess, pytest.raises(RuntimeError, match="should be called before save"):
        deferred.save(sess, "x")
    deferred.build()
    assert deferred.saver_def.restore_op_name.endswith("/restore_all")
    again = tf.train.Saver(saver_def=deferred.saver_def)
    assert again.saver_def is deferred.saver_def


def test_save_errors(in_tmp):
    _wb()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(ValueError) as e:
            saver.save(sess, "nodir/sub/model")
        assert str(e.value) == "Parent directory of nodir/sub/model doesn't exist, can't save."
        assert saver.save(sess, "newdir/model") == "newdir/model"  # SaveV2 makes one level
        with pytest.raises(ValueError, match="'latest_filename' must not contain path"):
            saver.save(sess, "m", latest_filename="a/b")
        with pytest.raises(ValueError, match="'latest_filename' collides with 'save_path': "
                           "'checkpoint' and 'checkpoint'"):  # fmt: skip
            saver.save(sess, "checkpoint")
        with pytest.raises(ValueError, match="^Can't load save_path when it is None.$"):
            saver.restore(sess, None)
    with pytest.raises(TypeError, match="'sess' must be a Session; 42"):
        saver.save(42, "m")


def test_global_step_forms_and_pad_step_number(in_tmp):
    _wb()
    step = tf.Variable(12, name="global_step", trainable=False)
    saver = tf.train.Saver(pad_step_number=True, max_to_keep=None)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, "m", global_step=step) == "m-00000012"
        assert saver.save(sess, "m", global_step=np.int64(3)) == "m-00000003"
        assert saver.last_checkpoints == []  # max_to_keep=None: nothing recorded or deleted
        assert _lines("checkpoint") == [
            'model_checkpoint_path: "m-00000003"',
            'all_model_checkpoint_paths: "m-00000003"',
        ]
        assert os.path.exists("m-00000012.index")
        plain = tf.train.Saver()
        assert plain.save(sess, "p", global_step=step.value(), write_state=False) == "p-12"
        assert plain.last_checkpoints == []


def test_keep_checkpoint_every_n_hours_keeps_files(in_tmp):
    _wb()
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1e-9)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in (1, 2, 3):
            saver.save(sess, "k", global_step=i)
    assert saver.last_checkpoints == ["k-3"]
    assert all(os.path.exists("k-%d.index" % i) for i in (1, 2, 3))


def test_save_relative_paths_and_latest_filename(in_tmp):
    _wb()
    saver = tf.train.Saver(save_relative_paths=True)
    os.mkdir("d")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(in_tmp / "d" / "m"), latest_filename="state")
    assert _lines("d/state") == ['model_checkpoint_path: "m"', 'all_model_checkpoint_paths: "m"']
    assert tf.train.latest_checkpoint("d") is None
    assert tf.train.latest_checkpoint("d", "state") == "d/m"
    assert tf.train.latest_checkpoint(str(in_tmp / "d"), "state") == str(in_tmp / "d" / "m")


def test_meta_file_is_a_meta_graph_def(in_tmp):
    _wb()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, "m", global_step=4, meta_graph_suffix="mg")
    meta = MetaGraphDef.FromString(Path("m-4.mg").read_bytes())
    assert meta.saver_def == saver.saver_def
    assert "SaveV2" in [node.op for node in meta.graph_def.node]
    assert saver.export_meta_graph("x.meta").saver_def == saver.saver_def


# -- checkpoint_management ----------------------------------------------------------------------


def test_latest_checkpoint_and_state_without_files(in_tmp):
    assert tf.train.latest_checkpoint("nowhere") is None
    assert tf.train.get_checkpoint_state("nowhere") is None
    os.mkdir("d")
    Path("d/checkpoint").write_text('model_checkpoint_path: "gone"\n')
    assert tf.train.latest_checkpoint("d") is None  # its files do not exist
    state = tf.train.get_checkpoint_state("d")
    assert state.model_checkpoint_path == "d/gone"
    Path("d/checkpoint").write_text("not a { state")
    assert tf.train.get_checkpoint_state("d") is None
    Path("d/checkpoint").write_text('all_model_checkpoint_paths: "x"\n')
    with pytest.raises(ValueError, match="Invalid checkpoint state loaded from d"):
        tf.train.get_checkpoint_state("d")
    with pytest.raises(RuntimeError, match="conflicts with path used for checkpoint state"):
        tf.train.update_checkpoint_state(str(in_tmp / "d"), str(in_tmp / "d" / "checkpoint"))
    tf.train.update_checkpoint_state("d", "/abs/m", ["d/old"])
    state = tf.train.get_checkpoint_state("d")
    assert list(state.all_model_checkpoint_paths) == ["d/old", "/abs/m"]


def test_checkpoint_exists_mtimes_and_remove(in_tmp):
    _wb()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, "m")
    assert tf.train.checkpoint_exists("m") and not tf.train.checkpoint_exists("n")
    assert len(tf.train.get_checkpoint_mtimes(["m", "n"])) == 1
    tf.train.remove_checkpoint("m")
    assert sorted(os.listdir(".")) == ["checkpoint"]


def test_recover_last_checkpoints(in_tmp):
    _wb()
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, "m", global_step=1)
        saver.save(sess, "m", global_step=2)
        later = tf.train.Saver(max_to_keep=2)
        later.recover_last_checkpoints(["m-1", "m-2", "m-0"])
        assert later.last_checkpoints == ["m-1", "m-2"]
        later.save(sess, "m", global_step=3)
    assert not os.path.exists("m-1.index") and later.last_checkpoints == ["m-2", "m-3"]


# -- reading checkpoints ------------------------------------------------------------------------


TF_VALUES = {
    "w": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    "b": np.float32(-1.5),
    "layer/kernel": np.array([[1, -2], [3, 2**40]], dtype=np.int64),
    "layer/d": np.linspace(0, 1, 5),
    "global_step": np.int32(7),
    "empty": np.zeros((0, 4), np.float32),
    "s": np.array([b"ab", b"", b"x" * 200], dtype=object),
}


def _tf_like_graph():
    made = {
        "w": tf.Variable(np.zeros((2, 3), np.float32), name="w"),
        "b": tf.Variable(np.float32(0), name="b"),
        "global_step": tf.Variable(0, name="global_step"),
        "empty": tf.Variable(np.ones((0, 4), np.float32), name="empty"),
        "s": tf.Variable(np.array([b"", b"", b""], dtype=object), name="s"),
    }
    with tf.variable_scope("layer"):
        made["layer/kernel"] = tf.Variable(np.zeros((2, 2), np.int64), name="kernel")
        made["layer/d"] = tf.Variable(np.zeros(5), name="d")
    return made


def test_restores_a_checkpoint_written_by_tensorflow():
    made = _tf_like_graph()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        saver.restore(sess, str(TF_DIR / "model-5"))
        for key, want in TF_VALUES.items():
            got = sess.run(made[key])
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_array_equal(got, want)


def test_writes_the_bytes_tensorflow_writes(in_tmp):
    made = _tf_like_graph()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for key, value in TF_VALUES.items():
            made[key].load(value, sess)
        saver.save(sess, "model", global_step=5, write_meta_graph=False)
    for suffix in (".index", ".data-00000-of-00001"):
        assert Path("model-5" + suffix).read_bytes() == (TF_DIR / ("model-5" + suffix)).read_bytes()


def test_load_checkpoint_reader(in_tmp):
    reader = tf.train.load_checkpoint(str(TF_DIR / "model-5"))
    assert reader.get_variable_to_shape_map() == {
        k: list(np.shape(v)) for k, v in TF_VALUES.items()
    }
    assert reader.get_variable_to_dtype_map()["layer/kernel"] == tf.int64
    assert reader.has_tensor("w") and not reader.has_tensor("z")
    b = reader.get_tensor("b")
    assert type(b) is np.float32 and b == -1.5
    assert reader.debug_string().startswith(b"b (DT_FLOAT) []\nempty (DT_FLOAT) [0,4]\n")
    with pytest.raises(tf.errors.NotFoundError, match="^Key zz not found in checkpoint$"):
        reader.get_tensor("zz")
    with pytest.raises(tf.errors.NotFoundError, match="Failed to find any matching files for "
                       "nonexist"):  # fmt: skip
        tf.train.load_checkpoint("nonexist")
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints in "
                       "given directory ."):  # fmt: skip
        tf.train.load_checkpoint(".")
    assert tf.train.list_variables(str(TF_DIR / "model-5"))[:2] == [("b", []), ("empty", [0, 4])]
    np.testing.assert_array_equal(
        tf.train.load_variable(str(TF_DIR / "model-5"), "layer/d:0"), TF_VALUES["layer/d"]
    )
    assert tf.train.NewCheckpointReader(str(TF_DIR / "model-5")).has_tensor("s")


def test_corrupt_checkpoint_restore_is_data_loss(in_tmp):
    w, _ = _wb()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, "m")
        data = bytearray(Path("m.data-00000-of-00001").read_bytes())
        data[-1] ^= 0x40
        Path("m.data-00000-of-00001").write_bytes(bytes(data))
        with pytest.raises(tf.errors.DataLossError, match="Checksum does not match"):
            saver.restore(sess, "m")


# -- the ops on their own -----------------------------------------------------------------------


def test_placeholder_with_default_and_string_ops():
    p = tf.placeholder_with_default([1.0, 2.0], shape=[2], name="p")
    assert p.op.type == "PlaceholderWithDefault" and p.op.inputs[0].name == "p/input:0"
    joined = io_ops.string_join([tf.constant("a/b"), "_temp/part"])
    name = io_ops.sharded_filename(joined, 1, 3)
    with tf.Session() as sess:
        assert sess.run(p).tolist() == [1.0, 2.0]
        assert sess.run(p, {p: [5.0, 6.0]}).tolist() == [5.0, 6.0]
        assert sess.run(name) == b"a/b_temp/part-00001-of-00003"
        both = io_ops.string_join([["x", "y"], "!"], separator="-")
        assert sess.run(both).tolist() == [b"x-!", b"y-!"]
    with pytest.raises(ValueError, match="Shapes must be equal rank"):
        array_ops.placeholder_with_default([1.0], shape=[], name="bad")


def test_save_and_restore_ops_check_their_arguments(in_tmp):
    v = tf.constant([1.0])
    bad = io_ops.save_v2("x", ["a", "b"], ["", ""], [v])
    outside = io_ops.save_v2("x", ["a"], ["2 1,2"], [v])
    no_shape = io_ops.save_v2("x", ["a"], ["0,1"], [v])
    wrong_size = io_ops.save_v2("x", ["a"], ["4 0,2"], [v])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Expected 1 tensor names"):
            sess.run(bad)
        for op, text in (
            (outside, "slice of it in shape_and_slice: 2 1,2"),
            (no_shape, "slice of it in shape_and_slice: 0,1"),
            (wrong_size, r"Shape of slice 0,2 of a: \[2\] does not match"),
        ):
            with pytest.raises(tf.errors.InvalidArgumentError, match=text):
                sess.run(op)


# -- a cluster: each task writes its own shard ---------------------------------------------------


@pytest.fixture
def ps_and_worker():
    """Two in-process servers, ``/job:ps/task:0`` and ``/job:worker/task:0``."""
    from minitf.distributed.local_cluster import free_port

    spec = {"ps": ["localhost:%d" % free_port()], "worker": ["localhost:%d" % free_port()]}
    tf.config.emulate_gpus(0)
    try:
        servers = [tf.train.Server(spec, job_name=j, task_index=0) for j in ("ps", "worker")]
    finally:
        tf.config.emulate_gpus(2)
    yield servers
    for s in servers:
        s.stop()


@pytest.mark.cluster
def test_sharded_save_in_a_cluster_each_task_writes_its_shard(tmp_path, ps_and_worker):
    with tf.device("/job:ps/task:0"):
        a = tf.Variable([1.0, 2.0], name="a")
    with tf.device("/job:worker/task:0"):
        c = tf.Variable(5, name="c")
    saver = tf.train.Saver(sharded=True)
    g = tf.get_default_graph()
    assert g.get_operation_by_name("save/SaveV2").device == "/job:ps/task:0/device:CPU:0"
    assert g.get_operation_by_name("save/SaveV2_1").device == "/job:worker/task:0/device:CPU:0"
    prefix = str(tmp_path / "model")
    with tf.Session(ps_and_worker[1].target) as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, prefix, global_step=1) == prefix + "-1"
        sess.run([a.assign([0.0, 0.0]), c.assign(0)])
        saver.restore(sess, prefix + "-1")
        assert sess.run(a).tolist() == [1.0, 2.0] and sess.run(c) == 5
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model-1.data-00000-of-00002",
        "model-1.data-00001-of-00002",
        "model-1.index",
        "model-1.meta",
    ]


@pytest.mark.cluster
def test_saver_over_replica_device_setter_variables(tmp_path, ps_and_worker):
    with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
        a = tf.Variable([1.0, 2.0], name="a")
        step = tf.Variable(0, name="global_step")
    saver = tf.train.Saver()
    with tf.Session(ps_and_worker[1].target) as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, str(tmp_path / "new" / "m"), global_step=step).endswith("m-0")
        sess.run(a.assign([0.0, 0.0]))
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path / "new")))
        assert sess.run(a).tolist() == [1.0, 2.0]
