"""Tests for minitf.kernels.cuda: the numba.cuda kernels, checked against numpy.

They run under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set by conftest before numba
is imported), so shapes stay tiny and hypothesis draws few examples; with
``MINITF_TEST_REAL_CUDA=1`` they run on the machine's card.  Every CUDA call goes
through one module-wide CudaLauncher thread, as in the runtime.  The simulator's barriers
are dominated by the interpreter's thread switch interval, so the module lowers it while
its tests run (and restores it afterwards).
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import cuda_backend
from minitf.kernels import cuda as K

pytestmark = [pytest.mark.cudasim, pytest.mark.usefixtures("fast_thread_switching")]

FEW = settings(max_examples=20, deadline=None)
SOME = settings(max_examples=25, deadline=None)

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
CASTABLE = [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.fixture(scope="module")
def launcher():
    """The card's one launcher, the backend's own: Numba's simulator patches module globals
    while a kernel runs, so two launchers running kernels at once (this module's and one left
    busy by an earlier test) would corrupt each other's results."""
    return cuda_backend().launcher


def run(launcher, fn, *args, **kwargs):
    """Upload the numpy arguments, run ``fn(stream, *device_args)``, download the result."""

    def body(stream):
        dev = [K.to_device(stream, x) if isinstance(x, np.ndarray) else x for x in args]
        return K.to_host(stream, fn(stream, *dev, **kwargs))

    return launcher.call(body)


def elements(dtype, low=-20, high=20):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind == "f":
        return st.floats(low, high, width=8 * dtype.itemsize, allow_nan=False, allow_infinity=False)
    return st.integers(low, high)


@st.composite
def arrays(draw, dtype, shape=None, low=-20, high=20, min_side=1):
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=min_side, max_side=5))
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, low, high)))


def assert_close(actual, expected, dtype=None):
    dtype = np.dtype(dtype or expected.dtype)
    assert actual.dtype == dtype
    assert actual.shape == expected.shape
    if dtype.kind == "f":
        rtol = {2: 2e-3, 4: 2e-6, 8: 1e-12}[dtype.itemsize]
        np.testing.assert_allclose(actual, expected.astype(dtype), rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(actual, expected.astype(dtype))


# ---------------------------------------------------------------------------------------
# Transfers
# ---------------------------------------------------------------------------------------


@FEW
@given(st.sampled_from(CASTABLE).flatmap(lambda dt: arrays(dt, min_side=0)))
def test_transfer_round_trip(launcher, host):
    back = run(launcher, lambda stream, dev: dev, host)
    assert isinstance(back, np.ndarray)
    assert back.dtype == host.dtype and back.shape == host.shape
    np.testing.assert_array_equal(back, host)


def test_transfer_rejects_object_arrays(launcher):
    with pytest.raises(TypeError):
        launcher.call(K.to_device, np.array(["a", "b"], dtype=object))


@FEW
@given(st.sampled_from(NUMERIC).flatmap(lambda dt: arrays(dt)))
def test_device_copy_is_independent(launcher, host):
    def body(stream):
        src = K.to_device(stream, host)
        copy = K.device_copy(stream, src)
        K.assign(stream, copy, K.fill(stream, host.shape, 7, host.dtype))
        return K.to_host(stream, src), K.to_host(stream, copy)

    src_after, copy_after = launcher.call(body)
    np.testing.assert_array_equal(src_after, host)
    np.testing.assert_array_equal(copy_after, np.full(host.shape, 7, host.dtype))


# ---------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------


NN_BINARY = {
    "maximum": np.maximum,
    "minimum": np.minimum,
    "relu_grad": lambda g, f: np.multiply(g, f > 0),  # TF's functor
    "sigmoid_grad": lambda y, g: g * y * (1 - y),
    "tanh_grad": lambda y, g: g * (1 - y * y),
    "sqrt_grad": lambda y, g: y.dtype.type(0.5) * g / y,
    "rsqrt_grad": lambda y, g: y.dtype.type(-0.5) * (g * y) * (y * y),
    "reciprocal_grad": lambda y, g: -g * y * y,
}
#: binary ops TF has float kernels of only
FLOAT_BINARY = ("sqrt_grad", "rsqrt_grad", "reciprocal_grad")


def numpy_binary(op, a, b):
    out_dtype = np.result_type(a, b)
    if op in NN_BINARY:
        a, b = np.broadcast_arrays(a.astype(out_dtype), b.astype(out_dtype))
        with np.errstate(all="ignore"):  # y = 0: inf or nan, as the kernels give
            return NN_BINARY[op](a, b).astype(out_dtype)
    if op == "add":
        return np.add(a, b, dtype=out_dtype)
    if op == "sub":
        return np.subtract(a, b, dtype=out_dtype)
    if op == "mul":
        return np.multiply(a, b, dtype=out_dtype)
    if out_dtype.kind == "f":
        q = np.divide(a.astype(out_dtype), b.astype(out_dtype))
        return q if op == "realdiv" else np.floor(q)
    if op == "realdiv":  # C-style integer division
        q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
        return (np.sign(a) * np.sign(b) * q).astype(out_dtype)
    return np.floor_divide(a, b)  # Python-style for integers


@st.composite
def binary_cases(draw):
    op = draw(st.sampled_from(K.BINARY_OPS))
    dtype = draw(st.sampled_from(FLOATS if op in FLOAT_BINARY else NUMERIC))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=5))
    a = draw(arrays(dtype, shapes.input_shapes[0]))
    b = draw(arrays(dtype, shapes.input_shapes[1]))
    if op in FLOAT_BINARY:  # y away from 0, where they divide by zero or blow up
        a = np.where(np.abs(a) < 0.5, np.full_like(a, 0.5), a)
    if op in ("realdiv", "floordiv"):
        b = np.where(b == 0, np.ones_like(b), b)
        if b.dtype.kind == "f":
            b = np.where(np.abs(b) < 0.5, np.full_like(b, 0.5), b)
    return op, a, b, shapes.result_shape


@SOME
@given(binary_cases())
def test_binary_matches_numpy(launcher, case):
    op, a, b, result_shape = case
    out = run(launcher, lambda s, x, y: K.binary(s, op, x, y), a, b)
    assert out.shape == tuple(result_shape)
    assert_close(out, numpy_binary(op, a, b), np.result_type(a, b))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "realdiv", "floordiv"])
def test_integer_division_signs(launcher, op):
    a = np.array([[-7, 7, -6, 6, 0]], np.int32)
    b = np.array([[2], [-2], [3]], np.int32)
    out = run(launcher, lambda s, x, y: K.binary(s, op, x, y), a, b)
    expected = {
        "add": a + b,
        "sub": a - b,
        "mul": a * b,
        "floordiv": a // b,
        "realdiv": np.trunc(a / b).astype(np.int32),
    }[op]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, expected)


def test_float_floordiv_is_floor_of_quotient(launcher):
    a = np.array([7.0, -7.0, 7.5, -0.5, 1.0], np.float64)
    b = np.array([2.0, 2.0, -2.5, 3.0, 0.1], np.float64)
    out = run(launcher, lambda s, x, y: K.binary(s, "floordiv", x, y), a, b)
    np.testing.assert_array_equal(out, np.floor(a / b))
    assert out[-1] == 10.0  # floor(1 / 0.1) = 10, numpy's floor_divide gives 9


def test_binary_mixed_and_half_dtypes(launcher):
    a = np.array([1, 2, 3], np.int32)
    b = np.array([0.5], np.float32)
    out = run(launcher, lambda s, x, y: K.binary(s, "mul", x, y), a, b)
    assert out.dtype == np.result_type(np.int32, np.float32)
    np.testing.assert_array_equal(out, [0.5, 1.0, 1.5])
    h = np.array([[1.5, -2.25], [3.0, 0.125]], np.float16)
    out = run(launcher, lambda s, x, y: K.binary(s, "add", x, y), h, h[0])
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, h + h[0])


def test_binary_scalars(launcher):
    out = run(
        launcher,
        lambda s, x, y: K.binary(s, "sub", x, y),
        np.array(5.0, np.float32),
        np.array([1.0, 2.0], np.float32),
    )
    np.testing.assert_array_equal(out, [4.0, 3.0])
    out = run(
        launcher,
        lambda s, x, y: K.binary(s, "add", x, y),
        np.array(5, np.int64),
        np.array(-2, np.int64),
    )
    assert out.shape == () and out == 3


def test_binary_bad_shape_raises_in_caller(launcher):
    with pytest.raises(ValueError, match="incompatible shapes"):
        run(
            launcher,
            lambda s, x, y: K.binary(s, "add", x, y),
            np.zeros((2, 3), np.float32),
            np.zeros((4,), np.float32),
        )
    with pytest.raises(ValueError, match="unknown binary op"):
        run(
            launcher,
            lambda s, x, y: K.binary(s, "pow", x, y),
            np.zeros(2, np.float32),
            np.zeros(2, np.float32),
        )
    # the launcher still works afterwards
    out = run(
        launcher,
        lambda s, x, y: K.binary(s, "add", x, y),
        np.ones(2, np.float32),
        np.ones(2, np.float32),
    )
    np.testing.assert_array_equal(out, [2.0, 2.0])


FLOAT_UNARY = {  # float-only ops, computed in float64 by numpy and rounded
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x,
    "floor": np.floor,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
}
ANY_UNARY = {
    "neg": np.negative,
    "square": np.square,
    "identity": np.copy,
    "abs": np.abs,
    "relu": lambda x: np.maximum(x, np.zeros_like(x)),
}


@st.composite
def unary_cases(draw):
    op = draw(st.sampled_from(K.UNARY_OPS))
    dtypes = [np.float16] + FLOATS if op in FLOAT_UNARY else NUMERIC + [np.float16]
    return op, draw(st.sampled_from(dtypes).flatmap(lambda dt: arrays(dt)))


@FEW
@given(unary_cases())
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_unary_matches_numpy(launcher, case):
    op, host = case
    out = run(launcher, lambda s, x: K.unary(s, op, x), host)
    if op in FLOAT_UNARY:
        with np.errstate(all="ignore"):
            expected = FLOAT_UNARY[op](host.astype(np.float64)).astype(host.dtype)
    else:
        expected = ANY_UNARY[op](host)
    assert_close(out, expected, host.dtype)


def test_unary_domain_edges_give_tfs_inf_and_nan(launcher):
    """log(0) = -inf, log(-1) = sqrt(-1) = nan, rsqrt(0) = inf, exp(1000) = inf, floor and
    sigmoid of +-inf: where Python's ``math`` (the simulator) would raise."""
    x = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, 1000.0, -1000.0], np.float64)
    with np.errstate(all="ignore"):
        for op in FLOAT_UNARY:
            out = run(launcher, lambda s, a, op=op: K.unary(s, op, a), x)
            np.testing.assert_allclose(out, FLOAT_UNARY[op](x), rtol=1e-12)


@SOME
@given(
    st.sampled_from(CASTABLE),
    st.sampled_from(CASTABLE).flatmap(lambda dt: arrays(dt, low=-100, high=100)),
)
def test_cast_matches_numpy(launcher, dst, host):
    out = run(launcher, lambda s, x: K.cast(s, x, dst), host)
    assert out.dtype == np.dtype(dst) and out.shape == host.shape
    np.testing.assert_array_equal(out, host.astype(dst))


# ---------------------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------------------


@st.composite
def matmul_cases(draw):
    m = draw(st.integers(1, 17))
    k = draw(st.integers(1, 13))
    n = draw(st.integers(1, 11))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = draw(arrays(dtype, (k, m) if ta else (m, k), low=-5, high=5))
    b = draw(arrays(dtype, (n, k) if tb else (k, n), low=-5, high=5))
    return a, b, ta, tb


@SOME
@given(matmul_cases())
def test_matmul_matches_numpy(launcher, case):
    a, b, ta, tb = case
    out = run(launcher, K.matmul, a, b, transpose_a=ta, transpose_b=tb)
    expected = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    if np.dtype(a.dtype).kind != "f":
        assert_close(out, expected, a.dtype)
        return
    # a float sum of k products of numbers up to 5 in size rounds each addition: allow k
    # roundings of 25 (the elementwise tolerance alone made float32 cases fail at random)
    k = a.shape[0] if ta else a.shape[1]
    eps = np.finfo(a.dtype).eps
    assert out.dtype == a.dtype and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=4 * eps, atol=max(k, 1) * 25 * eps)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes_cross_tile_edges(launcher, ta, tb):
    m, k, n = K.TILE + 1, 2 * K.TILE - 1, K.TILE + 3
    rng = np.random.default_rng(ta * 2 + tb)
    a = rng.standard_normal((k, m) if ta else (m, k))
    b = rng.standard_normal((n, k) if tb else (k, n))
    out = run(launcher, K.matmul, a, b, transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(out, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-12)


def test_matmul_half_and_empty_inner_dimension(launcher):
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float16)
    out = run(launcher, K.matmul, a, a)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, np.array([[7, 10], [15, 22]], np.float16))
    out = run(launcher, K.matmul, np.zeros((3, 0), np.float32), np.zeros((0, 2), np.float32))
    np.testing.assert_array_equal(out, np.zeros((3, 2), np.float32))


def test_matmul_bad_shapes(launcher):
    with pytest.raises(ValueError, match="inner dimensions"):
        run(launcher, K.matmul, np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="rank 2"):
        run(launcher, K.matmul, np.zeros(3), np.zeros((3, 1)))
    out = run(launcher, K.matmul, np.zeros((2, 3)), np.zeros((2, 3)), transpose_b=True)
    assert out.shape == (2, 2)


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------


@st.composite
def reduce_cases(draw):
    op = draw(st.sampled_from(K.REDUCE_OPS))
    dtype = draw(st.sampled_from(NUMERIC + [np.float16]))
    host = draw(arrays(dtype))
    axes = draw(
        st.none()
        | st.lists(st.integers(0, max(host.ndim - 1, 0)), unique=True, max_size=host.ndim).map(
            tuple
        )
    )
    if axes is not None and host.ndim and draw(st.booleans()):
        axes = tuple(ax - host.ndim for ax in axes)  # negative axes too
    return op, host, axes, draw(st.booleans())


def numpy_reduce(op, host, axes, keepdims):
    total = np.sum(
        host.astype(np.float64 if host.dtype.kind == "f" else np.int64),
        axis=axes,
        keepdims=keepdims,
    )
    if op == "sum":
        return np.asarray(total).astype(host.dtype)
    count = host.size // max(np.asarray(total).size, 1)
    if host.dtype.kind == "f":
        return np.asarray(total / count).astype(host.dtype)
    return (np.sign(total) * (np.abs(total) // count)).astype(host.dtype)


@SOME
@given(reduce_cases())
def test_reduce_matches_numpy(launcher, case):
    op, host, axes, keepdims = case
    out = run(launcher, lambda s, x: K.reduce(s, op, x, axes, keepdims), host)
    assert_close(out, numpy_reduce(op, host, axes, keepdims), host.dtype)


def test_reduce_details(launcher):
    x = np.array([[-7, 2], [3, 4], [-1, -1]], np.int32)
    out = run(launcher, lambda s, v: K.reduce(s, "mean", v, 1, False), x)
    np.testing.assert_array_equal(out, [-2, 3, -1])  # truncated toward zero
    out = run(launcher, lambda s, v: K.reduce(s, "sum", v, None, True), x)
    assert out.shape == (1, 1) and out[0, 0] == 0
    # float16 accumulates in float32: 2048 + 1 + 1 + ... stays exact
    h = np.array([2048.0] + [1.0] * 40, np.float16)
    out = run(launcher, lambda s, v: K.reduce(s, "sum", v, 0, False), h)
    assert out.dtype == np.float16 and out == np.float16(2088.0)
    # empty reductions: 0 for sum, nan for a float mean
    e = np.zeros((2, 0), np.float32)
    out = run(launcher, lambda s, v: K.reduce(s, "sum", v, 1, False), e)
    np.testing.assert_array_equal(out, [0.0, 0.0])
    out = run(launcher, lambda s, v: K.reduce(s, "mean", v, 1, False), e)
    assert out.shape == (2,) and np.isnan(out).all()


def test_reductions_of_few_outputs_over_many_elements_sum_chunks_first(launcher):
    """A full sum (or a few long rows) is split into partial sums of REDUCE_CHUNK elements
    that many blocks compute, then summed: the same answers as one pass, an integer mean
    still truncated toward zero, float16 still accumulated in float32."""
    n = 4 * K.REDUCE_CHUNK + 3
    assert -(-n // K.REDUCE_CHUNK) >= 2  # these sizes take the two-pass path
    ints = np.arange(-n, n, dtype=np.int32).reshape(2, n)[:, ::-1].copy()
    ints[1] -= 7
    out = run(launcher, lambda s, v: K.reduce(s, "mean", v, 1, False), ints)
    np.testing.assert_array_equal(out, np.trunc(ints.astype(np.float64).mean(1)).astype(np.int32))
    out = run(launcher, lambda s, v: K.reduce(s, "sum", v, None, False), ints)
    assert out == ints.sum(dtype=np.int64).astype(np.int32)
    x = np.random.default_rng(0).random((3, n)).astype(np.float32)
    for axes, keep in ((None, False), (1, True), ((0, 1), True)):
        out = run(launcher, lambda s, v, a=axes, k=keep: K.reduce(s, "mean", v, a, k), x)
        assert_close(out, x.astype(np.float64).mean(axis=axes, keepdims=keep), np.float32)
    h = np.array([2048.0] + [1.0] * n, np.float16)
    out = run(launcher, lambda s, v: K.reduce(s, "sum", v, 0, False), h)
    assert out == np.float16(2048.0 + n)


def test_numbas_low_occupancy_warning_is_off_unless_asked_for():
    """A small op's launch would warn at every step on a real card (numba-cuda's check)."""
    from numba.cuda.core import config

    assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 0
    script = (
        "from minitf.kernels import cuda\n"
        "from numba.cuda.core import config\n"
        "print(config.CUDA_LOW_OCCUPANCY_WARNINGS)\n"
    )
    env = dict(os.environ, NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="1")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "1", done.stderr


def test_kernel_shapes_are_uploaded_once_per_stream(launcher):
    """The small int64 array of shapes and strides a broadcast or a reduction reads is
    uploaded once per stream and list, not at every launch."""

    def body(stream):
        first, again = K._meta(stream, [3, 4, 5]), K._meta(stream, (3, 4, 5))
        other = K._meta(stream, [3, 4, 6])
        return first is again, first is other, K.to_host(stream, first), K.to_host(stream, other)

    same, mixed, first, other = launcher.call(body)
    assert same and not mixed
    assert first.tolist() == [3, 4, 5] and other.tolist() == [3, 4, 6]


def test_reduce_bad_axes(launcher):
    with pytest.raises(ValueError, match="out of range"):
        run(launcher, lambda s, v: K.reduce(s, "sum", v, 2, False), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="duplicate"):
        run(launcher, lambda s, v: K.reduce(s, "sum", v, (0, -2), False), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="unknown reduction"):
        run(launcher, lambda s, v: K.reduce(s, "max", v, 0, False), np.zeros((2, 2)))


# ---------------------------------------------------------------------------------------
# add_n, assign, fill
# ---------------------------------------------------------------------------------------


@FEW
@given(
    st.sampled_from([np.float32, np.int64, np.float16]).flatmap(
        lambda dt: hnp.array_shapes(min_dims=0, max_dims=3, max_side=5).flatmap(
            lambda shape: st.lists(arrays(dt, shape), min_size=1, max_size=4)
        )
    )
)
def test_add_n_matches_numpy(launcher, hosts):
    out = run(launcher, lambda s, *xs: K.add_n(s, xs), *hosts)
    expected = hosts[0].copy()
    for h in hosts[1:]:
        expected = expected + h
    assert_close(out, expected, hosts[0].dtype)


def test_add_n_rejects_mismatches(launcher):
    with pytest.raises(ValueError):
        run(launcher, lambda s, *xs: K.add_n(s, xs), np.zeros(2), np.zeros(3))
    with pytest.raises(TypeError):
        run(launcher, lambda s, *xs: K.add_n(s, xs), np.zeros(2), np.zeros(2, np.int64))
    with pytest.raises(ValueError):
        launcher.call(K.add_n, [])


@FEW
@given(st.sampled_from(NUMERIC).flatmap(lambda dt: arrays(dt)), st.sampled_from(CASTABLE))
def test_assign_copies_into_existing_array(launcher, src, dst_dtype):
    def body(stream):
        dst = K.fill(stream, src.shape, 1, dst_dtype)
        dev_src = K.to_device(stream, src)
        result = K.assign(stream, dst, dev_src)
        return result is dst, K.to_host(stream, dst)

    same, out = launcher.call(body)
    assert same
    np.testing.assert_array_equal(out, src.astype(dst_dtype))


def test_assign_shape_mismatch(launcher):
    def body(stream):
        K.assign(stream, K.fill(stream, (2, 2), 0, np.float32), K.fill(stream, (4,), 0, np.float32))

    with pytest.raises(ValueError, match="shapes"):
        launcher.call(body)


@FEW
@given(
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    st.sampled_from(CASTABLE),
    st.integers(-50, 50),
)
def test_fill_matches_numpy(launcher, shape, dtype, value):
    out = launcher.call(lambda s: K.to_host(s, K.fill(s, shape, value, dtype)))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.full(shape, value, dtype))


# ---------------------------------------------------------------------------------------
# The launcher
# ---------------------------------------------------------------------------------------


def test_launcher_runs_calls_on_its_own_thread(launcher):
    seen = launcher.call(lambda stream, x: (threading.current_thread(), stream, x), 42)
    assert seen[0] is launcher.thread and seen[0] is not threading.current_thread()
    assert seen[1] is launcher.stream and seen[2] == 42
    # a call made from the launcher thread runs directly instead of deadlocking
    assert launcher.call(lambda s: launcher.call(lambda s2: s2 is s)) is True


def test_launcher_errors_propagate(launcher):
    class Boom(Exception):
        pass

    def fail(stream):
        raise Boom("kernel failed")

    with pytest.raises(Boom, match="kernel failed"):
        launcher.call(fail)
    with pytest.raises(TimeoutError):
        launcher.call(lambda s: time.sleep(0.3), timeout=0.02)
    assert launcher.call(lambda s: "still alive") == "still alive"


def test_closed_launcher_raises():
    la = K.CudaLauncher(0)
    host = np.arange(4, dtype=np.int64)
    np.testing.assert_array_equal(la.call(lambda s: K.to_host(s, K.to_device(s, host))), host)
    la.close()
    assert la.closed and not la.thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        la.call(lambda s: 1)
    la.close()  # closing twice is harmless
    with pytest.raises(RuntimeError):
        la.call(K.fill, (2,), 0, np.float32, timeout=1.0)


class _BothLookFirst(dict):
    """A block's table of shared arrays whose look-ups return only once two threads have both
    looked: the interleaving in which Numba's simulator made two arrays for one line."""

    def __init__(self):
        super().__init__()
        self.both = threading.Barrier(2, timeout=5.0)

    def get(self, key, default=None):
        found = super().get(key, default)
        self.both.wait()
        return found


@pytest.mark.simulator
def test_threads_that_ask_for_a_shared_array_together_get_the_same_array():
    """Under the simulator each CUDA thread is a Python thread; two that ask for a block's
    shared array at once must still share one (minitf.kernels.cudasim_shared: without it, a
    tiled matmul now and then read a tile another thread never wrote)."""
    from numba import float32
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    shared = FakeCUDAShared(16)
    shared._allocations = _BothLookFirst()
    got = [None, None]

    def ask(i):
        got[i] = shared.array((8, 9), float32)  # one line, so one array for the block

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10.0)
    assert got[0] is got[1], "two threads that asked at once got two arrays"
    assert got[0].shape == (8, 9) and got[0].dtype == np.float32
    dynamic = shared.array(0, np.dtype(np.float32))  # dynamic shared memory: the launch's 16 bytes
    assert dynamic.shape == (4,) and dynamic.dtype == np.float32
