"""Math ops and the Python operators of tensors (``a + b`` builds an ``AddV2`` op named ``add``).

Book sections: every example ("Placing Operations on Devices": ``c = a * b``; "Parallel
Execution": matmuls; "Control Dependencies": ``z = x + y``).  Op types and default names follow
what TF prints (reference/tf1_semantics.md §11.1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import DTypeLike, Tensor, convert_to_tensor, name_scope
from minitf.ops.array_ops import TensorLike, constant
from minitf.ops.op_def import apply_op, register_op, shape_error

for _t in (
    "AddV2",
    "Sub",
    "Mul",
    "RealDiv",
    "FloorDiv",
    "Neg",
    "Square",
    "MatMul",
    "AddN",
    "Sum",
    "Mean",
    "Prod",
    "Cast",
):
    register_op(_t, type_attr="SrcT" if _t == "Cast" else "T")
register_op("Range", type_attr="Tidx")
register_op("Greater")


def _check_same_dtype(op_type, x, y):
    if x.dtype.base_dtype != y.dtype.base_dtype:
        raise TypeError(
            "Input 'y' of '%s' Op has type %s that does not match type %s of "
            "argument 'x'." % (op_type, y.dtype.base_dtype.name, x.dtype.base_dtype.name)
        )


def _binary(op_type, x, y, name, out_dtype=None):
    """Builds a broadcasting elementwise op; ``name`` is a scope name (``add/``); the output
    has the inputs' dtype unless ``out_dtype`` (a comparison's bool)."""
    x = convert_to_tensor(x, name="x")
    y = convert_to_tensor(
        y, dtype=x.dtype.base_dtype if not isinstance(y, Tensor) else None, name="y"
    )
    _check_same_dtype(op_type, x, y)
    try:
        shape = tensor_shape.broadcast_static_shape(x.shape, y.shape)
    except ValueError:
        xd, yd = _first_mismatch(x.shape, y.shape)
        raise shape_error(
            op_type, name, [x, y], "Dimensions must be equal, but are %d and %d" % (xd, yd)
        ) from None
    dt = x.dtype.base_dtype
    return apply_op(op_type, [x, y], [(out_dtype or dt, shape)], name, {"T": dt}).outputs[0]


def _first_mismatch(a, b):
    for da, db in zip(reversed(a.as_list()), reversed(b.as_list())):
        if da is not None and db is not None and da != db and da != 1 and db != 1:
            return da, db
    return 0, 0


def _binary_fn(op_type: str, default_name: str) -> Callable[..., Tensor]:
    def fn(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
        with name_scope(name, default_name, [x, y]) as scope:
            return _binary(op_type, x, y, scope)

    fn.__name__ = default_name
    fn.__doc__ = "Elementwise ``%s`` with numpy-style broadcasting (op named ``%s``)." % (
        op_type,
        default_name,
    )
    return fn


add = _binary_fn("AddV2", "Add")
subtract = _binary_fn("Sub", "Sub")
multiply = _binary_fn("Mul", "Mul")
floordiv = _binary_fn("FloorDiv", "floordiv")
sub, mul = subtract, multiply


def cast(x: TensorLike, dtype: DTypeLike, name: str | None = None) -> Tensor:
    """``Cast``: converts ``x`` to ``dtype`` (returns ``x`` itself when nothing changes)."""
    dtype = dtypes.as_dtype(dtype).base_dtype
    x = convert_to_tensor(x, name="x")
    if x.dtype.base_dtype == dtype:
        return x
    with name_scope(name, "Cast", [x]) as scope:
        return apply_op(
            "Cast", [x], [(dtype, x.shape)], scope, {"SrcT": x.dtype.base_dtype, "DstT": dtype}
        ).outputs[0]


def truediv(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """``x / y`` as TF does it: ints are cast to floats first, then ``RealDiv``."""
    with name_scope(name, "truediv", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(
            y, dtype=x.dtype.base_dtype if not isinstance(y, Tensor) else None, name="y"
        )
        _check_same_dtype("RealDiv", x, y)
        if x.dtype.is_integer:
            target = dtypes.float64 if x.dtype.size >= 4 else dtypes.float32
            x, y = cast(x, target), cast(y, target)
        return _binary("RealDiv", x, y, scope)


def divide(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """``tf.divide``: the same as ``x / y``."""
    return truediv(x, y, name=name)


def _unary(op_type, x, name):
    x = convert_to_tensor(x, name="x")
    dt = x.dtype.base_dtype
    return apply_op(op_type, [x], [(dt, x.shape)], name or op_type, {"T": dt}).outputs[0]


def negative(x: TensorLike, name: str | None = None) -> Tensor:
    """``Neg``: ``-x``."""
    return _unary("Neg", x, name)


neg = negative


def square(x: TensorLike, name: str | None = None) -> Tensor:
    """``Square``: ``x * x`` elementwise."""
    return _unary("Square", x, name)


def matmul(
    a: TensorLike,
    b: TensorLike,
    transpose_a: bool = False,
    transpose_b: bool = False,
    name: str | None = None,
) -> Tensor:
    """``MatMul`` of two rank-2 tensors (the op whose kernel the intra-op pool splits)."""
    with name_scope(name, "MatMul", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(
            b, dtype=a.dtype.base_dtype if not isinstance(b, Tensor) else None, name="b"
        )
        _check_same_dtype("MatMul", a, b)
        for t in (a, b):
            if t.shape.ndims is not None and t.shape.ndims != 2:
                raise shape_error(
                    "MatMul", scope, [a, b], "Shape must be rank 2 but is rank %d" % t.shape.ndims
                )
        m = k1 = k2 = n = None
        if a.shape.ndims is not None:
            m, k1 = a.shape.as_list()[::-1] if transpose_a else a.shape.as_list()
        if b.shape.ndims is not None:
            k2, n = b.shape.as_list()[::-1] if transpose_b else b.shape.as_list()
        if k1 is not None and k2 is not None and k1 != k2:
            raise shape_error(
                "MatMul", scope, [a, b], "Dimensions must be equal, but are %d and %d" % (k1, k2)
            )
        dt = a.dtype.base_dtype
        return apply_op(
            "MatMul",
            [a, b],
            [(dt, tensor_shape.TensorShape([m, n]))],
            scope,
            {"T": dt, "transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)},
        ).outputs[0]


def add_n(inputs: Sequence[TensorLike], name: str | None = None) -> Tensor:
    """``AddN``: the sum of a list of same-shaped tensors."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError(
            "inputs must be a list of at least one Tensor/IndexedSlices with the "
            "same dtype and shape"
        )
    inputs = [convert_to_tensor(t) for t in inputs]
    dt = inputs[0].dtype.base_dtype
    shape = tensor_shape.unknown_shape()
    for t in inputs:
        if t.dtype.base_dtype != dt:
            raise ValueError(
                "inputs must be a list of at least one Tensor/IndexedSlices with "
                "the same dtype and shape"
            )
    for t in inputs:
        if not shape.is_compatible_with(t.shape):
            raise ValueError(
                "inputs must be a list of at least one Tensor/IndexedSlices with "
                "the same dtype and shape"
            )
        shape = shape.merge_with(t.shape)
    if len(inputs) == 1:
        from minitf.ops.array_ops import identity

        return identity(inputs[0], name=name) if name else inputs[0]
    return apply_op(
        "AddN", inputs, [(dt, shape)], name or "AddN", {"T": dt, "N": len(inputs)}
    ).outputs[0]


def _reduction(op_type, input_tensor, axis, keepdims, name):
    x = convert_to_tensor(input_tensor, name="input_tensor")
    if isinstance(axis, Tensor):  # axes known only at run time (a gradient's, say)
        dt = x.dtype.base_dtype
        shape = tensor_shape.unknown_shape(x.shape.ndims if keepdims else None)
        attrs = {"T": dt, "Tidx": axis.dtype.base_dtype, "keep_dims": bool(keepdims)}
        return apply_op(op_type, [x, axis], [(dt, shape)], name or op_type, attrs).outputs[0]
    rank = x.shape.ndims
    if axis is None:
        if rank is None:
            raise ValueError("reduce with axis=None needs a tensor of known rank in minitf")
        axes = list(range(rank))
    else:
        axes = [int(a) for a in ([axis] if isinstance(axis, int) else axis)]
    if rank is not None:
        for a in axes:
            if not -rank <= a < max(rank, 1):
                raise ValueError(
                    "Invalid reduction dimension %d for input with %d dimensions." % (a, rank)
                )
        axes_n = sorted({a % rank for a in axes}) if rank else []
        dims = x.shape.as_list()
        out = (
            [1 if i in axes_n else d for i, d in enumerate(dims)]
            if keepdims
            else [d for i, d in enumerate(dims) if i not in axes_n]
        )
        shape = tensor_shape.TensorShape(out)
    else:
        shape = tensor_shape.unknown_shape()
    axis_t = constant(axes, dtype=dtypes.int32)
    dt = x.dtype.base_dtype
    attrs = {"T": dt, "Tidx": dtypes.int32, "keep_dims": bool(keepdims)}
    return apply_op(op_type, [x, axis_t], [(dt, shape)], name or op_type, attrs).outputs[0]


def reduce_sum(
    input_tensor: TensorLike,
    axis: int | Sequence[int] | None = None,
    keepdims: bool | None = None,
    name: str | None = None,
    reduction_indices: int | Sequence[int] | None = None,
    keep_dims: bool | None = None,
) -> Tensor:
    """``Sum`` over ``axis`` (all axes by default)."""
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return _reduction("Sum", input_tensor, axis, keep, name)


def reduce_mean(
    input_tensor: TensorLike,
    axis: int | Sequence[int] | None = None,
    keepdims: bool | None = None,
    name: str | None = None,
    reduction_indices: int | Sequence[int] | None = None,
    keep_dims: bool | None = None,
) -> Tensor:
    """``Mean`` over ``axis`` (all axes by default)."""
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return _reduction("Mean", input_tensor, axis, keep, name)


def reduce_prod(
    input_tensor: TensorLike,
    axis: int | Sequence[int] | None = None,
    keepdims: bool | None = None,
    name: str | None = None,
    reduction_indices: int | Sequence[int] | None = None,
    keep_dims: bool | None = None,
) -> Tensor:
    """``Prod`` over ``axis`` (all axes by default)."""
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return _reduction("Prod", input_tensor, axis, keep, name)


# -- Python operators on tensors ---------------------------------------------------------------


def _install_operators(cls):
    """Gives ``cls`` (Tensor, Variable) the arithmetic operators with TF's op names."""

    def binary(op_name, fn):
        def forward(self, other):
            with name_scope(None, op_name, [self, other]) as scope:
                x = convert_to_tensor(self)
                return fn(x, other, scope)

        def reverse(self, other):
            with name_scope(None, op_name, [self, other]) as scope:
                y = convert_to_tensor(self)
                x = convert_to_tensor(other, dtype=y.dtype.base_dtype, name="x")
                return fn(x, y, scope)

        return forward, reverse

    table = {
        "add": ("add", lambda x, y, s: _binary("AddV2", x, y, s)),
        "sub": ("sub", lambda x, y, s: _binary("Sub", x, y, s)),
        "mul": ("mul", lambda x, y, s: _binary("Mul", x, y, s)),
        "truediv": ("truediv", lambda x, y, s: truediv(x, y, name=s)),
        "floordiv": ("floordiv", lambda x, y, s: _binary("FloorDiv", x, y, s)),
        "matmul": ("matmul", lambda x, y, s: matmul(x, y, name=s)),
    }
    for key, (op_name, fn) in table.items():
        fwd, rev = binary(op_name, fn)
        setattr(cls, "__%s__" % key, fwd)
        setattr(cls, "__r%s__" % key, rev)
    cls.__neg__ = lambda self: negative(convert_to_tensor(self))


_install_operators(Tensor)


def range_(
    start: TensorLike,
    limit: TensorLike = None,
    delta: TensorLike = 1,
    dtype: DTypeLike = None,
    name: str | None = "range",
) -> Tensor:
    """``tf.range`` (``Range``): ``start, start + delta, ...`` below ``limit`` (one argument: from
    0); a
    range input producer's indices (book: "Reading the Training Data Directly from the
    Graph")."""
    if limit is None:
        start, limit = 0, start
    with name_scope(name, "Range", [start, limit, delta]) as scope:
        dtype = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        ts = [
            convert_to_tensor(v, dtype=dtype, name=n)
            for v, n in ((start, "start"), (limit, "limit"), (delta, "delta"))
        ]
        out = ts[0].dtype.base_dtype
        for t in ts[1:]:
            if t.dtype.base_dtype != out:
                if out.is_integer and t.dtype.is_floating:
                    out = t.dtype.base_dtype
        ts = [t if t.dtype.base_dtype == out else cast(t, out) for t in ts]
        values = [_constant_value(t) for t in ts]
        size = None
        if None not in values:
            size = max(0, -(-(values[1] - values[0]) // values[2]))
            size = int(size)
        attrs = {"Tidx": out}
        op = apply_op("Range", ts, [(out, tensor_shape.TensorShape([size]))], scope, attrs)
    return op.outputs[0]


def _constant_value(t):
    return t.op.get_attr("value").item() if t.op.type == "Const" else None


def greater(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """``Greater``: elementwise ``x > y`` with broadcasting, a bool tensor (a string input
    producer's check that it has filenames)."""
    with name_scope(name, "Greater", [x, y]) as scope:
        return _binary("Greater", x, y, scope, out_dtype=dtypes.bool)
