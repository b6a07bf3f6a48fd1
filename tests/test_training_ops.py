"""The ``Apply*`` training ops and their kernels (minitf/ops/training_ops.py,
minitf/kernels/training_kernels.py), checked against numpy versions of TF's formulas.

Each kernel runs with random shapes, slots and hyperparameters on the CPU, on an emulated GPU
card (the numpy backend) and on the CUDA backend under Numba's simulator (marked ``cudasim``,
few and tiny examples).  The update must happen in the variable's own buffer, honour
``use_locking`` and fail with TF's messages.
"""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.framework import errors
from minitf.kernels.registry import supported_device_types
from minitf.ops import training_ops

GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


# -- numpy references (TF's functors in core/kernels/training_ops.cc) --------------------------


def ref_gradient_descent(var, alpha, delta):
    return [var - alpha * delta]


def ref_momentum(var, accum, lr, grad, momentum, use_nesterov=False):
    accum = accum * momentum + grad
    step = grad * lr + accum * momentum * lr if use_nesterov else accum * lr
    return [var - step, accum]


def ref_adam(var, m, v, b1p, b2p, lr, b1, b2, eps, grad, use_nesterov=False):
    alpha = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m = m + (grad - m) * (1 - b1)
    v = v + (grad * grad - v) * (1 - b2)
    num = grad * (1 - b1) + b1 * m if use_nesterov else m
    return [var - num * alpha / (np.sqrt(v) + eps), m, v]


def ref_rms_prop(var, ms, mom, lr, rho, momentum, eps, grad):
    ms = rho * ms + (1 - rho) * grad * grad
    mom = momentum * mom + lr * grad / np.sqrt(ms + eps)
    return [var - mom, ms, mom]


def ref_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, eps, grad):
    ms = rho * ms + (1 - rho) * grad * grad
    mg = rho * mg + (1 - rho) * grad
    mom = momentum * mom + lr * grad / np.sqrt(ms - mg * mg + eps)
    return [var - mom, mg, ms, mom]


def ref_adagrad(var, accum, lr, grad, update_slots=True):
    if update_slots:
        accum = accum + grad * grad
    return [var - lr * grad / np.sqrt(accum), accum]


# op type -> (builder, reference, slot value ranges, hyperparameter ranges, attributes)
CASES = {
    "ApplyGradientDescent": (
        training_ops.apply_gradient_descent,
        ref_gradient_descent,
        [],
        [(0.0, 1.0)],
        {},
    ),
    "ApplyMomentum": (
        training_ops.apply_momentum,
        ref_momentum,
        [(-1.0, 1.0)],
        [(0.0, 1.0), (0.0, 0.99)],  # lr, momentum (after the gradient)
        {"use_nesterov": st.booleans()},
    ),
    "ApplyAdam": (
        training_ops.apply_adam,
        ref_adam,
        [(-1.0, 1.0), (0.0, 1.0)],
        [(0.01, 0.9), (0.01, 0.9), (0.0, 0.1), (0.5, 0.99), (0.5, 0.999), (1e-8, 1e-3)],
        {"use_nesterov": st.booleans()},
    ),
    "ApplyRMSProp": (
        training_ops.apply_rms_prop,
        ref_rms_prop,
        [(0.1, 2.0), (-1.0, 1.0)],
        [(0.0, 0.1), (0.5, 0.99), (0.0, 0.9), (1e-10, 1e-3)],
        {},
    ),
    "ApplyCenteredRMSProp": (
        training_ops.apply_centered_rms_prop,
        ref_centered_rms_prop,
        [(-0.1, 0.1), (0.5, 2.0), (-1.0, 1.0)],
        [(0.0, 0.1), (0.5, 0.99), (0.0, 0.9), (1e-10, 1e-3)],
        {},
    ),
    "ApplyAdagrad": (
        training_ops.apply_adagrad,
        ref_adagrad,
        [(0.1, 2.0)],
        [(0.0, 1.0)],
        {"update_slots": st.booleans()},
    ),
}


def _floats(low, high):
    low, high = float(np.float32(low)), float(np.float32(high))
    return st.floats(low, high, allow_nan=False, width=32)


@st.composite
def update_cases(draw, op_type, max_side=4):
    """(shape, var, slots, hyperparameters, grad, attributes) for ``op_type``."""
    _, _, slot_ranges, hyper_ranges, attr_strategies = CASES[op_type]
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=max_side))

    def array(low, high):
        return draw(hnp.arrays(np.float32, shape, elements=_floats(low, high)))

    var, grad = array(-2.0, 2.0), array(-1.0, 1.0)
    slots = [array(lo, hi) for lo, hi in slot_ranges]
    hyper = [np.float32(draw(_floats(lo, hi))) for lo, hi in hyper_ranges]
    attrs = {k: draw(s) for k, s in attr_strategies.items()}
    return shape, var, slots, hyper, grad, attrs


def _inputs(op_type, var, slots, hyper, grad):
    """The op's inputs in order (the gradient goes where TF puts it)."""
    kinds = [kind for _, kind in training_ops.INPUTS[op_type]]
    values, hyper = [var] + slots, list(hyper)
    for kind in kinds[len(values) :]:
        values.append(grad if kind == "tensor" else hyper.pop(0))
    return values


def run_update(op_type, case, device, steps=2):
    """Runs the op ``steps`` times on ``device``; returns (values after, reference values,
    whether each array variable kept its buffer, the variables' storage)."""
    shape, var, slots, hyper, grad, attrs = case
    build, reference, *_ = CASES[op_type]
    with tf.device(device):
        variables = [tf.Variable(v, name="v%d" % i) for i, v in enumerate([var] + slots)]
        values = _inputs(op_type, variables[0], variables[1:], hyper, tf.constant(grad))
        update = build(*values, **attrs)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    refs = [_storage(sess, v, device) for v in variables]
    before = [r.value for r in refs]
    for _ in range(steps):
        out = sess.run(update)
    expected = [np.float64(x) if np.ndim(x) == 0 else x.astype(np.float64) for x in [var] + slots]
    for _ in range(steps):
        args = _inputs(op_type, expected[0], expected[1:], [np.float64(h) for h in hyper], grad)
        expected = reference(*args, **attrs)
    np.testing.assert_allclose(out, sess.run(variables[0]), rtol=1e-6)
    in_place = [r.value is b for r, b in zip(refs, before) if np.ndim(b) > 0 or shape != ()]
    return sess.run(variables), expected, in_place, refs


def _storage(sess, variable, device):
    full = GPU if "gpu" in device.lower() else CPU
    return sess._impl._kernels.get(variable.op.name, full)(None, [])[0]


def _check(op_type, case, device):
    got, expected, in_place, refs = run_update(op_type, case, device)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)
    return in_place, refs


# -- the kernels against numpy ------------------------------------------------------------------


@pytest.mark.parametrize("op_type", sorted(CASES))
@pytest.mark.parametrize("device", ["/cpu:0", "/gpu:0"])
def test_kernel_matches_numpy_and_updates_in_place(op_type, device):
    """Random shapes and hyperparameters: two steps equal TF's formulas; every array variable
    is updated in its own buffer (CPU and an emulated card: the numpy backend)."""

    @settings(max_examples=15, deadline=None)
    @given(update_cases(op_type))
    def check(case):
        tf.reset_default_graph()
        in_place, refs = _check(op_type, case, device)
        assert all(isinstance(r.value, (np.ndarray, np.floating)) for r in refs)
        if case[0] != ():
            assert all(in_place)

    check()


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
@pytest.mark.parametrize("op_type", sorted(CASES))
def test_kernel_on_the_cuda_backend(op_type):
    """The same updates on the CUDA backend (Numba's simulator): the variable and its slots
    stay device arrays on the card, updated in place."""

    @settings(max_examples=3, deadline=None)
    @given(update_cases(op_type, max_side=3))
    def check(case):
        tf.reset_default_graph()
        in_place, refs = _check(op_type, case, "/gpu:0")
        assert all(in_place)
        assert all(hasattr(r.value, "copy_to_host") for r in refs)  # device arrays

    check()


def test_gpu_kernels_are_registered_for_floats_only():
    """Like TF: float16/32/64 kernels on CPUs and GPUs; an int variable's update has none."""
    w = tf.Variable([1.0, 2.0], name="w")
    op = training_ops.apply_gradient_descent(w, 0.1, [1.0, 1.0]).op
    assert supported_device_types(op) == ["GPU", "CPU"]
    i = tf.Variable([1, 2], name="i")
    int_op = training_ops.apply_gradient_descent(i, 1, [1, 1]).op
    assert supported_device_types(int_op) == []


def test_kernel_lookup_reads_a_ref_dtype_attr_as_its_base_type():
    """The registry keys its lookups by the dtype attr as the op holds it: a reference type
    finds the kernels of its base type, and an attr that is no dtype is looked up uncached."""
    from minitf.kernels import registry
    from minitf.runtime.step_graph import Node

    def node(t):
        return Node("n", "ApplyGradientDescent", "", {"T": t}, [])

    base, ref = node(tf.float32), node(tf.float32._as_ref)
    assert registry.device_types(ref) == registry.device_types(base) == ("GPU", "CPU")
    assert registry.device_types(base) is registry.device_types(node(tf.float32))  # shared
    assert registry.find_kernel(ref, "CPU") is registry.find_kernel(base, "CPU")
    assert registry.device_types(node(tf.int32)) == ()
    odd = node(["not", "a", "dtype"])  # unhashable: no TypeError; read as no dtype at all
    assert registry.device_types(odd) == registry.device_types(node(None))
    assert ("ApplyGradientDescent", None) in registry._lookup_cache
    assert not any(isinstance(k[1], list) for k in registry._lookup_cache)


# -- graph construction -------------------------------------------------------------------------


def test_op_names_inputs_colocation_and_output():
    """``ApplyMomentum`` takes references first, is colocated with the variable and outputs a
    reference to it; constants are named after the op's arguments."""
    with tf.device("/job:ps/task:1"):
        w = tf.Variable([1.0, 2.0], name="w")
        acc = tf.Variable([0.0, 0.0], name="acc")
    out = training_ops.apply_momentum(w, acc, 0.1, [1.0, 1.0], 0.9)
    assert out.name == "ApplyMomentum:0"
    assert out.dtype == tf.float32._as_ref and out.shape.as_list() == [2]
    op = out.op
    assert [t.name for t in op.inputs] == [
        "w:0",
        "acc:0",
        "ApplyMomentum/lr:0",
        "ApplyMomentum/grad:0",
        "ApplyMomentum/momentum:0",
    ]
    # colocated with every reference input (an optimizer's slots are colocated with w)
    assert op.get_attr("_class") == [b"loc:@acc", b"loc:@w"] and op.device == "/job:ps/task:1"
    assert op.get_attr("use_locking") is False and op.get_attr("use_nesterov") is False
    assert op.get_attr("T") == tf.float32


def test_graph_time_errors():
    """TF's shape function and argument checks: scalar hyperparameters, same shapes, same
    dtype, a reference for ``var``."""
    w = tf.Variable([1.0, 2.0], name="w")
    with pytest.raises(ValueError, match=r"Shape must be rank 0 but is rank 1 for "):
        training_ops.apply_gradient_descent(w, [0.1, 0.2], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"Dimension 0 in both shapes must be equal, but are 2 "):
        training_ops.apply_gradient_descent(w, 0.1, [1.0, 1.0, 3.0])
    with pytest.raises(TypeError, match="Input 'delta' of 'ApplyGradientDescent' Op has type "):
        training_ops.apply_gradient_descent(w, 0.1, tf.constant([1.0, 2.0], tf.float64))
    with pytest.raises(TypeError, match="requires that input 'ref' be a mutable tensor"):
        training_ops.apply_gradient_descent(w.value(), 0.1, [1.0, 1.0])


def test_run_time_errors():
    """Fed values are checked by the kernel, with TF's texts; an uninitialised slot says so."""
    w = tf.Variable([1.0, 2.0], name="w")
    acc = tf.Variable([0.0, 0.0], name="acc")
    p, lr = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    gd = training_ops.apply_gradient_descent(w, lr, p)
    mom = training_ops.apply_momentum(w, acc, 0.1, [1.0, 1.0], 0.9)
    sess = tf.Session()
    sess.run(w.initializer)
    with pytest.raises(errors.InvalidArgumentError, match=r"var and delta do not have the "
                       r"same shape\[2\] \[3\]"):  # fmt: skip
        sess.run(gd, {p: [1.0, 2.0, 3.0], lr: 0.1})
    with pytest.raises(errors.InvalidArgumentError, match=r"alpha is not a scalar: \[2\]"):
        sess.run(gd, {p: [1.0, 2.0], lr: [0.1, 0.2]})
    with pytest.raises(errors.FailedPreconditionError) as info:
        sess.run(mom)
    assert "Attempting to use uninitialized variables: acc" in str(info.value)


def test_scalar_variable_gets_a_new_value():
    """A scalar variable is a numpy scalar (immutable): its update stores a new value."""
    b = tf.Variable(0.5, name="b")
    out = training_ops.apply_gradient_descent(b, 0.1, 1.0)
    sess = tf.Session()
    sess.run(b.initializer)
    assert sess.run(out) == pytest.approx(0.4)
    assert sess.run(b) == pytest.approx(0.4)


# -- use_locking --------------------------------------------------------------------------------


class _RecordingLock:
    """A lock that counts how often it was taken."""

    def __init__(self):
        self._lock = threading.Lock()
        self.taken = 0

    def __enter__(self):
        self._lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc):
        self._lock.release()


@pytest.mark.parametrize("use_locking", [True, False])
def test_use_locking_takes_every_variables_lock(use_locking):
    """``use_locking=True`` holds the variable's and its slots' locks during the update;
    ``False`` takes none (Hogwild: concurrent updates race)."""
    with tf.device("/cpu:0"):
        w = tf.Variable([1.0, 2.0], name="w")
        m = tf.Variable([0.0, 0.0], name="m")
        v = tf.Variable([0.0, 0.0], name="v")
        args = [w, m, v, 0.9, 0.999, 0.001, 0.9, 0.999, 1e-8, [1.0, 1.0]]
        update = training_ops.apply_adam(*args, use_locking=use_locking)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    locks = []
    for var in (w, m, v):
        ref = _storage(sess, var, "/cpu:0")
        ref.lock = _RecordingLock()
        locks.append(ref.lock)
    sess.run(update)
    assert [lock.taken for lock in locks] == ([1, 1, 1] if use_locking else [0, 0, 0])


def test_locked_updates_from_many_threads_all_count():
    """With ``use_locking=True`` concurrent runs of one update from several threads lose
    nothing: 8 threads x 25 steps of ``w -= 1 * 1``."""
    w = tf.Variable(np.zeros(1000, np.float32), name="w")
    update = training_ops.apply_gradient_descent(
        w, 1.0, np.ones(1000, np.float32), use_locking=True
    )
    sess = tf.Session()
    sess.run(w.initializer)

    def worker():
        for _ in range(25):
            sess.run(update.op)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(sess.run(w), np.full(1000, -200.0, np.float32))
