"""Math kernels: elementwise arithmetic, matmul, add_n, reductions and casts.

Book sections: "Operations and kernels" (each ``register`` call names the dtypes TF has a CPU
kernel and a GPU kernel for) and "Parallel Execution" (the splittable kernels).  Every kernel is
written once against its device's backend (``tensor_ops.py``): numpy on the CPU and emulated
cards, numba.cuda on a real card.  Shapes are checked here, before the backend is called, so
every backend fails with TF's message.
"""

import functools

import numpy as np

from minitf.framework import dtypes as D
from minitf.framework import errors
from minitf.kernels.numpy_ops import scalarize
from minitf.kernels.registry import (
    ALL,
    COMPLEX,
    FLOATS,
    GPU_ARRAY,
    GPU_MATH,
    INTS,
    NUMERIC,
    register,
)
from minitf.kernels.tensor_ops import host_kernel, invalid_argument, shape_text


def _shape_error(shape, x, y):
    """TF's error for operands that do not broadcast (None when they do: another failure)."""
    try:
        np.broadcast_shapes(shape(x), shape(y))
    except ValueError:
        return errors.InvalidArgumentError(
            None,
            None,
            "Incompatible shapes: %s vs. %s" % (shape_text(shape(x)), shape_text(shape(y))),
        )
    return None


def _zip_kernel(f, shape, into):
    """The kernel of a broadcasting binary op; ``into``: the input position whose buffer it
    may write its result into (None: a new buffer)."""
    if into is None:

        def compute(ctx, ins):
            x, y = ins
            try:
                return (f(ctx, x, y),)
            except ValueError:  # only then is it worth checking (a hot path)
                error = _shape_error(shape, x, y)
                if error is None:
                    raise
                raise error from None

        return compute

    def compute_into(ctx, ins):
        x, y = ins
        try:
            return (f(ctx, x, y, ins[into]),)
        except ValueError:
            error = _shape_error(shape, x, y)
            if error is None:
                raise
            raise error from None

    return compute_into


def _scalar_kernel(plain):
    """The kernel of a binary op whose operands are scalars by their static shapes, on a
    backend that computes scalars with a plain function (numpy: ``operator.add`` ...)."""

    def compute(ctx, ins):
        x, y = ins
        return (plain(x, y),)

    compute.forwarding = {0: compute, 1: compute}  # a scalar has no buffer to write into
    compute.direct = plain  # the executor's serial program may call it as it is
    return compute


@functools.cache
def _binary_kernel(fn, backend, scalars):
    """The one kernel of binary op ``fn`` on ``backend`` (``scalars``: its operands are scalars
    by their static shapes): it holds no state of its own, so every node of the op shares it (a
    step touches fewer objects)."""
    plain = backend.zip_scalars(fn) if scalars else None
    if plain is not None:
        return _scalar_kernel(plain)
    f, shape = backend.zip(fn), backend.shape
    compute = _zip_kernel(f, shape, None)
    compute.forwarding = {p: _zip_kernel(f, shape, p) for p in (0, 1)}
    return compute


@functools.cache
def _unary_kernel(fn, backend):
    """The one kernel of unary op ``fn`` on ``backend``, shared like ``_binary_kernel``'s."""
    f = backend.map(fn)

    def compute(ctx, ins):
        return (f(ctx, ins[0]),)

    def compute_into(ctx, ins):
        return (f(ctx, ins[0], ins[0]),)

    compute.forwarding = {0: compute_into}
    return compute


def _zip(fn):
    """A broadcasting binary kernel (``fn`` in ``tensor_ops.ZIP_FNS``), with its variants that
    write into input 0 or 1 (``compute.forwarding``); nodes whose operands are statically
    scalars get the backend's plain scalar function (``zip_scalars``), where it has one."""

    def factory(op, device):
        scalars = True
        for src, k in op.inputs:  # a loop: a big graph of adds makes thousands of these
            if src.outputs[k][1].ndims != 0:
                scalars = False
                break
        return _binary_kernel(fn, device.backend, scalars)

    return factory


def _map(fn):
    """A unary elementwise kernel (``fn`` in ``tensor_ops.MAP_FNS``), with its variant that
    writes into its input (``compute.forwarding[0]``)."""
    return lambda op, device: _unary_kernel(fn, device.backend)


_BINARY = {"splittable": True, "allocates": True, "forwards": (0, 1)}

register("AddV2", _zip("add"), cpu=NUMERIC, gpu=GPU_MATH, **_BINARY)
register("Sub", _zip("sub"), cpu=NUMERIC, gpu=GPU_MATH, **_BINARY)
register("Mul", _zip("mul"), cpu=NUMERIC, gpu=GPU_MATH, **_BINARY)
register("RealDiv", _zip("realdiv"), cpu=FLOATS + COMPLEX, gpu=FLOATS + COMPLEX, **_BINARY)
register(
    "FloorDiv",
    _zip("floordiv"),
    cpu=FLOATS + INTS,
    gpu=FLOATS + (D.int32, D.int64),  # TF's int32 one keeps its operands in host memory
    allocates=True,
    forwards=(0, 1),
)
register("Neg", _map("neg"), cpu=NUMERIC, gpu=GPU_MATH, allocates=True, forwards=(0,))
register("Square", _map("square"), cpu=NUMERIC, gpu=GPU_MATH, allocates=True, forwards=(0,))


def _cast(op, device):
    src, dst = op.get_attr("SrcT"), op.get_attr("DstT")
    if D.string in (src, dst) and src != dst:  # TF's CastOp has no string conversion
        raise errors.UnimplementedError(
            None, None, "Cast %s to %s is not supported" % (src.type_string, dst.type_string)
        )
    f = device.backend.cast(dst.as_numpy_dtype)
    return lambda ctx, ins: (f(ctx, ins[0]),)


register("Cast", _cast, cpu=ALL, gpu=GPU_ARRAY)


def _matmul(op, device):
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    backend = device.backend
    f, shape = backend.matmul(ta, tb), backend.shape

    def compute(ctx, ins):
        a, b = ins
        sa, sb = shape(a), shape(b)
        sa = sa[::-1] if ta else sa
        sb = sb[::-1] if tb else sb
        if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Matrix size-incompatible: In[0]: %s, In[1]: %s" % (shape_text(sa), shape_text(sb)),
            )
        return (f(ctx, a, b),)

    return compute


def _add_n(op, device):
    f = device.backend.add_n()
    return lambda ctx, ins: (f(ctx, list(ins)),)


def _axes(axes, rank: int) -> list:
    """A reduction's axes tensor (a scalar or a vector, negative axes counted from the end)
    as sorted distinct Python ints in ``[0, rank)``."""
    listed = axes.tolist() if hasattr(axes, "tolist") else axes  # an array, a numpy scalar
    if type(listed) is int:
        return [listed % rank]
    if type(listed) is not list or not all(type(a) is int for a in listed):
        listed = np.asarray(axes).reshape(-1).tolist()
    return sorted({a % rank for a in listed})


def _reduction(fn):
    def factory(op, device):
        backend = device.backend
        f = backend.reduce(fn, op.get_attr("keep_dims"), op.get_attr("T").as_numpy_dtype)

        def compute(ctx, ins):
            x, axes = ins
            rank = max(len(backend.shape(x)), 1)
            axes = _axes(backend.to_host(axes), rank)
            if not axes:  # TF's "reduces nothing": the output shares the input's buffer
                return (x,)
            return (f(ctx, x, axes),)

        return compute

    return factory


register(
    "MatMul",
    _matmul,
    cpu=FLOATS + COMPLEX + (D.int32, D.int64),
    gpu=FLOATS + COMPLEX,
    cost="expensive",
    splittable=True,
    allocates=True,
)
# AddN of one input hands that input on (TF's too): it does not allocate
register("AddN", _add_n, cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
# not ``allocates``: over no axes the output is the input itself (the gradient of a broadcast
# add asks for that every step)
register("Sum", _reduction("sum"), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)
register("Mean", _reduction("mean"), cpu=NUMERIC, gpu=GPU_MATH, splittable=True)


@host_kernel
def _prod(op, device):
    """``Prod`` on the host: gradients take it of shapes (TF keeps those in host memory)."""
    keep, np_dtype = op.get_attr("keep_dims"), op.get_attr("T").as_numpy_dtype

    def compute(ctx, ins):
        x, axes = ins
        x = np.asarray(x)
        axis = tuple(_axes(axes, max(x.ndim, 1)))
        # np.prod's own reduction, without its Python wrapper
        return (np.multiply.reduce(x, axis=axis, keepdims=keep, dtype=np_dtype),)

    return compute


register("Prod", _prod, cpu=NUMERIC, gpu=GPU_MATH)


# -- the math of a small MLP (book: "Training") ------------------------------------------------
# Elementwise ones go through the backend's map/zip (a CUDA kernel on a card); comparisons,
# ArgMax, Max and Select compute with numpy on the host (``host_kernel``) on any device.

_UNARY = {"allocates": True, "forwards": (0,)}
for _op, _fn in (("Exp", "exp"), ("Log", "log"), ("Sqrt", "sqrt"), ("Rsqrt", "rsqrt")):
    register(_op, _map(_fn), cpu=FLOATS + COMPLEX, gpu=FLOATS, **_UNARY)
register("Reciprocal", _map("reciprocal"), cpu=FLOATS, gpu=FLOATS, **_UNARY)
_SAME_SHAPE = {"allocates": True, "forwards": (0, 1)}
register("SqrtGrad", _zip("sqrt_grad"), cpu=FLOATS, gpu=FLOATS, **_SAME_SHAPE)
register("RsqrtGrad", _zip("rsqrt_grad"), cpu=FLOATS, gpu=FLOATS, **_SAME_SHAPE)
register("ReciprocalGrad", _zip("reciprocal_grad"), cpu=FLOATS, gpu=FLOATS, **_SAME_SHAPE)
register("Floor", _map("floor"), cpu=FLOATS, gpu=FLOATS, **_UNARY)
register("Abs", _map("abs"), cpu=FLOATS + INTS, gpu=FLOATS + (D.int32, D.int64), **_UNARY)
_REAL = FLOATS + INTS
register("Maximum", _zip("maximum"), cpu=_REAL, gpu=FLOATS + (D.int32, D.int64), **_BINARY)
register("Minimum", _zip("minimum"), cpu=_REAL, gpu=FLOATS + (D.int32, D.int64), **_BINARY)


def _squared_difference(op, device):
    """``(x - y)²`` as two of the backend's binary ops (the square written into the
    difference, a buffer of the op's own)."""
    sub, mul = device.backend.zip("sub"), device.backend.zip("mul")

    def squared_difference(ctx, x, y):
        d = sub(ctx, x, y)
        into = d if type(d) is np.ndarray and d.ndim else None  # (a scalar has no buffer)
        return mul(ctx, d, d, into)

    return _zip_kernel(squared_difference, op.outputs[0][1], None)


register("SquaredDifference", _squared_difference, cpu=FLOATS + INTS, gpu=FLOATS, allocates=True)


def _comparison(ufunc):
    """The host kernel of a broadcasting binary op computed by ``ufunc(x, y)`` (a comparison,
    a logical op, FloorMod), with TF's shape error."""

    @host_kernel
    def factory(op, device):
        def compute(ctx, ins):
            x, y = ins
            error = _shape_error(np.shape, x, y)
            if error is not None:
                raise error
            return (scalarize(ufunc(x, y)),)

        return compute

    return factory


for _op, _ufunc in (("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)):
    register(_op, _comparison(_ufunc), cpu=(D.bool,), gpu=(D.bool,), allocates=True)


def _floor_mod(x, y):
    """``FloorMod``: Python's ``%`` (the sign of y), TF's error for an integer 0 divisor."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.mod(x, y)
    zero = np.asarray(y) == 0
    if out.dtype.kind in "iu" and zero.any() and np.broadcast_to(zero, np.shape(out)).any():
        raise invalid_argument("Integer division by zero")  # (none if nothing is computed)
    return out


register("FloorMod", _comparison(_floor_mod), cpu=FLOATS + INTS, gpu=FLOATS + INTS, allocates=True)


@host_kernel
def _any_or_all(op, device):
    """``Any`` / ``All`` over the given axes (over no element: False / True, numpy's too)."""
    keep, reduce = op.get_attr("keep_dims"), (np.any if op.type == "Any" else np.all)

    def compute(ctx, ins):
        x = np.asarray(ins[0])
        rank = max(x.ndim, 1)
        axis = tuple(_axes(ins[1], rank)) if x.ndim else ()
        return (reduce(x, axis=axis, keepdims=keep),)

    return compute


register("Any", _any_or_all, cpu=(D.bool,), gpu=(D.bool,), allocates=True)
register("All", _any_or_all, cpu=(D.bool,), gpu=(D.bool,), allocates=True)

_GPU_COMPARE = FLOATS + (D.int32, D.int64)
for _op, _ufunc in (
    ("Equal", np.equal),
    ("NotEqual", np.not_equal),
    ("Less", np.less),
    ("LessEqual", np.less_equal),
    ("Greater", np.greater),
    ("GreaterEqual", np.greater_equal),
):
    _eq = _op in ("Equal", "NotEqual")
    register(
        _op,
        _comparison(_ufunc),
        cpu=ALL if _eq else _REAL,
        gpu=_GPU_COMPARE + ((D.bool,) if _eq else ()),
        allocates=True,
    )


@host_kernel
def _arg_reduction(op, device):
    """``ArgMax`` / ``ArgMin``: the index of the largest / smallest value along an axis."""
    out_type = op.get_attr("output_type").as_numpy_dtype
    pick = np.argmax if op.type == "ArgMax" else np.argmin

    def compute(ctx, ins):
        x, axis = ins
        x = np.asarray(x)
        axis = int(axis)
        if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
            raise errors.InvalidArgumentError(
                None,
                None,
                "Expected dimension in the range [%d, %d), but got %d" % (-x.ndim, x.ndim, axis),
            )
        if x.ndim and x.shape[axis] == 0:
            raise errors.InvalidArgumentError(
                None, None, "Reduction axis %d is empty in shape %s" % (axis, shape_text(x.shape))
            )
        return (scalarize(pick(x, axis=axis).astype(out_type)),)

    return compute


@host_kernel
def _max_or_min(op, device):
    """``Max`` / ``Min`` over the given axes; over no element, TF's identity of the reduction
    (the dtype's lowest value for Max, its highest for Min)."""
    keep, is_max = op.get_attr("keep_dims"), op.type == "Max"
    reduce = np.max if is_max else np.min

    def compute(ctx, ins):
        x, axes = ins
        x = np.asarray(x)
        rank = max(x.ndim, 1)
        axis = tuple(_axes(axes, rank)) if x.ndim else ()
        if x.size == 0:
            if x.dtype.kind == "f":
                identity = -np.inf if is_max else np.inf
            else:
                identity = np.iinfo(x.dtype).min if is_max else np.iinfo(x.dtype).max
            dims = enumerate(x.shape)
            shape = (
                [1 if i in axis else d for i, d in dims]
                if keep
                else [d for i, d in dims if i not in axis]
            )
            return (scalarize(np.full(shape, identity, x.dtype)),)
        return (scalarize(reduce(x, axis=axis, keepdims=keep)),)

    return compute


for _t, _f in (("ArgMax", _arg_reduction), ("ArgMin", _arg_reduction)):
    register(_t, _f, cpu=_REAL, gpu=FLOATS + (D.int32, D.int64), allocates=True)
for _t in ("Max", "Min"):
    register(_t, _max_or_min, cpu=_REAL, gpu=FLOATS + (D.int32, D.int64), allocates=True)


@host_kernel
def _select(op, device):
    def compute(ctx, ins):
        c, x, y = (np.asarray(v) for v in ins)
        if x.shape != y.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "'then' and 'else' must have the same size.  but are %s and %s"
                % (shape_text(x.shape), shape_text(y.shape)),
            )
        if c.ndim == 1 and x.ndim > 1:
            if c.shape[0] != x.shape[0]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Number of batches of 'then' must match size of 'cond', but saw: %d vs. %d"
                    % (x.shape[0], c.shape[0]),
                )
            c = c.reshape(c.shape + (1,) * (x.ndim - 1))
        elif c.ndim and c.shape != x.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "'cond' and 'then' must have the same size.  but are %s and %s"
                % (shape_text(c.shape), shape_text(x.shape)),
            )
        return (scalarize(np.where(c, x, y)),)

    return compute


register("Select", _select, cpu=ALL, gpu=GPU_ARRAY, allocates=True)


@host_kernel
def _pow(op, device):
    def compute(ctx, ins):
        x, y = ins
        try:
            shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Incompatible shapes: %s vs. %s"
                % (shape_text(np.shape(x)), shape_text(np.shape(y))),
            ) from None
        if np.issubdtype(np.result_type(y), np.integer) and np.any(np.asarray(y) < 0):
            raise errors.InvalidArgumentError(
                None, None, "Integers to negative integer powers are not allowed"
            )
        return (np.asarray(np.power(x, y)).reshape(shape),)

    return compute


register("Pow", _pow, cpu=FLOATS + (D.int32, D.int64), gpu=FLOATS + (D.int64,))


@host_kernel
def _range(op, device):
    """``Range``: TF's checks, then ``numpy.arange`` (on a GPU too: TF 1.15's GPU kernel keeps
    its inputs and output in host memory)."""
    out = op.get_attr("Tidx").as_numpy_dtype

    def compute(ctx, ins):
        start, limit, delta = (np.asarray(v).item() for v in ins)
        if delta == 0:
            raise errors.InvalidArgumentError(None, None, "Requires delta != 0: %s" % delta)
        if (delta > 0 and start > limit) or (delta < 0 and start < limit):
            what = "start <= limit" if delta > 0 else "start >= limit"
            raise errors.InvalidArgumentError(
                None, None, "Requires %s: %s/%s" % (what, start, limit)
            )
        return (np.arange(start, limit, delta, dtype=out),)

    return compute


_RANGE = (D.int32, D.int64, D.float32, D.float64)
register("Range", _range, cpu=_RANGE, gpu=_RANGE)
