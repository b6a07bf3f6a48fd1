"""The numpy backend: the CPU, and the emulated GPU cards.

Book sections: "Operations and kernels" and "Parallel Execution" (Figure 12-5's multithreaded
kernel).  It implements ``tensor_ops.TensorOps`` with numpy.  Scalars travel as numpy scalars
and arrays as ndarrays; results are new values, or a forwarded input's buffer, so a tensor can
be shared by all its consumers without copies.

Intra-op parallelism: an add, sub, mul or realdiv of two same-shaped operands of at least
``SPLIT_ELEMENTS`` elements, an ``add_n`` of such operands, a large sum, and a matmul of at least
``SPLIT_FLOPS`` multiply-adds split their work into chunks that ``ctx.parallel_for`` runs on the
device's intra-op pool (numpy releases the GIL, so the chunks really run in parallel).

Forwarding: ``zip`` and ``map`` take an ``out`` tensor, an input that dies with the op
(``runtime/tensor_lifetime.py``), and write the result into it when its shape and dtype fit
(``fits``), as TF's ``forward_input_or_allocate_output`` does.
:func:`splits_elementwise` and :func:`splits_matmul` are the rules; the simulator applies the
same two functions to static shapes.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from minitf.kernels import tensor_ops

# A split hands chunks to intra-op threads: waking one and waiting for the last costs about
# 20-40 us each in CPython (a futex wake and the GIL), where Eigen's spinning threads cost TF
# well under a microsecond.  Measured on the 2-core VM (bench/README, "Where a split pays"):
# an add of 2^19 float32 takes 66 us whole and 97 us split in two, 2^20 155 / 137 us; a
# 128x300x100 matmul (3.8M multiply-adds) 80 / 105 us, 256^3 (16.8M) 325 / 242 us.  So only
# work at least that large is split.
SPLIT_ELEMENTS = 1 << 20  # elementwise ops at least this large split over the intra-op pool
SPLIT_FLOPS = 1 << 24  # matmuls with at least this many multiply-adds split too


def splits_elementwise(num_elements: int) -> bool:
    """Whether an elementwise kernel over this many elements splits its work."""
    return num_elements >= SPLIT_ELEMENTS


def splits_matmul(m: int, k: int, n: int) -> bool:
    """Whether an ``m x k`` by ``k x n`` matmul splits its work over the intra-op pool (its
    rows, or its columns where it has more of those: :func:`matmul_split_length`)."""
    return m * k * n >= SPLIT_FLOPS and max(m, n) >= 2


def matmul_split_length(m: int, n: int) -> int:
    """How many rows (``m``) or columns (``n``) a split matmul cuts into blocks: the longer
    side, so that each block repacks the smaller operand (a 128x784 by 784x300 product cuts
    its 300 columns and each block packs only its part of the 784x300 matrix)."""
    return m if m >= n else n


def scalarize(a: Any) -> Any:
    """A 0-d array as a numpy scalar (how minitf's numpy kernels hand over scalars)."""
    return a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a


def _floordiv(x, y):
    # TF's float kernel is floor(x / y) (1.0 // 0.1 == 10.0); Python's // differs (9.0).
    if np.result_type(x, y).kind in "fc":
        return np.floor(np.true_divide(x, y))
    return np.floor_divide(x, y)


def _into(result, out):
    """``result`` written into ``out`` (a forwarded buffer), or as it is when there is none."""
    if out is None:
        return scalarize(result)
    out[...] = result
    return out


def _relu_grad(g, features, out=None):
    """TF's ``ReluGrad`` as its functor computes it: ``g * (features > 0)``.  A dead unit's
    gradient is zero (-0 where it was negative) and NaN where it was NaN or infinite, as TF
    gives (a select would give 0 there)."""
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, silently (TF's too)
        return scalarize(np.multiply(g, np.greater(features, 0), out=out))


def _sigmoid_grad(y, g, out=None):
    """TF's ``SigmoidGrad(y, g)``: ``g * y * (1 - y)``."""
    return _into(g * y * (1 - y), out)


def _tanh_grad(y, g, out=None):
    """TF's ``TanhGrad(y, g)``: ``g * (1 - y * y)``."""
    return _into(g * (1 - y * y), out)


def _sqrt_grad(y, g, out=None):
    """TF's ``SqrtGrad(y, g)``: ``0.5 * g / y`` (y = sqrt(x))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _into(y.dtype.type(0.5) * g / y, out)


def _rsqrt_grad(y, g, out=None):
    """TF's ``RsqrtGrad(y, g)``: ``-0.5 * (g * y) * (y * y)`` (y = 1/sqrt(x))."""
    return _into(y.dtype.type(-0.5) * (g * y) * (y * y), out)


def _reciprocal_grad(y, g, out=None):
    """TF's ``ReciprocalGrad(y, g)``: ``-g * y * y`` (y = 1/x)."""
    return _into(-g * y * y, out)


def _relu(x, out=None):
    return np.maximum(x, x.dtype.type(0), out=out)  # a zero of x's own type: no array made


def _rsqrt(x, out=None):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(1, np.sqrt(x), out=out, dtype=np.result_type(x))


def _reciprocal(x, out=None):
    with np.errstate(divide="ignore"):
        return np.divide(1, x, out=out, dtype=np.result_type(x))


def _sigmoid(x, out=None):
    """The logistic function, without overflow for large ``|x|``: ``exp(-log(1 + exp(-x)))``."""
    return np.exp(-np.logaddexp(np.zeros_like(x), -x), out=out)


def _quiet(ufunc):
    """``ufunc`` with numpy's warnings off: TF's log(0) is -inf and sqrt(-1) nan, silently."""

    def f(x, out=None):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return ufunc(x, out=out)

    return f


_ZIP = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "realdiv": (operator.truediv, np.true_divide),
    "floordiv": (_floordiv, None),
    "maximum": (np.maximum, np.maximum),
    "minimum": (np.minimum, np.minimum),
    "relu_grad": (_relu_grad, _relu_grad),
    "sigmoid_grad": (_sigmoid_grad, _sigmoid_grad),
    "tanh_grad": (_tanh_grad, _tanh_grad),
    "sqrt_grad": (_sqrt_grad, _sqrt_grad),
    "rsqrt_grad": (_rsqrt_grad, _rsqrt_grad),
    "reciprocal_grad": (_reciprocal_grad, _reciprocal_grad),
}
_MAP = {"neg": (operator.neg, np.negative), "square": (lambda x: x * x, np.square)}
_MAP.update(
    {
        fn: (f, f)
        for fn, f in (
            ("abs", np.absolute),
            ("relu", _relu),
            ("exp", _quiet(np.exp)),
            ("log", _quiet(np.log)),
            ("sqrt", _quiet(np.sqrt)),
            ("rsqrt", _rsqrt),
            ("reciprocal", _reciprocal),
            ("floor", np.floor),
            ("sigmoid", _quiet(_sigmoid)),
            ("tanh", np.tanh),
        )
    }
)


def _broadcast_shape(sx: tuple, sy: tuple) -> tuple:
    """``np.broadcast_shapes(sx, sy)``, at once where one shape ends the other (equal shapes, a
    scalar, a bias row: the cases of a training step), else numpy's own, which makes arrays to
    find out (a few microseconds)."""
    if len(sy) <= len(sx) and sx[len(sx) - len(sy) :] == sy:
        return sx
    if len(sx) < len(sy) and sy[len(sy) - len(sx) :] == sx:
        return sy
    return np.broadcast_shapes(sx, sy)


def fits(out: Any, shape: tuple, dtype: Any) -> bool:
    """Whether a forwarded input ``out`` can hold a result of ``shape`` and ``dtype``."""
    return type(out) is np.ndarray and out.shape == shape and out.dtype == dtype


def _split_zip(ctx, ufunc, x, y, out=None):
    dtype = np.result_type(x, y)
    if not fits(out, x.shape, dtype):
        out = np.empty(x.shape, dtype)
    fx, fy, fo = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    ctx.parallel_for(fo.size, lambda lo, hi: ufunc(fx[lo:hi], fy[lo:hi], out=fo[lo:hi]))
    return out


def _split_sum(ctx, x, axis, keep, np_dtype):
    """``np.sum`` that splits large inputs over the intra-op pool: partial sums of flat chunks
    for a full reduction, row blocks when the first axis is kept."""
    if type(x) is not np.ndarray:
        return np.sum(x, axis=axis, dtype=np_dtype, keepdims=keep)
    if not splits_elementwise(x.size):  # np.sum's own call, without its Python wrapper
        return np.add.reduce(x, axis=axis, dtype=np_dtype, keepdims=keep)
    if sorted(axis) == list(range(x.ndim)):
        flat = x.reshape(-1)
        parts = {}

        def partial(lo, hi):
            parts[lo] = np.sum(flat[lo:hi], dtype=np_dtype)

        ctx.parallel_for(flat.size, partial)
        total = np.sum(np.array([parts[k] for k in sorted(parts)], dtype=np_dtype), dtype=np_dtype)
        return np.reshape(total, (1,) * x.ndim) if keep else total
    if 0 in axis:
        return np.sum(x, axis=axis, dtype=np_dtype, keepdims=keep)
    row_shape = np.sum(x[:1], axis=axis, dtype=np_dtype, keepdims=keep).shape[1:]
    out = np.empty((x.shape[0],) + row_shape, np_dtype)

    def rows(lo, hi):
        out[lo:hi] = np.sum(x[lo:hi], axis=axis, dtype=np_dtype, keepdims=keep)

    ctx.parallel_for(x.shape[0], rows)
    return out


def _mean(ctx, x, axis, keep, np_dtype, acc):
    """A mean summed in ``acc`` (int64 for integers, float32 for float16, else ``np_dtype``)."""
    shape = x.shape if type(x) is np.ndarray else np.shape(x)
    n = math.prod([shape[a] for a in axis])
    if acc is np.int64:  # TF truncates an integer mean toward zero
        total = _split_sum(ctx, x, axis, keep, np.int64)
        return np.trunc(total / max(n, 1)).astype(np_dtype)
    return np.asarray(_split_sum(ctx, x, axis, keep, acc) / n).astype(np_dtype, copy=False)


class NumpyOps:
    """``tensor_ops.TensorOps`` with numpy (see the module docstring)."""

    name = "numpy"

    def map(self, fn: str):
        f, ufunc = _MAP[fn]

        def compute(ctx, x, out=None):
            if out is not None and fits(out, np.shape(x), np.result_type(x)):
                return ufunc(x, out=out)
            return f(x)

        return compute

    def zip(self, fn: str):
        f, ufunc = _ZIP[fn]
        if ufunc is None:
            return lambda ctx, x, y, out=None: f(x, y)
        ndarray = np.ndarray  # (a hot path: scalars go straight to ``f``)

        def compute(ctx, x, y, out=None):
            if (
                type(x) is ndarray
                and type(y) is ndarray
                and x.shape == y.shape
                and splits_elementwise(x.size)
                and not getattr(ctx, "one_piece", False)  # (nothing to split it over)
            ):
                return _split_zip(ctx, ufunc, x, y, out)
            if out is not None:
                if type(x) is ndarray and type(y) is ndarray and x.dtype == y.dtype:
                    shape, dtype = _broadcast_shape(x.shape, y.shape), x.dtype  # (hot path)
                elif type(x) is ndarray and type(y) is x.dtype.type:  # a scalar of its type
                    shape, dtype = x.shape, x.dtype
                else:
                    shape = _broadcast_shape(np.shape(x), np.shape(y))
                    dtype = np.result_type(x, y)
                if fits(out, shape, dtype):
                    return ufunc(x, y, out=out)
            return f(x, y)

        return compute

    def zip_scalars(self, fn: str):
        return _ZIP[fn][0]

    def reduce(self, fn: str, keep_dims: bool, dtype):
        np_dtype = np.dtype(dtype).type
        if fn == "sum":
            return lambda ctx, x, axes: scalarize(
                _split_sum(ctx, x, tuple(axes), keep_dims, np_dtype)
            )
        if np.issubdtype(np_dtype, np.integer):
            acc = np.int64
        else:
            acc = np.float32 if np_dtype == np.float16 else np_dtype
        return lambda ctx, x, axes: scalarize(_mean(ctx, x, tuple(axes), keep_dims, np_dtype, acc))

    def matmul(self, transpose_a: bool, transpose_b: bool):
        def compute(ctx, a, b):
            a = a.T if transpose_a else a
            b = b.T if transpose_b else b
            m, k = a.shape
            n = b.shape[1]
            # a step run on one thread (``ctx.one_piece``) calls BLAS as it is: no blocks
            if getattr(ctx, "one_piece", False) or not splits_matmul(m, k, n):
                return np.matmul(a, b)
            # Figure 12-5's op A: row (or column) blocks of the result computed by the
            # intra-op pool.
            out = np.empty((m, n), np.result_type(a, b))
            if matmul_split_length(m, n) == m:
                ctx.parallel_for(m, lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]))
            else:
                ctx.parallel_for(n, lambda lo, hi: np.matmul(a, b[:, lo:hi], out=out[:, lo:hi]))
            return out

        return compute

    def add_n(self):
        def compute(ctx, xs):
            first = xs[0]
            if (
                type(first) is np.ndarray
                and splits_elementwise(first.size)
                and all(type(x) is np.ndarray and x.shape == first.shape for x in xs)
            ):
                out = np.empty(first.shape, np.result_type(*xs))
                flats, fo = [x.reshape(-1) for x in xs], out.reshape(-1)

                def chunk(lo, hi):
                    np.add(flats[0][lo:hi], flats[1][lo:hi], out=fo[lo:hi])
                    for f in flats[2:]:
                        np.add(fo[lo:hi], f[lo:hi], out=fo[lo:hi])

                ctx.parallel_for(fo.size, chunk)
                return out
            return functools.reduce(operator.add, xs)

        return compute

    def cast(self, dtype):
        return lambda ctx, x: scalarize(np.asarray(x).astype(dtype))

    def constant(self, value):
        out = scalarize(value)
        return lambda ctx: out

    def copy(self, x):
        return scalarize(np.array(x, copy=True))

    def shape(self, x) -> tuple:
        # an array's own attribute where it is one (a step asks about sixty times); a numpy
        # scalar's is () (np.shape's Python wrapper costs more than the question)
        if type(x) is np.ndarray:
            return x.shape
        return () if isinstance(x, np.generic) else np.shape(x)

    def reshape(self, x, shape: tuple):
        if type(x) is np.ndarray and shape:  # a view, without np.reshape's Python wrapper
            return x.reshape(shape)
        return scalarize(np.reshape(x, shape))

    def to_host(self, x):
        return x

    def from_host(self, value):
        return value

    def on_host(self, compute):
        # a host kernel's 0-d array (a reshape to []) is handed on as a scalar, as every
        # result of this backend is, and as a card's result comes back from the card
        return lambda ctx, ins: tuple(map(scalarize, compute(ctx, ins)))


NUMPY = NumpyOps()
shape_text = tensor_ops.shape_text
