"""The single-machine examples of the blog post "并行计算系列 GPU/TPU" (project seed 003,
"GPU环境准备" / "单机单卡" / "单机多卡", lines ~210-410), run with minitf; the post's printed
logs that the tests compare with are excerpted in tests/data/blog_003_examples.txt.

GPU examples use two emulated cards (fixture ``two_gpus``); the post's "没GPU时的结果"
(result without a GPU) uses ``cpu_only``.  Values are checked with numpy, placements by parsing
the captured ``log_device_placement`` lines.  ``tf.test.gpu_device_name`` is not part of minitf
yet and is not exercised.

The post's logs come from a 2018 TF 1.x: ``a + b`` was an ``Add`` op then; TF 1.15 / 2.21 (and
minitf, spec tf1_semantics.md §11.1) make it ``AddV2``, and the log order follows spec §3.2
(first pass in graph order, then generators such as constants in graph order).
"""

from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import PLACEMENT_RE, placements

BLOG = Path(__file__).parent / "data" / "blog_003_examples.txt"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"
ALL_DEVICES = "%s, %s, %s" % (CPU0, GPU0, GPU1)


def run_logged(capsys, sess, fetches, **kw):
    """sess.run(fetches) and the placement lines it printed."""
    capsys.readouterr()
    value = sess.run(fetches, **kw)
    return value, capsys.readouterr().out.splitlines()


def blog_log_block(title):
    """The post's printed log under ``title``: the 'Device mapping' text and the placement
    lines (plain stdout copies, not the timestamped ``placer.cc`` ones) → {name: device}."""
    lines = BLOG.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    fence = [i for i in range(start, len(lines)) if lines[i].startswith("```")][:2]
    block = lines[fence[0] + 1 : fence[1]]
    placed = {}
    for line in block:
        m = PLACEMENT_RE.match(line)
        if m:
            placed[m.group("name")] = m.group("device")
    mapping = [line for line in block if line.startswith("Device mapping")]
    return mapping, placed


def config(**kw):
    return tf.ConfigProto(**kw)


def build_vector_add():
    a = tf.constant([1.0, 2.0, 3.0], shape=[3], name="a")
    b = tf.constant([1.0, 2.0, 3.0], shape=[3], name="b")
    c = a + b
    return a, b, c


# -- "GPU环境准备": a + b with and without a GPU ----------------------------------------------


def test_vector_add_without_gpu_matches_blog_log(cpu_only, capsys):
    """Blog '没GPU时的结果': 'Device mapping: no known devices.' at session creation, then
    add, a, b all on CPU:0; result [2, 4, 6]."""
    mapping, expected = blog_log_block("没GPU时的结果")
    assert mapping == ["Device mapping: no known devices."]
    assert expected == {"add": CPU0, "a": CPU0, "b": CPU0}
    a, b, c = build_vector_add()
    capsys.readouterr()
    sess = tf.Session(config=config(log_device_placement=True))
    assert capsys.readouterr().out.splitlines() == mapping
    value, lines = run_logged(capsys, sess, c)
    placed = placements(lines)
    assert {name: dev for name, (_, dev) in placed.items()} == expected
    assert lines == ["add: (AddV2): %s" % CPU0, "a: (Const): %s" % CPU0, "b: (Const): %s" % CPU0]
    np.testing.assert_array_equal(value, np.array([2.0, 4.0, 6.0], np.float32))
    assert value.dtype == np.float32 and value.shape == (3,)


def test_vector_add_with_gpu_matches_blog_log(two_gpus, capsys):
    """Blog '有GPU时的结果': with a GPU the unpinned add and its constants go to GPU:0
    (book 'Simple placement' rule 3); result [2, 4, 6]."""
    _, expected = blog_log_block("有GPU时的结果")
    assert expected == {"add": GPU0, "a": GPU0, "b": GPU0}
    a, b, c = build_vector_add()
    sess = tf.Session(config=config(log_device_placement=True))
    value, lines = run_logged(capsys, sess, c)
    assert {name: dev for name, (_, dev) in placements(lines).items()} == expected
    assert placements(lines)["add"] == ("AddV2", GPU0)
    np.testing.assert_array_equal(value, np.array([2.0, 4.0, 6.0], np.float32))


def test_vector_add_pinned_to_gpu0(two_gpus, capsys):
    """Blog: a, b (shape [3]) and their sum built under tf.device('/gpu:0') run on GPU:0."""
    with tf.device("/gpu:0"):
        a, b, c = build_vector_add()
    assert {a.op.device, b.op.device, c.op.device} == {"/device:GPU:0"}
    sess = tf.Session(config=config(log_device_placement=True))
    value, lines = run_logged(capsys, sess, c)
    assert placements(lines) == {"add": ("AddV2", GPU0), "a": ("Const", GPU0), "b": ("Const", GPU0)}
    np.testing.assert_array_equal(value, [2.0, 4.0, 6.0])


def build_a_gpu():
    a, b, c = build_vector_add()
    with tf.device("/gpu:0"):
        a_gpu = tf.Variable(0, name="a_gpu")
    return c, a_gpu


def test_int32_variable_on_gpu_needs_soft_placement(two_gpus):
    """Blog comment: forcing tf.Variable(0) onto the GPU fails (no int32 GPU kernel for
    variables) unless allow_soft_placement is set (spec §2.5 reason 2)."""
    c, a_gpu = build_a_gpu()
    sess = tf.Session(config=config(log_device_placement=True))
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(tf.global_variables_initializer())
    assert info.value.error_code == 3
    assert (
        "Cannot assign a device for operation a_gpu: Could not satisfy explicit device "
        "specification '/device:GPU:0' because no supported kernel for GPU devices is "
        "available."
    ) in info.value.message


def test_int32_variable_on_gpu_with_soft_placement(two_gpus, capsys):
    """Blog: allow_soft_placement=True + log_device_placement=True moves a_gpu (and its
    Assign/read) to CPU:0 while the float add stays on GPU:0; prints [2. 4. 6.]."""
    c, a_gpu = build_a_gpu()
    tf.Session(config=config(log_device_placement=True))  # the blog's first, unused session
    sess = tf.Session(config=config(allow_soft_placement=True, log_device_placement=True))
    init_value, lines = run_logged(capsys, sess, tf.global_variables_initializer())
    assert init_value is None
    placed = placements(lines)
    assert placed["a_gpu"] == ("VariableV2", CPU0)
    assert placed["a_gpu/Assign"] == ("Assign", CPU0)
    assert placed["a_gpu/read"] == ("Identity", CPU0)
    assert placed["add"] == ("AddV2", GPU0)
    assert placed["a"] == ("Const", GPU0) and placed["b"] == ("Const", GPU0)
    value, lines = run_logged(capsys, sess, c)
    assert lines == []  # already placed, nothing new
    np.testing.assert_array_equal(value, np.array([2.0, 4.0, 6.0], np.float32))
    v = sess.run(a_gpu)
    assert type(v) is np.int32 and v == 0


# -- "单机单卡" / "单机多卡": get_variable on /cpu:0, math on GPUs -------------------------


def build_wb():
    with tf.device("/cpu:0"):
        w = tf.get_variable("w", (2, 2), tf.float32, initializer=tf.constant_initializer(2))
        b = tf.get_variable("b", (2, 2), tf.float32, initializer=tf.constant_initializer(5))
    return w, b


def check_wb_placement(placed):
    for v in ("w", "b"):
        assert placed[v] == ("VariableV2", CPU0)
        assert placed[v + "/Assign"] == ("Assign", CPU0)
        assert placed[v + "/read"] == ("Identity", CPU0)
        # the initializer value is created with no device but colocated with the variable
        assert placed[v + "/Initializer/Const"] == ("Const", CPU0)


def test_single_gpu_get_variable(two_gpus, capsys):
    """Blog '单机单卡': w=2, b=5 on /cpu:0, w+b and w*b on /gpu:0, tf.initialize_all_variables();
    → [[7,7],[7,7]] and [[10,10],[10,10]]."""
    w, b = build_wb()
    with tf.device("/gpu:0"):
        addwb = w + b
        mutwb = w * b
    init = tf.initialize_all_variables()
    g = tf.get_default_graph()
    assert g.get_operation_by_name("w/Initializer/Const").device == ""
    assert g.get_operation_by_name("w/Initializer/Const").get_attr("_class") == [b"loc:@w"]
    with tf.Session(config=config(log_device_placement=True)) as sess:
        _, lines = run_logged(capsys, sess, init)
        placed = placements(lines)
        check_wb_placement(placed)
        assert placed["add"] == ("AddV2", GPU0)
        assert placed["mul"] == ("Mul", GPU0)
        np1, np2 = sess.run([addwb, mutwb])
    np.testing.assert_array_equal(np1, np.full((2, 2), 7.0, np.float32))
    np.testing.assert_array_equal(np2, np.full((2, 2), 10.0, np.float32))
    assert np1.dtype == np2.dtype == np.float32


def test_multi_gpu_get_variable(two_gpus, capsys):
    """Blog '单机多卡': shared w, b on /cpu:0, w+b on /gpu:0 and w*b on /gpu:1; the blog's
    ``while 1`` loop gives the same values every time and prints no new placement."""
    w, b = build_wb()
    with tf.device("/gpu:0"):
        addwb = w + b
    with tf.device("/gpu:1"):
        mutwb = w * b
    ini = tf.initialize_all_variables()
    with tf.Session(config=config(log_device_placement=True)) as sess:
        _, lines = run_logged(capsys, sess, ini)
        placed = placements(lines)
        check_wb_placement(placed)
        assert placed["add"] == ("AddV2", GPU0)
        assert placed["mul"] == ("Mul", GPU1)
        for _ in range(3):
            (s, p), lines = run_logged(capsys, sess, [addwb, mutwb])
            assert lines == []
            np.testing.assert_array_equal(s, np.full((2, 2), 7.0, np.float32))
            np.testing.assert_array_equal(p, np.full((2, 2), 10.0, np.float32))


# -- multi-tower matmul + add_n ---------------------------------------------------------------

TOWER_A = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
PRODUCT = np.array(TOWER_A, np.float32).reshape(2, 3) @ np.array(TOWER_A, np.float32).reshape(3, 2)


def build_towers(devices):
    c = []
    for d in devices:
        with tf.device(d):
            a = tf.constant(TOWER_A, shape=[2, 3])
            b = tf.constant(TOWER_A, shape=[3, 2])
            c.append(tf.matmul(a, b))
    with tf.device("/cpu:0"):
        total = tf.add_n(c)
    return c, total


def test_multi_tower_matmul_add_n(two_gpus, capsys):
    """Blog multi-tower example over ['/gpu:0', '/gpu:1']: each MatMul (and its constants) on
    its GPU, AddN on CPU:0; sum = 2 * (a @ b) = [[44, 56], [98, 128]]."""
    c, total = build_towers(["/gpu:0", "/gpu:1"])
    assert [t.op.name for t in c] == ["MatMul", "MatMul_1"]
    assert total.op.name == "AddN" and total.op.type == "AddN"
    sess = tf.Session(config=config(log_device_placement=True))
    value, lines = run_logged(capsys, sess, total)
    assert placements(lines) == {
        "MatMul": ("MatMul", GPU0),
        "MatMul_1": ("MatMul", GPU1),
        "AddN": ("AddN", CPU0),
        "Const": ("Const", GPU0),
        "Const_1": ("Const", GPU0),
        "Const_2": ("Const", GPU1),
        "Const_3": ("Const", GPU1),
    }
    assert lines[:3] == [
        "MatMul: (MatMul): %s" % GPU0,
        "MatMul_1: (MatMul): %s" % GPU1,
        "AddN: (AddN): %s" % CPU0,
    ]
    np.testing.assert_array_equal(value, 2 * PRODUCT)
    np.testing.assert_array_equal(value, [[44.0, 56.0], [98.0, 128.0]])
    assert value.dtype == np.float32


def test_multi_tower_on_missing_gpus(two_gpus, capsys):
    """Blog's original device list ['/device:GPU:2', '/device:GPU:3'] on a 2-GPU machine: no
    such device (spec §2.5 reason 1, no 'CUDA is not enabled' suffix since GPUs exist); with
    soft placement both towers fall back to GPU:0 (spec §2.6)."""
    c, total = build_towers(["/device:GPU:2", "/device:GPU:3"])
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(total)
    msg = info.value.message
    assert (
        "Cannot assign a device for operation MatMul: {{node MatMul}} was explicitly "
        "assigned to /device:GPU:2 but available devices are [ %s ]. Make sure the device "
        "specification refers to a valid device." % ALL_DEVICES
    ) in msg
    assert msg.endswith("\n\t [[MatMul]]")
    assert "CUDA is not enabled" not in msg

    soft = tf.Session(config=config(allow_soft_placement=True, log_device_placement=True))
    value, lines = run_logged(capsys, soft, total)
    placed = placements(lines)
    assert placed["MatMul"] == ("MatMul", GPU0)
    assert placed["MatMul_1"] == ("MatMul", GPU0)
    assert placed["AddN"] == ("AddN", CPU0)
    np.testing.assert_array_equal(value, 2 * PRODUCT)


# -- tower-style gradient averaging (expand_dims + concat + reduce_mean) ----------------------


def average_gradients(tower_grads):
    """The blog's average_gradients: per variable, stack the towers' gradients on a new axis 0
    and average over it; None gradients are skipped."""
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        grads = []
        for g, _ in grad_and_vars:
            if g is None:
                continue
            grads.append(tf.expand_dims(g, 0))
        if grads:
            grad = tf.concat(axis=0, values=grads)
            grad = tf.reduce_mean(grad, 0)
        else:
            grad = None
        v = grad_and_vars[0][1]
        average_grads.append((grad, v))
    return average_grads


TOWER_GRADS = [
    # tower 0: gradients for (kernel [2, 2], bias [2], frozen)
    (np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.array([1.0, -1.0], np.float32)),
    (np.array([[5.0, 6.0], [7.0, 8.0]], np.float32), np.array([3.0, 1.0], np.float32)),
]


def test_average_gradients_values_and_ops(cpu_only):
    """Blog 'average_gradients' with plain tensors: the mean over towers per variable; op types
    ExpandDims / ConcatV2 / Mean; static shapes [1,2,2] → [2,2,2] → [2,2]; None grads are
    skipped; the variable of tower 0 is returned."""
    tower_grads = []
    for i, (gk, gb) in enumerate(TOWER_GRADS):
        with tf.name_scope("tower_%d" % i):
            tower_grads.append(
                [
                    (tf.constant(gk, name="grad_kernel"), "kernel"),
                    (tf.constant(gb, name="grad_bias"), "bias"),
                    (None, "frozen"),
                ]
            )
    averaged = average_gradients(tower_grads)
    assert [v for _, v in averaged] == ["kernel", "bias", "frozen"]
    assert averaged[2][0] is None
    kernel, bias = averaged[0][0], averaged[1][0]
    assert kernel.op.type == "Mean" and bias.op.type == "Mean"
    concat = kernel.op.inputs[0]
    assert concat.op.type == "ConcatV2"
    assert concat.shape.as_list() == [2, 2, 2]
    assert [t.op.type for t in concat.op.inputs[:2]] == ["ExpandDims", "ExpandDims"]
    assert concat.op.inputs[0].shape.as_list() == [1, 2, 2]
    assert kernel.shape.as_list() == [2, 2] and bias.shape.as_list() == [2]
    sess = tf.Session()
    k, b, stacked = sess.run([kernel, bias, concat])
    np.testing.assert_allclose(k, np.mean([g[0] for g in TOWER_GRADS], axis=0))
    np.testing.assert_allclose(b, np.mean([g[1] for g in TOWER_GRADS], axis=0))
    np.testing.assert_array_equal(k, [[3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(b, [2.0, 0.0])
    np.testing.assert_array_equal(stacked, np.stack([g[0] for g in TOWER_GRADS]))
    assert k.dtype == b.dtype == np.float32


def test_average_gradients_across_gpu_towers(two_gpus, capsys):
    """Blog tower loop: per-tower values built under tf.device('/gpu:i') + name_scope
    'tower_i', averaged under /cpu:0 (as the multi-GPU training code keeps shared updates on the
    CPU); towers run on their GPUs, averaging ops on CPU:0."""
    tower_grads = []
    for i, (gk, _gb) in enumerate(TOWER_GRADS):
        with tf.device("/gpu:%d" % i), tf.name_scope("tower_%d" % i):
            x = tf.constant(gk, name="x")
            grad = tf.multiply(x, 2.0, name="grad")  # something computed on the tower's GPU
            tower_grads.append([(grad, "kernel")])
    with tf.device("/cpu:0"):
        [(avg, _)] = average_gradients(tower_grads)
    sess = tf.Session(config=config(log_device_placement=True))
    value, lines = run_logged(capsys, sess, avg)
    placed = placements(lines)
    assert placed["tower_0/grad"] == ("Mul", GPU0)
    assert placed["tower_1/grad"] == ("Mul", GPU1)
    assert placed[avg.op.name] == ("Mean", CPU0)
    assert placed[avg.op.inputs[0].op.name] == ("ConcatV2", CPU0)
    expand_names = [t.op.name for t in avg.op.inputs[0].op.inputs[:2]]
    assert [placed[n] for n in expand_names] == [("ExpandDims", CPU0)] * 2
    np.testing.assert_allclose(value, np.mean([2 * g[0] for g in TOWER_GRADS], axis=0))
    np.testing.assert_array_equal(value, [[6.0, 8.0], [10.0, 12.0]])


def test_multi_tower_on_four_emulated_gpus(capsys):
    """The blog's towers on '/device:GPU:2' and '/device:GPU:3' as written, with four emulated
    cards (notebook 01b): each MatMul on its card, AddN on CPU:0."""
    tf.config.emulate_gpus(4)
    c, total = build_towers(["/device:GPU:2", "/device:GPU:3"])
    sess = tf.Session(config=config(log_device_placement=True))
    value, lines = run_logged(capsys, sess, total)
    placed = placements(lines)
    assert placed["MatMul"] == ("MatMul", GPU0.replace("GPU:0", "GPU:2"))
    assert placed["MatMul_1"] == ("MatMul", GPU0.replace("GPU:0", "GPU:3"))
    assert placed["AddN"] == ("AddN", CPU0)
    np.testing.assert_array_equal(value, [[44.0, 56.0], [98.0, 128.0]])


def test_environment_cell_log_level_5_and_visible_devices(monkeypatch, capsys):
    """The post's first cell: TF_CPP_MIN_LOG_LEVEL='5' hides every C++ log line (no 'Creating
    TensorFlow device'), CUDA_VISIBLE_DEVICES='0,1,2' leaves three of four cards, and the int32
    variable pinned to /gpu:0 goes to the CPU under allow_soft_placement."""
    tf.config.emulate_gpus(4)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    _, _, c = build_vector_add()
    with tf.device("/gpu:0"):
        tf.Variable(0, name="a_gpu")
    capsys.readouterr()
    sess = tf.Session(config=config(allow_soft_placement=True, log_device_placement=True))
    sess.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(c), [2.0, 4.0, 6.0])
    out = capsys.readouterr().out.splitlines()
    assert not any(ln.startswith("Created TensorFlow device") for ln in out)
    mapping = [ln for ln in out if ln.startswith("/job:localhost") and " -> " in ln]
    assert [ln.split(" -> ")[0].rsplit(":", 1)[-1] for ln in mapping] == ["0", "1", "2"]
    placed = placements([ln for ln in out if PLACEMENT_RE.match(ln)])
    assert placed["a_gpu"] == ("VariableV2", CPU0) and placed["add"] == ("AddV2", GPU0)
