"""``tf.train`` optimizers, their slots and the global step (reference part 2 §17).

The conformance cases of §17.5 (names, colocation, values after a few steps, error texts, the
placements under ``replica_device_setter``), and the other optimizers' slots and values as TF
2.21's ``tf.compat.v1`` prints them for the same graph.
"""

import logging
import threading

import numpy as np
import pytest

import minitf as tf
from minitf.ops import math_ops
from minitf.train import training_util


@pytest.fixture(autouse=True)
def _cpu(cpu_only):
    """The recorded TF outputs come from a CPU-only machine."""


def _model():
    """§17.5's model: w=[1,2], b=0.5, loss = sum(w²) + b·b."""
    w = tf.Variable([1.0, 2.0], name="w")
    b = tf.Variable(0.5, name="b")
    loss = tf.reduce_sum(tf.square(w)) + b * b
    return w, b, loss


def _names():
    return [op.name for op in tf.get_default_graph().get_operations()]


def _session():
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    return sess


# -- the global step ---------------------------------------------------------------------------


def test_get_or_create_global_step():
    """An int64 scalar VariableV2 ``global_step`` in collections variables and global_step,
    not trainable; a second create fails; get_* return the same variable."""
    gs = tf.train.get_or_create_global_step()
    assert gs.name == "global_step:0" and gs.dtype == tf.int64._as_ref
    assert gs.op.type == "VariableV2" and gs.shape.as_list() == []
    g = tf.get_default_graph()
    assert g.get_collection(tf.GraphKeys.GLOBAL_STEP) == [gs]
    assert gs in tf.global_variables() and gs not in tf.trainable_variables()
    assert _names() == [
        "global_step/Initializer/zeros",
        "global_step",
        "global_step/Assign",
        "global_step/read",
    ]
    with pytest.raises(ValueError, match='^"global_step" already exists.$'):
        tf.train.create_global_step()
    assert tf.train.get_global_step() is gs and tf.train.get_or_create_global_step() is gs
    sess = _session()
    assert tf.train.global_step(sess, gs) == 0 and type(tf.train.global_step(sess, gs)) is int


def test_global_step_ignores_name_scopes_not_variable_scopes():
    with tf.name_scope("outer"):
        assert tf.train.create_global_step().name == "global_step:0"
    tf.reset_default_graph()
    with tf.variable_scope("model"):
        assert tf.train.create_global_step().name == "model/global_step:0"


def test_get_global_step_rules(caplog):
    """None without one; the tensor ``global_step:0`` if the collection is empty; None and an
    error logged for two; TF's TypeErrors for a float or non-scalar one."""
    assert tf.train.get_global_step() is None
    t = tf.constant(3, tf.int64, name="global_step")
    assert tf.train.get_global_step() is t
    g = tf.get_default_graph()
    g.add_to_collection(tf.GraphKeys.GLOBAL_STEP, t)
    g.add_to_collection(tf.GraphKeys.GLOBAL_STEP, t)
    with caplog.at_level(logging.ERROR, logger="minitf"):
        assert tf.train.get_global_step() is None
    assert "Multiple tensors in global_step collection." in caplog.text
    tf.reset_default_graph()
    f = tf.Variable(0.0, name="global_step")
    with pytest.raises(TypeError, match='Existing "global_step" does not have integer type: '):
        tf.train.get_global_step()
    tf.reset_default_graph()
    tf.Variable([1, 2], name="global_step")
    with pytest.raises(TypeError, match=r'Existing "global_step" is not scalar: \(2,\)'):
        tf.train.get_or_create_global_step()
    with pytest.raises(TypeError, match="must be a Variable or Tensor: 3."):
        training_util.assert_global_step(3)
    assert f is not None


# -- GradientDescent ---------------------------------------------------------------------------


def test_gradient_descent_conformance():
    """§17.5: compute_gradients' names, apply_gradients' ops and colocation, one step."""
    w, b, loss = _model()
    gs = tf.train.get_or_create_global_step()
    opt = tf.train.GradientDescentOptimizer(0.1)
    gv = opt.compute_gradients(loss)
    assert [(g.name, v.name) for g, v in gv] == [
        ("gradients/Square_grad/Mul_1:0", "w:0"),
        ("gradients/AddN:0", "b:0"),
    ]
    before = set(_names())
    train = opt.apply_gradients(gv, global_step=gs)
    assert isinstance(train, tf.Operation) and train.name == "GradientDescent"
    assert train.type == "AssignAdd"
    assert [n for n in _names() if n not in before] == [
        "GradientDescent/learning_rate",
        "GradientDescent/update_w/ApplyGradientDescent",
        "GradientDescent/update_b/ApplyGradientDescent",
        "GradientDescent/update",
        "GradientDescent/value",
        "GradientDescent",
    ]
    g = tf.get_default_graph()
    apply_w = g.get_operation_by_name("GradientDescent/update_w/ApplyGradientDescent")
    assert apply_w.get_attr("_class") == [b"loc:@w"]
    assert train.get_attr("_class") == [b"loc:@global_step"]
    value = g.get_operation_by_name("GradientDescent/value")  # (the AssignAdd waits through it)
    assert [op.name for op in value.control_inputs] == ["GradientDescent/update"]
    assert g.get_collection(tf.GraphKeys.TRAIN_OP) == [train]
    sess = _session()
    assert sess.run(train) is None
    wv, bv = sess.run([w, b])
    np.testing.assert_allclose(wv, [0.8, 1.6], rtol=1e-6)
    assert bv == pytest.approx(0.4) and tf.train.global_step(sess, gs) == 1


def test_without_global_step_the_group_is_the_train_op():
    w, b, loss = _model()
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    assert train.name == "GradientDescent" and train.type == "NoOp"
    assert sorted(op.name for op in train.control_inputs) == [
        "GradientDescent/update_b/ApplyGradientDescent",
        "GradientDescent/update_w/ApplyGradientDescent",
    ]
    second = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    assert second.name == "GradientDescent_1"


def test_learning_rate_as_tensor_or_callable():
    """A placeholder learning rate is fed per step; a callable is called when the update is
    built; a float64 variable gets the rate cast (``update_w/Cast``)."""
    w, b, loss = _model()
    lr = tf.placeholder(tf.float32, [], name="lr")
    train = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    calls = []
    v = tf.Variable(np.float64(1.0), name="v")
    lr_fn = tf.train.GradientDescentOptimizer(lambda: calls.append(1) or 0.25)
    train_v = lr_fn.apply_gradients([(tf.constant(np.float64(2.0)), v)])
    assert calls == [1] and "GradientDescent_1/update_v/Cast" in _names()
    sess = _session()
    sess.run(train, {lr: 0.5})
    np.testing.assert_allclose(sess.run(w), [0.0, 0.0], atol=1e-7)
    sess.run(train_v)
    assert sess.run(v) == pytest.approx(0.5)


def test_use_locking_reaches_the_update_ops():
    w, b, loss = _model()
    tf.train.GradientDescentOptimizer(0.1, use_locking=True).minimize(loss)
    op = tf.get_default_graph().get_operation_by_name(
        "GradientDescent/update_w/ApplyGradientDescent"
    )
    assert op.get_attr("use_locking") is True


def test_hogwild_steps_from_many_threads_all_count_in_the_global_step():
    """Async training in one process: 4 threads run the same train op (use_locking=False,
    updates race); every step's AssignAdd of the global step lands."""
    w, b, loss = _model()
    gs = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=gs)
    sess = _session()

    def worker():
        for _ in range(10):
            sess.run(train)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tf.train.global_step(sess, gs) == 40
    assert np.all(sess.run(w) < [1.0, 2.0])


# -- Momentum ------------------------------------------------------------------------------------


def test_momentum_conformance():
    """§17.5: NoOp ``mom_train``, slot ``w/Momentum``; from w=[0.8,1.6] two steps."""
    w, b, loss = _model()
    opt = tf.train.MomentumOptimizer(0.1, 0.9)
    train = opt.minimize(loss, name="mom_train")
    assert train.name == "mom_train" and train.type == "NoOp"
    slot = opt.get_slot(w, "momentum")
    assert slot.name == "w/Momentum:0" and opt.get_slot_names() == ["momentum"]
    assert slot.op.get_attr("_class") == [b"loc:@w"]
    assert slot not in tf.trainable_variables() and slot in tf.global_variables()
    assert "w/Momentum/Initializer/zeros" in _names()
    assert "mom_train/update_w/ApplyMomentum" in _names()
    assert opt.get_slot(w, "nope") is None
    assert opt.get_slot(tf.Variable(1.0, name="other"), "momentum") is None
    sess = _session()
    w.load([0.8, 1.6], sess)
    sess.run(train)
    sess.run(train)
    np.testing.assert_allclose(sess.run(w), [0.368, 0.736], rtol=1e-5)
    np.testing.assert_allclose(sess.run(slot), [2.72, 5.44], rtol=1e-5)


def test_nesterov_momentum_and_gate_graph():
    """Nesterov's update (values of TF 2.21's compat.v1 for the same steps) and
    ``GATE_GRAPH``: every gradient passed through one ``tuple``."""
    w, b, loss = _model()
    opt = tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True)
    train = opt.minimize(loss, gate_gradients=tf.train.Optimizer.GATE_GRAPH)
    apply_w = tf.get_default_graph().get_operation_by_name("Momentum/update_w/ApplyMomentum")
    assert apply_w.get_attr("use_nesterov") is True
    assert apply_w.inputs[3].name == "tuple/control_dependency:0"  # (outside gradients/)
    sess = _session()
    sess.run(train)
    acc = np.array([2.0, 4.0])
    np.testing.assert_allclose(sess.run(w), [1, 2] - 0.1 * acc - 0.1 * 0.9 * acc, rtol=1e-6)


def test_gating_and_colocating_gradients():
    """GATE_OP (default): each op's input gradients through a ``tuple``; GATE_NONE: none;
    ``colocate_gradients_with_ops``: each gradient op colocated with its forward op."""
    x = tf.constant([[1.0, 2.0]])
    W = tf.Variable([[1.0, 0.5], [-1.0, 2.0]], name="W")  # noqa: N806 - the book's name
    b = tf.Variable([0.5, -0.5], name="b")
    loss = tf.reduce_sum(tf.matmul(x, W) + b)
    opt = tf.train.GradientDescentOptimizer(0.1)
    assert [g.name for g, _ in opt.compute_gradients(loss)] == [
        "gradients/MatMul_grad/tuple/control_dependency_1:0",
        "gradients/add_grad/tuple/control_dependency_1:0",
    ]
    gv = opt.compute_gradients(loss, gate_gradients=opt.GATE_NONE)
    assert [g.name for g, _ in gv] == [
        "gradients_1/MatMul_grad/MatMul_1:0",
        "gradients_1/add_grad/Reshape_1:0",
    ]
    gv = opt.compute_gradients(loss, gate_gradients=0, colocate_gradients_with_ops=True)
    assert gv[0][0].op.get_attr("_class") == [b"loc:@MatMul"]


def test_momentum_hyperparameters_as_callables_and_tensors():
    w, b, loss = _model()
    momentum = tf.placeholder(tf.float32, [], name="mu")
    opt = tf.train.MomentumOptimizer(lambda: 0.1, momentum)
    train = opt.minimize(loss, var_list=[b])
    assert "Momentum/learning_rate" in _names()
    sess = _session()
    sess.run(train, {momentum: 0.0})
    sess.run(train, {momentum: 0.5})  # accum = 0.5 * 1.0 + 0.8 = 1.3
    assert sess.run(b) == pytest.approx(0.4 - 0.13)


def test_second_optimizer_gets_numbered_slots():
    w, b, loss = _model()
    first, second = tf.train.MomentumOptimizer(0.1, 0.9), tf.train.MomentumOptimizer(0.1, 0.9)
    first.minimize(loss)
    second.minimize(loss)
    assert first.get_slot(w, "momentum").name == "w/Momentum:0"
    assert second.get_slot(w, "momentum").name == "w/Momentum_1:0"


# -- Adam ------------------------------------------------------------------------------------------


def test_adam_conformance():
    """§17.5: NoOp ``Adam``; variables(); one step from w=[0.368,0.736]; beta1_power 0.81."""
    w, b, loss = _model()
    opt = tf.train.AdamOptimizer()
    train = opt.minimize(loss)
    assert train.name == "Adam" and train.type == "NoOp"
    assert [v.name for v in opt.variables()] == [
        "b/Adam:0",
        "b/Adam_1:0",
        "beta1_power:0",
        "beta2_power:0",
        "w/Adam:0",
        "w/Adam_1:0",
    ]
    assert opt.get_slot_names() == ["m", "v"] and opt.get_slot(w, "v").name == "w/Adam_1:0"
    names = _names()
    for n in ("Adam/update_w/ApplyAdam", "Adam/mul", "Adam/Assign", "Adam/mul_1", "Adam/Assign_1"):
        assert n in names
    sess = _session()
    w.load([0.368, 0.736], sess)
    sess.run(train)
    np.testing.assert_allclose(sess.run(w), [0.367, 0.735], rtol=1e-5)
    beta1_power, beta2_power = opt._get_beta_accumulators()
    assert sess.run(beta1_power) == pytest.approx(0.81)
    assert sess.run(beta2_power) == pytest.approx(0.999**2)


def test_adam_non_slot_variables_once_per_graph():
    """A second apply_gradients reuses the beta powers; variables() lists only this graph's."""
    w, b, loss = _model()
    opt = tf.train.AdamOptimizer(0.01)
    opt.minimize(loss)
    opt.minimize(loss)
    assert [v.name for v in opt.variables()].count("beta1_power:0") == 1
    with tf.Graph().as_default():
        assert opt.variables() == []


def test_adam_in_a_name_scope_names_its_powers_there_and_its_slots_by_variable():
    """TF's init_scope keeps the name scope (TF 2.21 compat.v1 shows the same): the book's
    ``with tf.name_scope("train"): optimizer.minimize(loss)`` makes ``train/beta1_power``,
    while the slots are named by their variable, ``w/Adam``."""
    w, b, loss = _model()
    with tf.name_scope("train"):
        with tf.control_dependencies([tf.no_op(name="before")]):
            tf.train.AdamOptimizer(0.01).minimize(loss)
    names = {v.op.name for v in tf.global_variables()}
    assert {"train/beta1_power", "train/beta2_power", "w/Adam", "w/Adam_1", "b/Adam"} <= names
    power = tf.get_default_graph().get_operation_by_name("train/beta1_power")
    assert power.control_inputs == []  # made outside the control dependency


def test_placement_under_replica_device_setter():
    """§17.5: variables round-robin over 2 ps tasks; slots and beta powers follow their
    variable by colocation (the device setter is not asked); updates run on the ps tasks."""
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
        gs = tf.train.get_or_create_global_step()
        w, b, loss = _model()
        opt = tf.train.AdamOptimizer()
        train = opt.minimize(loss, global_step=gs)
    g = tf.get_default_graph()

    def where(name):
        op = g.get_operation_by_name(name)
        return op.device, (op.get_attr("_class") if "_class" in op._attrs else None)

    assert gs.device == "/job:ps/task:0" and w.device == "/job:ps/task:1"
    assert b.device == "/job:ps/task:0"
    assert where("w/Adam") == ("/job:ps/task:1", [b"loc:@w"])
    assert where("w/Adam_1") == ("/job:ps/task:1", [b"loc:@w"])
    assert where("beta1_power") == ("/job:ps/task:0", [b"loc:@b"])
    assert where("beta2_power") == ("/job:ps/task:0", [b"loc:@b"])
    assert where("Adam/update_w/ApplyAdam")[0] == "/job:ps/task:1"
    assert where("Adam/update")[0] == "/job:worker/task:0"
    assert train.name == "Adam" and train.device == "/job:ps/task:0"
    # the group waits for one NoOp per device (TF's group of ops on several devices)
    assert where("Adam/update/NoOp")[0] == "/job:ps/task:0"
    assert where("Adam/update/NoOp_1")[0] == "/job:ps/task:1"


# -- RMSProp and Adagrad -----------------------------------------------------------------------


def test_rmsprop_slots_and_values():
    """Slots ``rms`` (ones, TF 1.15) then ``momentum``; values of TF 2.21's compat.v1."""
    w, b, loss = _model()
    opt = tf.train.RMSPropOptimizer(0.01, momentum=0.5)
    train = opt.minimize(loss)
    assert [v.name for v in opt.variables()] == [
        "b/RMSProp:0",
        "b/RMSProp_1:0",
        "w/RMSProp:0",
        "w/RMSProp_1:0",
    ]
    assert opt.get_slot_names() == ["momentum", "rms"]
    assert "RMSProp/update_w/ApplyRMSProp" in _names()
    sess = _session()
    np.testing.assert_array_equal(sess.run(opt.get_slot(w, "rms")), [1.0, 1.0])
    sess.run(train)
    np.testing.assert_allclose(sess.run(w), [0.98245883, 1.9747018], rtol=1e-5)
    assert sess.run(b) == pytest.approx(0.49, rel=1e-5)


def test_centered_rmsprop():
    w, b, loss = _model()
    opt = tf.train.RMSPropOptimizer(0.01, centered=True, name="C")
    train = opt.minimize(loss)
    assert opt.get_slot_names() == ["mg", "momentum", "rms"]
    assert opt.get_slot(w, "mg").name == "w/C_1:0"
    assert opt.get_slot(w, "momentum").name == "w/C_2:0"
    assert "C/update_w/ApplyCenteredRMSProp" in _names()
    sess = _session()
    sess.run(train)
    mg = 0.1 * np.array([2.0, 4.0])
    ms = 0.9 + 0.1 * np.array([4.0, 16.0])
    expected = [1.0, 2.0] - 0.01 * np.array([2.0, 4.0]) / np.sqrt(ms - mg**2 + 1e-10)
    np.testing.assert_allclose(sess.run(w), expected, rtol=1e-5)


def test_adagrad():
    """Slot ``accumulator`` (``w/Adagrad``, starting at 0.1); one step; a non-positive
    initial value is refused."""
    w, b, loss = _model()
    opt = tf.train.AdagradOptimizer(0.1)
    train = opt.minimize(loss)
    assert [v.name for v in opt.variables()] == ["b/Adagrad:0", "w/Adagrad:0"]
    sess = _session()
    np.testing.assert_allclose(sess.run(opt.get_slot(w, "accumulator")), [0.1, 0.1], rtol=1e-6)
    sess.run(train)
    g = np.array([2.0, 4.0])
    np.testing.assert_allclose(sess.run(w), [1, 2] - 0.1 * g / np.sqrt(0.1 + g * g), rtol=1e-5)
    with pytest.raises(ValueError, match="^initial_accumulator_value must be positive: 0.0$"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)


# -- errors ----------------------------------------------------------------------------------------


def test_minimize_a_constant():
    _model()
    with pytest.raises(ValueError) as info:
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.constant(1.0))
    assert str(info.value) == (
        "No gradients provided for any variable, check your graph for ops that do not support "
        "gradients, between variables [\"<tf.Variable 'w:0' shape=(2,) dtype=float32_ref>\", "
        "\"<tf.Variable 'b:0' shape=() dtype=float32_ref>\"] and loss "
        'Tensor("Const_1:0", shape=(), dtype=float32).'
    )


def test_optimizer_errors():
    """TF's texts (as TF 2.21's compat.v1 prints them, less bfloat16 in the dtype list)."""
    w, b, loss = _model()
    opt = tf.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="^No variables provided.$"):
        opt.apply_gradients([])
    with pytest.raises(ValueError) as info:
        opt.apply_gradients([(None, w), (None, b)])
    assert str(info.value) == (
        "No gradients provided for any variable: [\"<tf.Variable 'w:0' shape=(2,) "
        'dtype=float32_ref>", "<tf.Variable \'b:0\' shape=() dtype=float32_ref>"].'
    )
    with pytest.raises(TypeError, match="^Gradient must be convertible to a Tensor or "):
        opt.apply_gradients([(object(), w)])
    with pytest.raises(ValueError, match=r"GATE_GRAPH.  Not 5$"):
        opt.compute_gradients(loss, gate_gradients=5)
    with pytest.raises(ValueError) as info:
        opt.compute_gradients(tf.constant(1))
    assert str(info.value) == (
        "Invalid type tf.int32 for Const_1:0, expected: [tf.float32, tf.float64, tf.float16]."
    )
    with pytest.raises(ValueError, match="^Must specify the optimizer name$"):
        tf.train.GradientDescentOptimizer(0.1, name="")
    with pytest.raises(NotImplementedError):
        tf.train.Optimizer(False, "Base").apply_gradients([(tf.constant([1.0, 1.0]), w)])
    assert opt.get_name() == "GradientDescent"


class _TwiceTheStep(tf.train.Optimizer):
    """A subclass as TF's own are written: a slot made from a tensor, a dense update."""

    def __init__(self):
        super().__init__(False, "Twice")

    def _create_slots(self, var_list):
        for v in var_list:
            self._get_or_make_slot(v, tf.ones(v.get_shape().as_list()) * 2.0, "scale", "Twice")

    def _apply_dense(self, grad, var):
        return var.assign_sub(grad * self.get_slot(var, "scale")).op


def test_a_subclass_with_its_own_slot_and_update():
    w, b, loss = _model()
    opt = _TwiceTheStep()
    train = opt.minimize(loss, var_list=[w])
    assert opt.get_slot(w, "scale").name == "w/Twice:0" and "Twice/update_w/AssignSub" in _names()
    sess = _session()
    sess.run(train)
    np.testing.assert_allclose(sess.run(w), [1 - 4.0, 2 - 8.0])


def test_no_variables_to_optimize():
    loss = tf.constant(1.0) * 2.0
    with pytest.raises(ValueError, match="^No variables to optimize.$"):
        tf.train.AdamOptimizer().compute_gradients(loss)


def test_an_int_variable_gets_no_gradient():
    """An int variable gets a None gradient, so minimize reports no gradients."""
    i = tf.Variable(3, name="i")
    loss = tf.cast(i, tf.float32) * 2.0
    gv = tf.train.GradientDescentOptimizer(0.1).compute_gradients(loss, var_list=[i])
    assert gv == [(None, i)]
    with pytest.raises(ValueError, match="^No gradients provided for any variable, check"):
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[i])


# -- exponential_decay ----------------------------------------------------------------------------


def test_exponential_decay_graph_and_values():
    """TF's ops (``ExponentialDecay/...``) and ``0.1 * 0.5 ** (step / 10)``, floored with
    ``staircase``."""
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.1, gs, 10, 0.5, staircase=True)
    assert lr.name == "ExponentialDecay:0" and lr.op.type == "Mul"
    assert [n for n in _names() if n.startswith("ExponentialDecay")] == [
        "ExponentialDecay/initial_learning_rate",
        "ExponentialDecay/Cast/x",
        "ExponentialDecay/Cast",
        "ExponentialDecay/Cast_1/x",
        "ExponentialDecay/Cast_2",
        "ExponentialDecay/truediv",
        "ExponentialDecay/Floor",
        "ExponentialDecay/Pow",
        "ExponentialDecay",
    ]
    smooth = tf.train.exponential_decay(0.1, gs, 10, 0.5, name="smooth")
    assert smooth.name == "smooth:0"
    sess = _session()
    gs.load(15, sess)
    assert sess.run(lr) == pytest.approx(0.05)
    assert sess.run(smooth) == pytest.approx(0.1 * 0.5**1.5)
    with pytest.raises(ValueError, match="^global_step is required for exponential_decay.$"):
        tf.train.exponential_decay(0.1, None, 10, 0.5)


def test_decayed_rate_drives_an_optimizer():
    w, b, loss = _model()
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(1.0, gs, 1, 0.5, staircase=True)
    train = tf.train.GradientDescentOptimizer(lr).minimize(loss, var_list=[b], global_step=gs)
    sess = _session()
    sess.run(train)  # step 0: lr 1 -> b = 0.5 - 1 * 1.0
    sess.run(train)  # step 1: lr 0.5 -> b = -0.5 - 0.5 * -1.0
    assert sess.run(b) == pytest.approx(0.0) and tf.train.global_step(sess, gs) == 2


def test_pow_and_floor():
    x = math_ops.pow(tf.constant([2.0, 3.0]), 2.0)
    y = math_ops.pow(tf.constant([[2], [3]]), tf.constant([1, 2]))
    f = math_ops.floor(tf.constant([-1.5, 2.5]))
    assert x.op.name == "Pow" and f.op.name == "Floor" and y.shape.as_list() == [2, 2]
    bad = math_ops.pow(tf.constant(2), tf.constant(-1))
    sess = tf.Session()
    np.testing.assert_allclose(sess.run(x), [4.0, 9.0])
    np.testing.assert_array_equal(sess.run(y), [[2, 4], [3, 9]])
    np.testing.assert_array_equal(sess.run(f), [-2.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative integer powers"):
        sess.run(bad)
    p, q = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs"):
        sess.run(math_ops.pow(p, q), {p: [1.0, 2.0], q: [1.0, 2.0, 3.0]})


# -- between-graph replication on a cluster --------------------------------------------------------


def _worker_graph(task):
    """The graph every worker builds (§18.1): variables on the ps tasks, the rest local."""
    graph = tf.Graph()
    with graph.as_default():
        setter = tf.train.replica_device_setter(
            ps_tasks=2, worker_device="/job:worker/task:%d" % task
        )
        with tf.device(setter):
            gs = tf.train.get_or_create_global_step()
            w, b, loss = _model()
            train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=gs)
            init = tf.global_variables_initializer()
    return graph, gs, w, train, init


@pytest.mark.cluster
def test_async_training_on_a_cluster():
    """Two workers in their own graphs share w, b and the global step on two ps tasks; the
    update ops run on the ps tasks (the step's stats name their devices)."""
    from minitf.distributed.local_cluster import free_port

    spec = {
        "ps": ["localhost:%d" % free_port() for _ in range(2)],
        "worker": ["localhost:%d" % free_port() for _ in range(2)],
    }
    servers = [
        tf.train.Server(spec, job_name=j, task_index=i) for j in spec for i in range(len(spec[j]))
    ]
    try:
        graphs = [_worker_graph(i) for i in range(2)]
        sessions = [tf.Session(servers[2 + i].target, graph=graphs[i][0]) for i in range(2)]
        sessions[0].run(graphs[0][4])
        md = tf.RunMetadata()
        sessions[0].run(graphs[0][3], options=tf.RunOptions(trace_level=3), run_metadata=md)
        where = {n.node_name: d.device for d in md.step_stats.dev_stats for n in d.node_stats}
        assert "/job:ps/replica:0/task:1" in where["GradientDescent/update_w/ApplyGradientDescent"]
        assert "/job:ps/replica:0/task:0" in where["GradientDescent"]
        threads = [
            threading.Thread(target=lambda s=s, g=g: [s.run(g[3]) for _ in range(10)])
            for s, g in zip(sessions, graphs)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert tf.train.global_step(sessions[1], graphs[1][1]) == 21
        assert np.all(sessions[1].run(graphs[1][2]) < [1.0, 2.0])
        for s in sessions:
            s.close()
    finally:
        for s in servers:
            s.stop()


# -- on GPUs -------------------------------------------------------------------------------------


def _steps(device, optimizer, steps, slot=None):
    """``w`` and ``b`` (and ``w``'s ``slot``) after ``steps`` runs of ``optimizer.minimize``
    on ``device``.  Plain SGD writes ``lr * grad`` into the gradient's buffer where the
    gradient dies with the update (runtime/tensor_lifetime.py)."""
    tf.reset_default_graph()
    with tf.device(device):
        w, b, loss = _model()
        opt = optimizer()
        train = opt.minimize(loss)
    sess = _session()
    for _ in range(steps):
        sess.run(train)
    return sess.run([w, b] + ([opt.get_slot(w, slot)] if slot else []))


def _adam_steps(device, steps=3):
    return _steps(device, lambda: tf.train.AdamOptimizer(0.1), steps, "m")


def _sgd_steps(device, steps=2):
    return _steps(device, lambda: tf.train.GradientDescentOptimizer(0.1), steps)


@pytest.mark.usefixtures("two_gpus")
def test_training_on_an_emulated_gpu_equals_the_cpu():
    """Variables, slots and updates on /gpu:0 (an emulated card) give the CPU's values."""
    for got, want in zip(_adam_steps("/gpu:0"), _adam_steps("/cpu:0")):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.cudasim
@pytest.mark.usefixtures("two_gpus", "cuda_kernels", "fast_thread_switching")
def test_training_on_the_cuda_backend_equals_the_cpu():
    """The same on the CUDA backend (Numba's simulator): slots live on the card."""
    for got, want in zip(_adam_steps("/gpu:0", steps=1), _adam_steps("/cpu:0", steps=1)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for got, want in zip(_sgd_steps("/gpu:0"), _sgd_steps("/cpu:0")):
        np.testing.assert_allclose(got, want, rtol=1e-5)
