"""Math ops and the Python operators of tensors (``a + b`` builds an ``AddV2`` op named ``add``).

Book sections: every example ("Placing Operations on Devices": ``c = a * b``; "Parallel
Execution": matmuls; "Control Dependencies": ``z = x + y``).  Op types and default names follow
what TF prints (reference/tf1_semantics.md §11.1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import DTypeLike, Tensor, convert_to_tensor, name_scope
from minitf.lib import deprecation
from minitf.ops import array_ops
from minitf.ops.array_ops import TensorLike, _const_array, _static_value, constant
from minitf.ops.dynamic_stitch import dynamic_stitch
from minitf.ops.op_def import apply_op, register_op, shape_error

for _t in (
    "AddV2",
    "Sub",
    "Mul",
    "RealDiv",
    "FloorDiv",
    "FloorMod",
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
    """Builds a broadcasting elementwise op; ``name`` is a scope name (``add/``); its output
    has ``x``'s dtype unless ``out_dtype`` is given (a comparison's bool)."""
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
floormod = _binary_fn("FloorMod", "FloorMod")
floormod.__doc__ = "``FloorMod``: ``x - floor(x / y) * y`` (Python's ``%``), with broadcasting."
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


def _to(dtype: str, default_name: str) -> Callable[..., Tensor]:
    """TF 1.x's deprecated ``tf.to_float`` & co.: ``cast`` with the op named ``ToFloat`` ...,
    and TF's deprecation warning, once."""
    fn_name = "to_" + {"float32": "float", "float64": "double"}.get(dtype, dtype)

    def to(x: TensorLike, name: str = default_name) -> Tensor:
        deprecation.warn(fn_name, "tensorflow.python.ops.math_ops", "Use `tf.cast` instead.")
        return cast(x, dtype, name=name)

    to.__name__ = fn_name
    to.__doc__ = "``cast(x, %s)``, deprecated since TF 1.13 (op ``%s``)." % (dtype, default_name)
    return to


to_float = _to("float32", "ToFloat")
to_double = _to("float64", "ToDouble")
to_int32 = _to("int32", "ToInt32")
to_int64 = _to("int64", "ToInt64")


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


def _check_bool(op_type: str, arg: str, t: Tensor) -> None:
    """TF's graph-time TypeError for an input of a bool-only op (Any, All, LogicalAnd, ...)."""
    if t.dtype.base_dtype != dtypes.bool:
        raise TypeError(
            "Input '%s' of '%s' Op has type %s that does not match expected type of bool."
            % (arg, op_type, t.dtype.base_dtype.name)
        )


def _reduction(op_type, input_tensor, axis, keepdims, name):
    x = convert_to_tensor(input_tensor, name="input_tensor")
    if op_type in ("Any", "All"):
        _check_bool(op_type, "input", x)
    if isinstance(axis, Tensor):  # axes known only at run time (a gradient's, say)
        dt = x.dtype.base_dtype
        shape = tensor_shape.unknown_shape(x.shape.ndims if keepdims else None)
        attrs = {"T": dt, "Tidx": axis.dtype.base_dtype, "keep_dims": bool(keepdims)}
        return apply_op(op_type, [x, axis], [(dt, shape)], name or op_type, attrs).outputs[0]
    rank = x.shape.ndims
    if axis is None:
        if rank is None:  # TF's _ReductionDims: every axis, counted at run time
            return _reduction(op_type, x, range_(0, array_ops.rank(x)), keepdims, name)
        axes = list(range(rank))
        axis_t = constant(axes, dtype=dtypes.int32)  # TF's _ReductionDims: "Const", outside
    else:
        given = _const_array(axis, dtypes.int32, None, False)[0]
        axes = [int(a) for a in given.reshape(-1)]
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
    dt = x.dtype.base_dtype
    attrs = {"T": dt, "Tidx": dtypes.int32, "keep_dims": bool(keepdims)}
    with name_scope(name, op_type) as scope:
        if axis is not None:  # the axes as given, converted in the op's scope
            axis_t = constant(given, dtype=dtypes.int32, name="reduction_indices")
        return apply_op(op_type, [x, axis_t], [(dt, shape)], scope, attrs).outputs[0]


def _reduction_fn(op_type: str, what: str) -> Callable[..., Tensor]:
    """``tf.reduce_<what>``: ``op_type`` over ``axis`` (all axes by default), with TF1's
    ``reduction_indices`` and ``keep_dims`` spellings of ``axis`` and ``keepdims``."""

    def fn(
        input_tensor: TensorLike,
        axis: int | Sequence[int] | None = None,
        keepdims: bool | None = None,
        name: str | None = None,
        reduction_indices: int | Sequence[int] | None = None,
        keep_dims: bool | None = None,
    ) -> Tensor:
        axis = reduction_indices if axis is None else axis
        keep = bool(keepdims if keepdims is not None else keep_dims)
        return _reduction(op_type, input_tensor, axis, keep, name)

    fn.__name__ = "reduce_" + what
    fn.__doc__ = "``%s`` over ``axis`` (all axes by default)." % op_type
    return fn


reduce_sum = _reduction_fn("Sum", "sum")
reduce_mean = _reduction_fn("Mean", "mean")
reduce_prod = _reduction_fn("Prod", "prod")


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
        "mod": ("mod", lambda x, y, s: _binary("FloorMod", x, y, s)),
        "matmul": ("matmul", lambda x, y, s: matmul(x, y, name=s)),
        "pow": ("pow", lambda x, y, s: _binary("Pow", x, y, s)),
        "and": ("and", lambda x, y, s: logical_and(x, y, name=s)),
        "or": ("or", lambda x, y, s: logical_or(x, y, name=s)),
    }
    for key, (op_name, fn) in table.items():
        fwd, rev = binary(op_name, fn)
        setattr(cls, "__%s__" % key, fwd)
        setattr(cls, "__r%s__" % key, rev)
    cls.__neg__ = lambda self: negative(convert_to_tensor(self))


_install_operators(Tensor)


# -- the math of a small MLP (book: "Training"; TF 1.15 math_ops / gen_math_ops) ---------------

for _t in (
    "Exp",
    "Log",
    "Sqrt",
    "Rsqrt",
    "Reciprocal",
    "SqrtGrad",
    "RsqrtGrad",
    "ReciprocalGrad",
    "Abs",
    "Floor",
    "Maximum",
    "Minimum",
    "SquaredDifference",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "ArgMax",
    "ArgMin",
    "Max",
    "Min",
    "Any",
    "All",
    "LogicalAnd",
    "LogicalOr",
    "Select",
):
    register_op(_t)

_FLOAT_TYPES = ("bfloat16", "float16", "float32", "float64", "complex64", "complex128")


def check_allowed_dtype(param: str, t: Tensor, allowed: Sequence[str]) -> None:
    """TF's graph-time TypeError for an input whose dtype the op does not take."""
    if t.dtype.base_dtype.name not in allowed:
        raise TypeError(
            "Value passed to parameter '%s' has DataType %s not in list of allowed values: %s"
            % (param, t.dtype.base_dtype.name, ", ".join(allowed))
        )


def _float_unary(op_type: str, doc: str, allowed=_FLOAT_TYPES) -> Callable[..., Tensor]:
    def fn(x: TensorLike, name: str | None = None) -> Tensor:
        with name_scope(name, op_type, [x]) as scope:
            x = convert_to_tensor(x, name="x")
            check_allowed_dtype("x", x, allowed)
            return _unary(op_type, x, scope)

    fn.__name__ = op_type.lower()
    fn.__doc__ = doc
    return fn


exp = _float_unary("Exp", "``Exp``: e to the power ``x``, elementwise (``tf.exp``).")
log = _float_unary("Log", "``Log``: the natural logarithm, elementwise (``tf.log``).")
sqrt = _float_unary("Sqrt", "``Sqrt``: the square root, elementwise (``tf.sqrt``).")
rsqrt = _float_unary("Rsqrt", "``Rsqrt``: ``1 / sqrt(x)``, elementwise (``tf.math.rsqrt``).")
reciprocal = _float_unary(
    "Reciprocal", "``Reciprocal``: ``1 / x``, elementwise (``tf.reciprocal``)."
)
floor = _float_unary(
    "Floor",
    "``Floor``: the largest integer not above ``x`` (``tf.floor``).",
    _FLOAT_TYPES[:4],
)


def abs(x: TensorLike, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """``Abs``: ``|x|`` elementwise (``tf.abs``; op named ``Abs``)."""
    with name_scope(name, "Abs", [x]) as scope:
        return _unary("Abs", convert_to_tensor(x, name="x"), scope)


maximum = _binary_fn("Maximum", "Maximum")
minimum = _binary_fn("Minimum", "Minimum")
squared_difference = _binary_fn("SquaredDifference", "SquaredDifference")
squared_difference.__doc__ = "``SquaredDifference``: ``(x - y)²``, with broadcasting."
maximum.__doc__ = "``Maximum``: the larger of ``x`` and ``y``, with broadcasting."
minimum.__doc__ = "``Minimum``: the smaller of ``x`` and ``y``, with broadcasting."


def _comparison_fn(op_type: str) -> Callable[..., Tensor]:
    """A broadcasting comparison (``Equal``, ``Less`` ...) whose output is a bool tensor."""

    def fn(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
        with name_scope(name, op_type, [x, y]) as scope:
            return _binary(op_type, x, y, scope, out_dtype=dtypes.bool)

    fn.__name__ = op_type
    fn.__doc__ = "``%s``: elementwise comparison with broadcasting; a bool tensor." % op_type
    return fn


equal = _comparison_fn("Equal")
not_equal = _comparison_fn("NotEqual")
less = _comparison_fn("Less")
less_equal = _comparison_fn("LessEqual")


def _logical_fn(op_type: str) -> Callable[..., Tensor]:
    """``LogicalAnd`` / ``LogicalOr``: elementwise on bool tensors, with broadcasting."""

    def fn(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
        with name_scope(name, op_type, [x, y]) as scope:
            x, y = convert_to_tensor(x, name="x"), convert_to_tensor(y, name="y")
            _check_bool(op_type, "x", x)
            _check_bool(op_type, "y", y)
            return _binary(op_type, x, y, scope)

    fn.__name__ = "logical_" + op_type[len("Logical") :].lower()
    fn.__doc__ = "``%s``: elementwise on bool tensors, with broadcasting." % op_type
    return fn


logical_and = _logical_fn("LogicalAnd")
logical_or = _logical_fn("LogicalOr")
greater = _comparison_fn("Greater")
greater_equal = _comparison_fn("GreaterEqual")


def _arg_reduction(op_type, input, axis, name, dimension, output_type):  # noqa: A002
    if axis is not None and dimension is not None:
        raise ValueError("Cannot specify both 'axis' and 'dimension'")
    axis = dimension if axis is None else axis
    axis = 0 if axis is None else axis
    output_type = dtypes.as_dtype(output_type).base_dtype
    with name_scope(name, op_type, [input]) as scope:
        x = convert_to_tensor(input, name="input")
        axis_t = convert_to_tensor(axis, dtype=dtypes.int32, name="dimension")
        shape = tensor_shape.unknown_shape()
        static_axis = _static_int(axis_t)
        rank = x.shape.ndims
        if rank is not None and static_axis is not None:
            if not -max(rank, 1) <= static_axis < max(rank, 1):
                raise shape_error(
                    op_type,
                    scope,
                    [x, axis_t],
                    "Expected dimension in the range [%d, %d), but got %d"
                    % (-rank, rank, static_axis),
                )
            dims = x.shape.as_list()
            del dims[static_axis % rank]
            shape = tensor_shape.TensorShape(dims)
        elif rank is not None:
            shape = tensor_shape.unknown_shape(rank=max(rank - 1, 0))
        attrs = {"T": x.dtype.base_dtype, "Tidx": dtypes.int32, "output_type": output_type}
        return apply_op(op_type, [x, axis_t], [(output_type, shape)], scope, attrs).outputs[0]


def _arg_reduction_fn(op_type: str, which: str) -> Callable[..., Tensor]:
    """``tf.argmax`` / ``tf.argmin``: ``op_type`` along ``axis`` (0 when neither ``axis`` nor
    its old name ``dimension`` is given); ``output_type`` int64 (default) or int32."""

    def fn(
        input: TensorLike,  # noqa: A002 - TF's name
        axis: int | TensorLike | None = None,
        name: str | None = None,
        dimension: int | TensorLike | None = None,
        output_type: DTypeLike = dtypes.int64,
    ) -> Tensor:
        return _arg_reduction(op_type, input, axis, name, dimension, output_type)

    fn.__name__ = op_type.lower()
    fn.__doc__ = "``%s``: the index of the %s value along ``axis``." % (op_type, which)
    return fn


argmax = _arg_reduction_fn("ArgMax", "largest")
argmin = _arg_reduction_fn("ArgMin", "smallest")


def _static_int(t):
    value = _static_value(t)
    return None if value is None else int(value)


reduce_max = _reduction_fn("Max", "max")
reduce_any = _reduction_fn("Any", "any")
reduce_all = _reduction_fn("All", "all")
reduce_min = _reduction_fn("Min", "min")


def where(
    condition: TensorLike,
    x: TensorLike = None,
    y: TensorLike = None,
    name: str | None = None,
) -> Tensor:
    """TF1's ``tf.where``: ``Select(condition, x, y)`` (elements of ``x`` where ``condition``,
    else of ``y``); with ``condition`` alone, ``Where``: the coordinates of its true elements
    (an int64 matrix with one row per true element)."""
    if x is None and y is None:
        return array_ops.where_indices(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    with name_scope(name, "Select", [condition, x, y]) as scope:
        c = convert_to_tensor(condition, dtype=dtypes.bool, name="condition")
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(
            y, dtype=x.dtype.base_dtype if not isinstance(y, Tensor) else None, name="y"
        )
        _check_same_dtype("Select", x, y)
        shape = _select_shape(scope, c, x, y)
        dt = x.dtype.base_dtype
        return apply_op("Select", [c, x, y], [(dt, shape)], scope, {"T": dt}).outputs[0]


def _select_shape(scope, c, x, y):
    """The static shape of ``Select``: ``x`` and ``y`` alike; the condition of their shape, a
    scalar, or a vector as long as their first dimension."""
    try:
        shape = x.shape.merge_with(y.shape)
    except ValueError:
        raise shape_error(
            "Select", scope, [c, x, y], "Shapes %s and %s are not compatible" % (x.shape, y.shape)
        ) from None
    cs = c.shape
    if cs.ndims is None or shape.ndims is None or cs.ndims == 0:
        return shape
    if cs.ndims == 1 and shape.ndims > 1:
        if not cs[0].is_compatible_with(shape[0]):
            raise shape_error(
                "Select",
                scope,
                [c, x, y],
                "Dimension 0 in both shapes must be equal, but are %s and %s" % (cs[0], shape[0]),
            )
        return shape
    try:
        return shape.merge_with(cs)
    except ValueError:
        raise shape_error(
            "Select", scope, [c, x, y], "Shapes %s and %s are not compatible" % (cs, shape)
        ) from None


def _install_comparisons(cls):
    """Gives ``cls`` (Tensor, Variable) TF's ``<``, ``<=``, ``>``, ``>=`` (``Less`` ...)."""
    for key, fn in (("lt", less), ("le", less_equal), ("gt", greater), ("ge", greater_equal)):
        setattr(cls, "__%s__" % key, lambda self, other, fn=fn: fn(self, other))


_install_comparisons(Tensor)


register_op("Pow")


def pow(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """``Pow``: ``x ** y`` elementwise, with numpy-style broadcasting (what
    ``tf.train.exponential_decay`` raises its decay rate with)."""
    with name_scope(name, "Pow", [x]) as scope:
        return _binary("Pow", x, y, scope)


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


def reduced_shape(input_shape: TensorLike, axes: TensorLike) -> Tensor:
    """The shape a reduction of a tensor of shape ``input_shape`` over ``axes`` has with the
    reduced axes kept as 1s, computed when the step runs (TF's: ``Size``, ``add``, ``mod``,
    ``range``, ``Fill`` and a ``DynamicStitch`` of the shape with those 1s)."""
    input_shape = cast(input_shape, dtypes.int32)
    axes = cast(axes, dtypes.int32)
    input_rank = array_ops.size(input_shape)
    axes = (axes + input_rank) % input_rank
    axes_shape = array_ops.shape(axes)
    return dynamic_stitch([range_(input_rank), axes], [input_shape, array_ops.fill(axes_shape, 1)])


def grad_op(op_type: str, a: TensorLike, b: TensorLike, name=None, names=("y", "dy"), **attrs):
    """A fused gradient op of two same-shape inputs (``SqrtGrad(y, dy)``,
    ``ReluGrad(gradients, features)`` ...; ``names``: what TF calls them), TF's shape error if
    their shapes differ."""
    a = convert_to_tensor(a, name=names[0])
    b = convert_to_tensor(b, dtype=a.dtype.base_dtype, name=names[1])
    with name_scope(name, op_type, [a, b]) as scope:
        try:
            shape = a.shape.merge_with(b.shape)
        except ValueError:
            reason = "Shapes %s and %s are not compatible" % (a.shape, b.shape)
            raise shape_error(op_type, scope, [a, b], reason) from None
        dt = a.dtype.base_dtype
        return apply_op(op_type, [a, b], [(dt, shape)], scope, dict(attrs, T=dt)).outputs[0]
