"""CPU kernels (numpy), also run by emulated GPU devices.

Book section: "Operations and kernels".  Each ``register`` call names the dtypes TF has a CPU
kernel and a GPU kernel for; emulated GPUs run these same numpy implementations (real CUDA
kernels live in ``kernels/cuda.py``).  Scalars travel as numpy scalars and arrays as ndarrays;
kernels never modify their inputs, so tensors can be shared between consumers without copies.
"""

import functools
import operator

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.registry import register
from minitf.ops.random_ops import make_generator
from minitf.runtime.resource_mgr import VariableRef

FLOATS = (D.float16, D.float32, D.float64)
COMPLEX = (D.complex64, D.complex128)
INTS = (D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16)
NUMERIC = FLOATS + COMPLEX + INTS
ALL = NUMERIC + (D.bool, D.string)
GPU_MATH = FLOATS + COMPLEX + (D.int32, D.int64)
GPU_STATE = FLOATS + COMPLEX + (D.int64,)        # no int32 variables on GPUs (the book's error)
GPU_ARRAY = FLOATS + COMPLEX + (D.int32, D.int64, D.bool)


def _shape_text(x):
    return "[%s]" % ",".join(str(d) for d in np.shape(x))


def _scalarize(a):
    return a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a


def owned(value, np_dtype):
    """A private copy of ``value`` (what a variable stores; numpy scalars for rank 0)."""
    return _scalarize(np.array(value, dtype=np_dtype, copy=True))


# -- sources ---------------------------------------------------------------------------------

def _const(op, device):
    out = (_scalarize(op.get_attr("value")),)
    return lambda ctx, ins: out


def _placeholder(op, device):
    dtype, shape = op.get_attr("dtype"), op.get_attr("shape")
    shape_part = "" if shape.ndims is None else " and shape [%s]" % ",".join(
        "?" if d is None else str(d) for d in shape.as_list())
    msg = "You must feed a value for placeholder tensor '%s' with dtype %s%s" % (
        op.name, dtype.type_string, shape_part)

    def compute(ctx, ins):
        raise errors.InvalidArgumentError(None, None, msg)
    return compute


register("Const", _const, cpu=ALL, gpu=GPU_ARRAY)
register("Placeholder", _placeholder, cpu="any", gpu="any")
register("NoOp", lambda op, device: (lambda ctx, ins: ()), cpu="any", gpu="any")
register("Identity", lambda op, device: (lambda ctx, ins: (ins[0],)), cpu=ALL, gpu=GPU_ARRAY)


# -- elementwise -----------------------------------------------------------------------------

SPLIT_ELEMENTS = 1 << 16   # elementwise ops at least this large split over the intra-op pool
SPLIT_FLOPS = 1 << 21      # matmuls with at least this many multiply-adds split too


def _binary(fn, ufunc=None):
    """A broadcasting binary kernel; with ``ufunc``, large same-shape operands are split into
    chunks that the device's intra-op pool computes in parallel (numpy releases the GIL)."""
    def factory(op, device):
        def compute(ctx, ins):
            x, y = ins
            if ufunc is not None and type(x) is np.ndarray and type(y) is np.ndarray and \
                    x.shape == y.shape and x.size >= SPLIT_ELEMENTS:
                out = np.empty(x.shape, np.result_type(x, y))
                fx, fy, fo = x.reshape(-1), y.reshape(-1), out.reshape(-1)
                ctx.parallel_for(fo.size, lambda lo, hi: ufunc(fx[lo:hi], fy[lo:hi],
                                                               out=fo[lo:hi]))
                return (out,)
            try:
                return (fn(x, y),)
            except ValueError:
                raise errors.InvalidArgumentError(None, None, "Incompatible shapes: %s vs. %s"
                                                  % (_shape_text(x), _shape_text(y)))
        return compute
    return factory


def _unary(fn):
    return lambda op, device: (lambda ctx, ins: (fn(ins[0]),))


register("AddV2", _binary(operator.add, np.add), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
register("Sub", _binary(operator.sub, np.subtract), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
register("Mul", _binary(operator.mul, np.multiply), cpu=NUMERIC, gpu=GPU_MATH,
         splittable=True)
register("RealDiv", _binary(operator.truediv, np.true_divide), cpu=FLOATS + COMPLEX,
         gpu=FLOATS + COMPLEX, splittable=True)
def _floordiv(op, device):
    # TF's float kernel is floor(x / y) (1.0 // 0.1 == 10.0); Python's // differs (9.0).
    fn = operator.floordiv if op.get_attr("T").is_integer else (lambda x, y: np.floor(x / y))
    return _binary(fn)(op, device)


register("FloorDiv", _floordiv, cpu=FLOATS + INTS, gpu=FLOATS + (D.int64,))
register("Neg", _unary(operator.neg), cpu=NUMERIC, gpu=GPU_MATH)
register("Square", _unary(lambda x: x * x), cpu=NUMERIC, gpu=GPU_MATH)


def _cast(op, device):
    dst = op.get_attr("DstT").as_numpy_dtype
    return lambda ctx, ins: (_scalarize(np.asarray(ins[0]).astype(dst)),)


register("Cast", _cast, cpu=ALL, gpu=GPU_ARRAY)


# -- linear algebra and reductions -------------------------------------------------------------

def _matmul(op, device):
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")

    def compute(ctx, ins):
        a, b = ins
        a = a.T if ta else a
        b = b.T if tb else b
        if np.ndim(a) != 2 or np.ndim(b) != 2 or a.shape[1] != b.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, "Matrix size-incompatible: In[0]: %s, In[1]: %s"
                % (_shape_text(a), _shape_text(b)))
        m, k = a.shape
        n = b.shape[1]
        if m * k * n < SPLIT_FLOPS or m < 2:
            return (np.matmul(a, b),)
        # Figure 12-5's op A: row blocks of the result computed by the intra-op pool.
        out = np.empty((m, n), np.result_type(a, b))
        ctx.parallel_for(m, lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]))
        return (out,)
    return compute


def _add_n(op, device):
    def compute(ctx, ins):
        first = ins[0]
        if type(first) is np.ndarray and first.size >= SPLIT_ELEMENTS and \
                all(type(x) is np.ndarray and x.shape == first.shape for x in ins):
            out = np.empty(first.shape, np.result_type(*ins))
            flats, fo = [x.reshape(-1) for x in ins], out.reshape(-1)

            def chunk(lo, hi):
                np.add(flats[0][lo:hi], flats[1][lo:hi], out=fo[lo:hi])
                for f in flats[2:]:
                    np.add(fo[lo:hi], f[lo:hi], out=fo[lo:hi])
            ctx.parallel_for(fo.size, chunk)
            return (out,)
        return (functools.reduce(operator.add, ins),)
    return compute


def _split_sum(ctx, x, axis, keep, np_dtype):
    """``np.sum`` that splits large inputs over the intra-op pool: partial sums of flat chunks
    for a full reduction, row blocks when the first axis is kept."""
    if type(x) is not np.ndarray or x.size < SPLIT_ELEMENTS:
        return np.sum(x, axis=axis, dtype=np_dtype, keepdims=keep)
    if sorted(axis) == list(range(x.ndim)):
        flat = x.reshape(-1)
        parts = {}

        def partial(lo, hi):
            parts[lo] = np.sum(flat[lo:hi], dtype=np_dtype)
        ctx.parallel_for(flat.size, partial)
        total = np.sum(np.array([parts[k] for k in sorted(parts)], dtype=np_dtype),
                       dtype=np_dtype)
        return np.reshape(total, (1,) * x.ndim) if keep else total
    if 0 in axis:
        return np.sum(x, axis=axis, dtype=np_dtype, keepdims=keep)
    row_shape = np.sum(x[:1], axis=axis, dtype=np_dtype, keepdims=keep).shape[1:]
    out = np.empty((x.shape[0],) + row_shape, np_dtype)

    def rows(lo, hi):
        out[lo:hi] = np.sum(x[lo:hi], axis=axis, dtype=np_dtype, keepdims=keep)
    ctx.parallel_for(x.shape[0], rows)
    return out


def _reduction(mean):
    def factory(op, device):
        keep = op.get_attr("keep_dims")
        np_dtype = op.get_attr("T").as_numpy_dtype

        def compute(ctx, ins):
            x, axes = ins
            axis = tuple(sorted({int(a) % max(np.ndim(x), 1)
                                 for a in np.reshape(axes, -1)}))
            if not mean:
                return (_scalarize(_split_sum(ctx, x, axis, keep, np_dtype)),)
            n = int(np.prod([np.shape(x)[a] for a in axis]))
            if np.issubdtype(np_dtype, np.integer):
                total = _split_sum(ctx, x, axis, keep, np.int64)
                return (_scalarize(np.trunc(total / max(n, 1)).astype(np_dtype)),)
            acc = np.float32 if np_dtype == np.float16 else np_dtype
            total = _split_sum(ctx, x, axis, keep, acc)
            return (_scalarize(np.asarray(total / n).astype(np_dtype)),)
        return compute
    return factory


register("MatMul", _matmul, cpu=FLOATS + COMPLEX + (D.int32, D.int64), gpu=FLOATS + COMPLEX,
         cost="expensive", splittable=True)
register("AddN", _add_n, cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
register("Sum", _reduction(False), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
register("Mean", _reduction(True), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)


# -- shapes ----------------------------------------------------------------------------------

def _reshape(op, device):
    def compute(ctx, ins):
        x, shape = ins
        try:
            return (np.reshape(x, [int(d) for d in np.reshape(shape, -1)]),)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, None, "Input to reshape is a tensor with %d values, but the requested "
                "shape has %d" % (np.size(x), int(np.prod(np.reshape(shape, -1)))))
    return compute


register("Reshape", _reshape, cpu=ALL, gpu=GPU_ARRAY)
register("ExpandDims", lambda op, device: (
    lambda ctx, ins: (np.expand_dims(ins[0], int(ins[1])),)), cpu=ALL, gpu=GPU_ARRAY)
register("ConcatV2", lambda op, device: (
    lambda ctx, ins: (np.concatenate(ins[:-1], axis=int(ins[-1])),)), cpu=ALL, gpu=GPU_ARRAY)
register("Pack", lambda op, device: (
    lambda ctx, ins, axis=op.get_attr("axis"): (np.stack(ins, axis=axis),)),
    cpu=ALL, gpu=GPU_ARRAY)


def _fill(op, device):
    np_dtype = op.get_attr("T").as_numpy_dtype
    return lambda ctx, ins: (_scalarize(np.full([int(d) for d in np.reshape(ins[0], -1)],
                                                ins[1], dtype=np_dtype)),)


register("Fill", _fill, cpu=ALL, gpu=GPU_ARRAY)


# -- variables -------------------------------------------------------------------------------

def _variable(op, device):
    name = op.get_attr("shared_name") or op.name
    np_dtype = op.get_attr("dtype").as_numpy_dtype
    shape = op.get_attr("shape")
    shape = tuple(shape.as_list()) if shape.is_fully_defined() else None
    ref = device.resource_manager.lookup_or_create(
        op.get_attr("container"), name,
        lambda: VariableRef(name, np_dtype, shape, getattr(device, "allocator", None)))
    out = (ref,)
    return lambda ctx, ins: out


def _assign(op, device):
    validate = op.get_attr("validate_shape")

    def compute(ctx, ins):
        ref, value = ins
        with ref.lock:
            # Like TF, an uninitialised variable already has its declared shape.
            lhs = np.shape(ref.value) if ref.value is not None else ref.shape
            if validate and lhs is not None and lhs != np.shape(value):
                raise errors.InvalidArgumentError(
                    None, None, "Assign requires shapes of both tensors to match. lhs shape= [%s] "
                    "rhs shape= %s" % (",".join(map(str, lhs)), _shape_text(value)))
            ref.set(owned(value, ref.dtype))
        return (ref,)
    return compute


def _update(fn):
    def factory(op, device):
        def compute(ctx, ins):
            ref, delta = ins
            with ref.lock:
                old = ref.read()
                if np.shape(old) != np.shape(delta):
                    raise errors.InvalidArgumentError(
                        None, None, "Must have the same shape. lhs shape= %s rhs shape= %s"
                        % (_shape_text(old), _shape_text(delta)))
                ref.set(_scalarize(np.asarray(fn(old, delta), dtype=ref.dtype)))
            return (ref,)
        return compute
    return factory


register("VariableV2", _variable, cpu=ALL, gpu=GPU_STATE)
register("Assign", _assign, cpu=ALL, gpu=GPU_STATE)
register("AssignAdd", _update(operator.add), cpu=NUMERIC, gpu=GPU_STATE)
register("AssignSub", _update(operator.sub), cpu=NUMERIC, gpu=GPU_STATE)
register("IsVariableInitialized", lambda op, device: (
    lambda ctx, ins: (np.bool_(ins[0].value is not None),)), cpu=ALL, gpu=GPU_STATE)


# -- random ----------------------------------------------------------------------------------

def _random(kind):
    def factory(op, device):
        rng = make_generator(op)
        out_dtype = op.get_attr("dtype" if kind != "int" else "Tout").as_numpy_dtype
        gen_dtype = out_dtype if out_dtype in (np.float32, np.float64) else np.float64

        def compute(ctx, ins):
            shape = [int(d) for d in np.reshape(ins[0], -1)]
            if kind == "normal":
                x = rng.standard_normal(shape, dtype=gen_dtype)
            elif kind == "uniform":
                x = rng.random(shape, dtype=gen_dtype)
            elif kind == "truncated":
                x = rng.standard_normal(shape, dtype=gen_dtype)
                bad = np.abs(x) > 2
                while bad.any():
                    x[bad] = rng.standard_normal(int(bad.sum()), dtype=gen_dtype)
                    bad = np.abs(x) > 2
            else:
                lo, hi = int(ins[1]), int(ins[2])
                if lo >= hi:
                    raise errors.InvalidArgumentError(
                        None, None, "Need minval < maxval, got %d >= %d" % (lo, hi))
                x = rng.integers(lo, hi, size=shape)
            return (_scalarize(np.asarray(x, dtype=out_dtype)),)
        return compute
    return factory


register("RandomStandardNormal", _random("normal"), cpu=FLOATS, gpu=FLOATS)
register("RandomUniform", _random("uniform"), cpu=FLOATS, gpu=FLOATS)
register("TruncatedNormal", _random("truncated"), cpu=FLOATS, gpu=FLOATS)
register("RandomUniformInt", _random("int"), cpu=(D.int32, D.int64), gpu=(D.int32, D.int64))
