"""The backend contract (``minitf.kernels.tensor_ops.TensorOps``), checked for every backend.

Book section: "Operations and kernels".  A kernel is written once against the surface of
``tensor_ops.py``; these tests call every method of that surface the way kernels call it, on
each backend, and compare the answer with numpy's:

* ``NumpyOps`` (the CPU and the emulated cards);
* ``CudaOps`` under Numba's simulator, built as the runtime builds it
  (``cuda_ops.backend_for_card(0, emulated=True)``, which switches the simulator on).  The
  simulator is slow: shapes stay tiny and hypothesis draws few examples for it.

"numpy's answer" includes the kind of value: a rank-0 result is a numpy scalar and anything
else an ndarray (once ``to_host`` brought it back), with numpy's dtype.  The one difference
between the backends is deliberate: the numpy backend hands a 0-d ndarray given to
``from_host`` back as it is (a fed-and-fetched scalar is a 0-d array, as from TF's client),
where a card's 0-d array comes back as a scalar.  Float inputs are multiples of 1/2 in a small
range, so sums are exact in every dtype and summation order does not matter; results are
still compared with a tolerance for float16-sized rounding.

The ctx a kernel gets is a stub whose ``parallel_for(n, fn)`` calls ``fn(0, n)``; for the
numpy backend a second stub splits the work into two chunks, and large operands (at least
``SPLIT_ELEMENTS`` elements, matmuls of at least ``SPLIT_FLOPS`` multiply-adds) must give the
same answer split as whole.
"""

import functools
import inspect
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import cuda_backend
from minitf.framework.resource_mgr import VariableRef
from minitf.kernels import cuda_ops, numpy_ops, tensor_ops
from minitf.kernels.numpy_ops import SPLIT_ELEMENTS, SPLIT_FLOPS, NumpyOps

BACKENDS = [
    pytest.param("numpy", id="numpy"),
    pytest.param("cuda", id="cuda-sim", marks=pytest.mark.cudasim),
]
EXAMPLES = {"numpy": 50, "cuda": 12}

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
CASTABLE = NUMERIC + [np.bool_]


class OneChunk:
    """The ctx of a kernel: ``parallel_for`` runs the work in one chunk."""

    def parallel_for(self, n, fn):
        fn(0, n)


class TwoChunks:
    """A ctx whose ``parallel_for`` splits the work in two chunks (and counts the splits)."""

    def __init__(self):
        self.splits = 0

    def parallel_for(self, n, fn):
        self.splits += 1
        fn(0, n // 2)
        fn(n // 2, n)


ONE = OneChunk()


def backend(name):
    if name == "numpy":
        return numpy_ops.NUMPY
    return cuda_backend()


pytestmark = pytest.mark.usefixtures("fast_thread_switching")


def examples(name, factor=1):
    return settings(max_examples=max(1, int(EXAMPLES[name] * factor)), deadline=None)


# ---------------------------------------------------------------------------------------
# Values and checks
# ---------------------------------------------------------------------------------------


def elements(dtype, low=-20, high=20):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind == "f":
        return st.integers(2 * low, 2 * high).map(lambda v: v / 2)
    return st.integers(low, high)


@st.composite
def host_values(draw, dtype, shape=None, max_side=3, low=-20, high=20):
    """A numpy value of ``dtype``: an ndarray, or a numpy scalar for shape ()."""
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=max_side))
    value = draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, low, high)))
    return numpy_ops.scalarize(value)


def is_backend_tensor(ops, value):
    """Whether ``value`` is a tensor of the backend: a CUDA result stays on the card, except an
    int32 one, which stays in host memory (TF's HostMemory int32)."""
    if isinstance(ops, NumpyOps) or np.dtype(value.dtype) == np.int32:
        return isinstance(value, (np.ndarray, np.generic))
    return cuda_ops.is_device_array(value)


def assert_numpy_answer(ops, out, expected):
    """``out``, a tensor of ``ops``, is numpy's ``expected``: the same kind of value (a numpy
    scalar for rank 0, else an ndarray), dtype, shape and values."""
    assert is_backend_tensor(ops, out), type(out)
    value = ops.to_host(out)
    expected = numpy_ops.scalarize(expected)
    if np.ndim(expected) == 0:
        assert isinstance(value, np.generic), "rank 0 must come back as a numpy scalar: %r" % (
            value,
        )
    else:
        assert type(value) is np.ndarray, type(value)
    assert value.dtype == expected.dtype
    assert np.shape(value) == np.shape(expected)
    if value.dtype.kind == "f":
        rtol = {2: 2e-3, 4: 2e-6, 8: 1e-12}[value.dtype.itemsize]
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(value, expected)


def _quietly(fn, *args):
    with np.errstate(divide="ignore", invalid="ignore"):  # x/0 is inf, 0/0 nan, as TF's
        return fn(*args)


def numpy_zip(fn, x, y):
    """numpy's answer for ``zip(fn)``; FloorDiv on floats is TF's floor(x / y)."""
    if fn == "floordiv" and np.result_type(x, y).kind == "f":
        return np.floor(np.true_divide(x, y))
    return {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "realdiv": np.true_divide,
        "floordiv": np.floor_divide,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "relu_grad": lambda g, f: numpy_ops.scalarize(np.multiply(g, f > 0)),
        "sigmoid_grad": lambda y, g: g * y * (1 - y),
        "tanh_grad": lambda y, g: g * (1 - y * y),
        "sqrt_grad": lambda y, g: _quietly(np.divide, np.asarray(0.5, np.result_type(y)) * g, y),
        "rsqrt_grad": lambda y, g: np.asarray(-0.5, np.result_type(y)) * (g * y) * (y * y),
        "reciprocal_grad": lambda y, g: -g * y * y,
    }[fn](x, y)


def numpy_reduce(fn, x, axes, keep_dims):
    """numpy's answer for ``reduce(fn, keep_dims, x.dtype)``: an integer mean truncates
    toward zero (TF)."""
    x = np.asarray(x)
    total = np.sum(x, axis=tuple(axes), keepdims=keep_dims, dtype=x.dtype)
    if fn == "sum":
        return total
    n = math.prod(x.shape[a] for a in axes)
    if x.dtype.kind == "f":
        return np.asarray(total / n).astype(x.dtype)
    return np.trunc(np.sum(x, axis=tuple(axes), keepdims=keep_dims, dtype=np.int64) / n).astype(
        x.dtype
    )


# ---------------------------------------------------------------------------------------
# The contract and the backends list the same methods
# ---------------------------------------------------------------------------------------


def methods(cls):
    """The public methods of a class, with their parameter names."""
    return {
        name: list(inspect.signature(fn).parameters)
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_contract_lists_exactly_what_both_backends_implement():
    contract = methods(tensor_ops.TensorOps)
    assert contract, "TensorOps lists no methods"
    assert methods(NumpyOps) == contract
    assert methods(cuda_ops.CudaOps) == contract
    for attr in tensor_ops.TensorOps.__annotations__:
        assert hasattr(NumpyOps, attr) and hasattr(cuda_ops.CudaOps, attr)
    for name in contract:  # and the module docstring's table too
        assert "``%s(" % name in tensor_ops.__doc__, "%s is not in tensor_ops' table" % name


# ---------------------------------------------------------------------------------------
# Each method gives numpy's answer
# ---------------------------------------------------------------------------------------


def numpy_map(fn, x):
    """numpy's answer for ``map(fn)``: the float-only functions computed in float64 and
    rounded to ``x``'s dtype."""
    float_only = {
        "exp": np.exp,
        "log": np.log,
        "sqrt": np.sqrt,
        "rsqrt": lambda v: 1 / np.sqrt(v),
        "reciprocal": lambda v: 1 / v,
        "floor": np.floor,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "tanh": np.tanh,
    }
    if fn in float_only:
        with np.errstate(all="ignore"):
            return numpy_ops.scalarize(
                np.asarray(float_only[fn](np.asarray(x, np.float64))).astype(np.result_type(x))
            )
    relu = lambda v: np.maximum(v, np.zeros_like(v))  # noqa: E731
    return {"neg": np.negative, "square": np.square, "abs": np.abs, "relu": relu}[fn](x)


@st.composite
def map_cases(draw):
    fn = draw(st.sampled_from(tensor_ops.MAP_FNS))
    dtypes = FLOATS if fn in tensor_ops.FLOAT_MAP_FNS else NUMERIC
    return fn, draw(st.sampled_from(dtypes).flatmap(host_values))


# exp of float16 overflows to inf on both backends; the simulator's store says so
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("name", BACKENDS)
def test_map_matches_numpy(name):
    ops = backend(name)

    @examples(name, 2)
    @given(map_cases())
    def check(case):
        fn, x = case
        assert_numpy_answer(ops, ops.map(fn)(ONE, ops.from_host(x)), numpy_map(fn, x))

    check()


@st.composite
def zip_cases(draw):
    fn = draw(st.sampled_from(tensor_ops.ZIP_FNS))
    # RealDiv has float kernels only (an integer Div truncates, numpy's true_divide does not),
    # and so have the gradients of Sqrt, Rsqrt and Reciprocal
    dtype = draw(st.sampled_from(FLOATS if fn in tensor_ops.FLOAT_ZIP_FNS else NUMERIC))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    x = draw(host_values(dtype, shapes.input_shapes[0]))
    y = draw(host_values(dtype, shapes.input_shapes[1]))
    if fn in ("realdiv", "floordiv"):
        y = numpy_ops.scalarize(np.where(np.abs(y) < 0.5, np.ones_like(y), y))
    if fn in tensor_ops.FLOAT_ZIP_FNS[1:]:  # the op's output y, away from 0 (no 1/0)
        x = numpy_ops.scalarize(np.where(np.abs(x) < 0.5, np.ones_like(x), x))
    return fn, x, y


@pytest.mark.parametrize("name", BACKENDS)
def test_zip_with_broadcasting_matches_numpy(name):
    ops = backend(name)

    @examples(name, 2)
    @given(zip_cases())
    def check(case):
        fn, x, y = case
        out = ops.zip(fn)(ONE, ops.from_host(x), ops.from_host(y))
        assert_numpy_answer(ops, out, numpy_zip(fn, x, y))

    check()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("into", [None, "new", "g", "features"])
def test_numpy_relu_grad_multiplies_as_tf_and_writes_into_a_forwarded_input(dtype, into):
    """ReluGrad on float arrays is TF's ``g * (features > 0)``: a dead unit's gradient is 0,
    -0 where it was negative, NaN where it was NaN or infinite (tensorflow-cpu 2.21's
    ``tf.raw_ops.ReluGrad`` on these very arrays, in float16, float32 and float64 alike);
    written into a forwarded input (``g`` or ``features``) or a new buffer alike."""
    g = np.array([[np.nan, np.inf, -np.inf, -2.0], [np.nan, 3.0, -1.5, 0.5]], dtype)
    features = np.array([[-1.0, -1.0, 0.0, 4.0], [1.0, np.nan, 2.0, -0.5]], dtype)
    want = np.array([[np.nan, np.nan, np.nan, -2.0], [np.nan, 0, -1.5, 0]], dtype)
    tf_signs = [[False, True, True, True], [False, False, True, False]]  # np.signbit of TF's
    out = {None: None, "new": np.empty_like(g), "g": g, "features": features}[into]
    got = numpy_ops.NUMPY.zip("relu_grad")(ONE, g, features, out=out)
    assert got.dtype == dtype and (into is None or got is out)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == tf_signs


def test_zip_scalars_agrees_with_zip_on_scalars():
    """numpy's plain scalar functions (what kernels of statically scalar operands call) give
    ``zip``'s answers, TF's float FloorDiv included; the CUDA backend has none."""

    @settings(max_examples=60, deadline=None)
    @given(zip_cases().filter(lambda c: np.ndim(c[1]) == 0 and np.ndim(c[2]) == 0))
    def check(case):
        fn, x, y = case
        plain = numpy_ops.NUMPY.zip_scalars(fn)
        want = numpy_ops.NUMPY.zip(fn)(ONE, x, y)
        got = plain(x, y)
        assert np.result_type(got) == np.result_type(want)
        np.testing.assert_array_equal(got, want)

    check()
    assert numpy_ops.NUMPY.zip_scalars("floordiv")(np.float64(1.0), np.float64(0.1)) == 10.0
    assert cuda_ops.CudaOps.zip_scalars(None, "add") is None


@pytest.mark.parametrize("name", BACKENDS)
def test_float_floordiv_is_floor_of_the_quotient(name):
    ops = backend(name)
    x = np.array([7.0, -7.0, 7.5, -0.5, 1.0])
    y = np.array([2.0, 2.0, -2.5, 3.0, 0.1])
    out = ops.to_host(ops.zip("floordiv")(ONE, ops.from_host(x), ops.from_host(y)))
    np.testing.assert_array_equal(out, [3.0, -4.0, -3.0, -1.0, 10.0])  # Python's 1.0 // 0.1 is 9


@pytest.mark.parametrize("name", BACKENDS)
def test_float16_floordiv_floors_the_float16_quotient(name):
    """As numpy and TF do, the quotient is rounded to float16 first: 72.94 / -0.04678 is
    -1559.2, -1559 in float16, whose floor is -1559 (the float32 quotient's would be -1560)."""
    ops = backend(name)
    x = np.array([72.94, 53.2, 39.25, 7.0], np.float16)
    y = np.array([-0.04678, 0.0721, 0.0937, 2.0], np.float16)
    out = ops.zip("floordiv")(ONE, ops.from_host(x), ops.from_host(y))
    assert_numpy_answer(ops, out, np.floor(np.true_divide(x, y)))
    np.testing.assert_array_equal(ops.to_host(out), [-1559.0, 738.0, 419.0, 3.0])


@st.composite
def reduce_cases(draw):
    fn = draw(st.sampled_from(tensor_ops.REDUCE_FNS))
    x = draw(st.sampled_from(NUMERIC).flatmap(host_values))
    axes = sorted(draw(st.sets(st.integers(0, max(np.ndim(x) - 1, 0)), max_size=np.ndim(x))))
    return fn, x, axes, draw(st.booleans())


@pytest.mark.parametrize("name", BACKENDS)
def test_reduce_over_axis_lists_matches_numpy(name):
    ops = backend(name)

    @examples(name, 2)
    @given(reduce_cases())
    def check(case):
        fn, x, axes, keep = case
        out = ops.reduce(fn, keep, np.asarray(x).dtype)(ONE, ops.from_host(x), axes)
        assert_numpy_answer(ops, out, numpy_reduce(fn, x, axes, keep))

    check()


@st.composite
def matmul_cases(draw, max_side):
    m, k, n = (draw(st.integers(1, max_side)) for _ in range(3))
    dtype = draw(st.sampled_from(FLOATS))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = draw(host_values(dtype, (k, m) if ta else (m, k), low=-4, high=4))
    b = draw(host_values(dtype, (n, k) if tb else (k, n), low=-4, high=4))
    return a, b, ta, tb


@pytest.mark.parametrize("name", BACKENDS)
def test_matmul_with_both_transposes_matches_numpy(name):
    ops = backend(name)

    @examples(name, 1.5)
    @given(matmul_cases(max_side=6 if name == "numpy" else 4))
    def check(case):
        a, b, ta, tb = case
        out = ops.matmul(ta, tb)(ONE, ops.from_host(a), ops.from_host(b))
        assert_numpy_answer(ops, out, np.matmul(a.T if ta else a, b.T if tb else b))

    check()


@pytest.mark.parametrize("name", BACKENDS)
def test_add_n_matches_numpy(name):
    ops = backend(name)
    same_shape = st.sampled_from(NUMERIC).flatmap(
        lambda dtype: hnp.array_shapes(min_dims=0, max_dims=3, max_side=3).flatmap(
            lambda shape: st.lists(host_values(dtype, shape), min_size=1, max_size=4)
        )
    )

    @examples(name)
    @given(same_shape)
    def check(xs):
        out = ops.add_n()(ONE, [ops.from_host(x) for x in xs])
        assert_numpy_answer(ops, out, functools.reduce(np.add, xs))

    check()


@pytest.mark.parametrize("name", BACKENDS)
def test_cast_matches_numpy(name):
    ops = backend(name)

    @examples(name, 2)
    @given(
        st.sampled_from(CASTABLE),
        st.sampled_from(CASTABLE).flatmap(lambda dt: host_values(dt, low=-100, high=100)),
    )
    def check(dtype, x):
        out = ops.cast(dtype)(ONE, ops.from_host(x))
        assert_numpy_answer(ops, out, np.asarray(x).astype(dtype))

    check()


@pytest.mark.parametrize("name", BACKENDS)
def test_constant_is_the_value_as_a_tensor(name):
    ops = backend(name)

    @examples(name)
    @given(
        st.sampled_from(CASTABLE).flatmap(
            lambda dt: hnp.arrays(
                dt, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), elements=elements(dt)
            )
        )
    )
    def check(value):
        compute = ops.constant(value)
        first, again = compute(ONE), compute(ONE)
        assert_numpy_answer(ops, first, value)
        assert_numpy_answer(ops, again, value)

    check()
    # strings have no kernels on a card: they stay on the host, as numpy values
    for text in (np.asarray(b"abc"), np.asarray(["a", "bc"])):
        out = ops.constant(text)(ONE)
        assert not cuda_ops.is_device_array(out)
        np.testing.assert_array_equal(ops.to_host(out), text)
        assert type(ops.to_host(out)) is type(numpy_ops.scalarize(text))


def overwrite(ops, x, value):
    """Write ``value`` into every element of the backend tensor ``x``, in place."""
    if isinstance(ops, NumpyOps) or not cuda_ops.is_device_array(x):  # (a card's int32)
        x[...] = value
    else:
        host = np.full(x.shape, value, x.dtype)
        ops.launcher.call(lambda stream: x.copy_to_device(host, stream=stream))


@pytest.mark.parametrize("name", BACKENDS)
def test_copy_is_independent_of_its_source(name):
    ops = backend(name)

    @examples(name)
    @given(st.sampled_from(CASTABLE).flatmap(host_values))
    def check(x):
        expected = np.copy(x)  # (the numpy backend's tensor is x itself)
        src = ops.from_host(x)
        copy = ops.copy(src)
        assert_numpy_answer(ops, copy, expected)
        if np.ndim(x):  # (numpy scalars cannot change)
            assert copy is not src
            overwrite(ops, src, 7)
            assert_numpy_answer(ops, copy, expected)
            np.testing.assert_array_equal(ops.to_host(src), np.full(np.shape(x), 7, src.dtype))

    check()


@pytest.mark.parametrize("name", BACKENDS)
def test_shape_is_the_tensors_shape(name):
    ops = backend(name)

    @examples(name)
    @given(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3))
    def check(shape):
        assert ops.shape(ops.from_host(np.zeros(shape, np.float32))) == shape
        if shape == ():
            assert ops.shape(ops.from_host(np.float32(2))) == ()

    check()


@pytest.mark.parametrize("name", BACKENDS)
def test_to_host_from_host_round_trip(name):
    ops = backend(name)

    @examples(name, 2)
    @given(
        st.sampled_from(CASTABLE).flatmap(
            lambda dt: hnp.arrays(
                dt,
                hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
                elements=elements(dt),
            )
        ),
        st.booleans(),
    )
    def check(value, as_scalar):
        host = numpy_ops.scalarize(value) if as_scalar else value  # 0-d arrays too
        tensor = ops.from_host(host)
        assert is_backend_tensor(ops, tensor)
        if name == "numpy" and type(host) is np.ndarray and host.ndim == 0:
            # The one difference: the numpy backend hands back the very 0-d array it was
            # given, which is how a fed-and-fetched scalar comes back as a 0-d array, as from
            # TF's client (test_session.py); a card's 0-d array comes back as a scalar.
            assert ops.to_host(tensor) is host
            return
        assert_numpy_answer(ops, tensor, value)
        # bringing a host value to the host changes nothing
        assert_numpy_answer(ops, ops.from_host(ops.to_host(tensor)), value)

    check()
    ref = VariableRef("v", np.float32, (2,))
    assert ops.from_host(ref) is ref


@pytest.mark.parametrize("name", BACKENDS)
def test_on_host_runs_a_host_kernel_on_numpy_values(name):
    ops = backend(name)
    ref = VariableRef("v", np.float32, (2, 3))
    seen = []

    def host_kernel(ctx, ins):
        seen.append((ctx, ins))
        x, ref_in, y = ins
        return (
            np.reshape(x, (3, 2)),
            ref_in,
            np.concatenate([np.reshape(y, -1), [5]]),
            np.reshape(np.reshape(y, -1), ()),
        )  # a 0-d array, as reshape gives

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.int64(4)
    outs = ops.on_host(host_kernel)(ONE, [ops.from_host(x), ref, ops.from_host(y)])
    ((ctx, ins),) = seen
    assert ctx is ONE
    assert type(ins[0]) is np.ndarray and ins[0].dtype == np.float32
    np.testing.assert_array_equal(ins[0], x)
    assert ins[1] is ref  # variable references pass untouched
    assert isinstance(ins[2], np.generic) and ins[2] == 4
    assert len(outs) == 4 and outs[1] is ref
    assert_numpy_answer(ops, outs[0], x.reshape(3, 2))
    assert_numpy_answer(ops, outs[2], np.array([4, 5], np.int64))
    assert_numpy_answer(ops, outs[3], np.int64(4))


@pytest.mark.cudasim
def test_an_emulated_cards_backend_switches_the_simulator_on():
    """In a fresh process where nothing asked for the simulator, the backend of an emulated
    card still runs its kernels in it (it turns it on before numba.cuda is imported)."""
    script = (
        "import numpy as np\n"
        "from minitf.kernels import cuda_ops\n"
        "ops = cuda_ops.backend_for_card(0, emulated=True)\n"
        "print(ops.to_host(ops.map('square')(None, ops.from_host(np.arange(3.0)))))\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_ENABLE_CUDASIM", "MINITF_GPU_BACKEND")
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0. 1. 4.]"


# ---------------------------------------------------------------------------------------
# The numpy backend: large operands give the same answer split over the intra-op pool
# ---------------------------------------------------------------------------------------

SPLIT = settings(max_examples=8, deadline=None)


@st.composite
def large_shapes(draw):
    """A shape of at least SPLIT_ELEMENTS elements: (n,), (rows, cols) or (rows, 2, cols)."""
    rows = draw(st.integers(2, 300))
    cols = -(-SPLIT_ELEMENTS // rows) + draw(st.integers(0, 5))
    return draw(st.sampled_from([(rows * cols,), (rows, cols), (rows, 2, -(-cols // 2))]))


# (no float16: its sums of 65536 elements are not exact, split or not)
LARGE_DTYPES = [np.float32, np.float64, np.int32, np.int64]


def large(shape, dtype, seed, bound=50):
    """Random integers in [-bound, bound) as ``dtype``: float sums stay exact."""
    return np.random.default_rng(seed).integers(-bound, bound, shape).astype(dtype)


@SPLIT
@given(
    st.sampled_from(tensor_ops.ZIP_FNS),
    st.sampled_from(LARGE_DTYPES),
    large_shapes(),
    st.integers(0, 2**16),
)
def test_numpy_large_zip_same_answer_split(fn, dtype, shape, seed):
    if fn in tensor_ops.FLOAT_ZIP_FNS and np.dtype(dtype).kind != "f":
        dtype = np.float64
    x, y = large(shape, dtype, seed), large(shape, dtype, seed + 1)
    if fn in ("realdiv", "floordiv"):
        y[y == 0] = 3
    ctx = TwoChunks()
    out = NumpyOps().zip(fn)(ctx, x, y)
    assert fn == "floordiv" or ctx.splits == 1  # FloorDiv is not a splittable kernel
    assert_numpy_answer(numpy_ops.NUMPY, out, numpy_zip(fn, x, y))


@SPLIT
@given(st.sampled_from(LARGE_DTYPES), large_shapes(), st.integers(2, 4), st.integers(0, 2**16))
def test_numpy_large_add_n_same_answer_split(dtype, shape, count, seed):
    xs = [large(shape, dtype, seed + i) for i in range(count)]
    ctx = TwoChunks()
    out = NumpyOps().add_n()(ctx, xs)
    assert ctx.splits == 1
    assert_numpy_answer(numpy_ops.NUMPY, out, functools.reduce(np.add, xs))


@SPLIT
@given(
    st.sampled_from(tensor_ops.REDUCE_FNS),
    st.sampled_from(LARGE_DTYPES),
    large_shapes(),
    st.booleans(),
    st.data(),
)
def test_numpy_large_reduce_same_answer_split(fn, dtype, shape, keep, data):
    x = large(shape, dtype, data.draw(st.integers(0, 2**16)))
    axes = sorted(data.draw(st.sets(st.integers(0, x.ndim - 1), min_size=1)))
    ctx = TwoChunks()
    out = NumpyOps().reduce(fn, keep, x.dtype)(ctx, x, axes)
    # a full reduction splits into partial sums, one keeping axis 0 into row blocks
    assert ctx.splits == (1 if len(axes) == x.ndim or 0 not in axes else 0)
    assert_numpy_answer(numpy_ops.NUMPY, out, numpy_reduce(fn, x, axes, keep))


@SPLIT
@given(
    st.integers(16, 128),
    st.integers(16, 128),
    st.sampled_from([np.float32, np.float64]),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_numpy_large_matmul_same_answer_split(m, n, dtype, ta, tb, seed):
    k = -(-SPLIT_FLOPS // (m * n))
    a = large((k, m) if ta else (m, k), dtype, seed, bound=4)
    b = large((n, k) if tb else (k, n), dtype, seed + 1, bound=4)
    ctx = TwoChunks()
    out = NumpyOps().matmul(ta, tb)(ctx, a, b)
    assert ctx.splits == 1
    assert_numpy_answer(numpy_ops.NUMPY, out, np.matmul(a.T if ta else a, b.T if tb else b))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3]), max_size=4).map(tuple),
    st.lists(st.sampled_from([1, 2, 3]), max_size=4).map(tuple),
)
def test_broadcast_shape_is_numpys(sx, sy):
    """The numpy backend's quick broadcast shape (one shape ending the other: a scalar, a bias
    row) gives numpy's answer, and numpy's error where the shapes do not broadcast."""
    try:
        want = np.broadcast_shapes(sx, sy)
    except ValueError:
        with pytest.raises(ValueError):
            numpy_ops._broadcast_shape(sx, sy)
        return
    assert numpy_ops._broadcast_shape(sx, sy) == want


@pytest.mark.parametrize("name", BACKENDS)
def test_reshape_is_a_view_on_the_backend(name, monkeypatch):
    """``reshape`` hands back the tensor's elements in the new shape; on a card it is a view
    built without a CUDA call (no copy, no trip to the host), as TF's Reshape aliases its input."""
    ops = backend(name)

    @examples(name)
    @given(
        st.sampled_from(NUMERIC).flatmap(
            lambda dt: host_values(dt, shape=st.sampled_from([(2, 3), (6,), (1, 6, 1)]))
        ),
        st.sampled_from([(6,), (3, 2), (1, 2, 3), (6, 1)]),
    )
    def check(value, shape):
        x = ops.from_host(value)
        calls = []
        if name == "cuda":
            monkeypatch.setattr(ops, "_call", lambda *a: calls.append(a[0]))
        out = ops.reshape(x, shape)
        monkeypatch.undo()
        assert calls == []
        assert_numpy_answer(ops, out, np.reshape(value, shape))

    check()
