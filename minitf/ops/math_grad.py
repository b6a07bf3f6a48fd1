"""Gradient functions of the math ops (TF's ``python/ops/math_grad.py``).

Book section: "Training".  Each function gets the forward ``op`` and the gradient of its output
and builds the gradient of each input, with the ops and names TF builds (``MatMul_grad/MatMul``,
``add_grad/Reshape_1`` ...).  A broadcasting binary op sums its gradient over the axes an input
was stretched along, and reshapes it back to that input's shape.
"""

from __future__ import annotations

import numpy as np

from minitf.framework import dtypes
from minitf.ops import array_ops, math_ops
from minitf.ops.op_def import NotDifferentiable, RegisterGradient


def _same_static_shapes(x, y, grad):
    """True when x, y and grad have one fully known shape (no reduction can be needed)."""
    return (
        x.shape.is_fully_defined()
        and y.shape.is_fully_defined()
        and x.shape == y.shape
        and grad.shape == x.shape
    )


def _broadcast_axes(op):
    """``(Shape(x), Shape(y), rx, ry)`` of a binary op: the axes each input was broadcast along
    (``BroadcastGradientArgs``), to sum its gradient over."""
    x, y = op.inputs
    sx, sy = array_ops.shape(x), array_ops.shape(y)
    rx, ry = array_ops.broadcast_gradient_args(sx, sy)
    return sx, sy, rx, ry


def _reduced_to_inputs(op, gx, gy, negate_y=False):
    """``gx`` and ``gy`` (gradients of the broadcast result) summed over the axes each input
    was broadcast along and reshaped to that input: ``Shape``, ``Shape_1``,
    ``BroadcastGradientArgs``, ``Sum`` + ``Reshape``, ``Sum_1`` + ``Reshape_1`` (with
    ``negate_y``, Sub's: a ``Neg`` of the sum, before its reshape)."""
    sx, sy, rx, ry = _broadcast_axes(op)
    out_x = array_ops.reshape(math_ops.reduce_sum(gx, rx), sx)
    if gy is None:
        return out_x, None
    sum_y = math_ops.reduce_sum(gy, ry)
    return out_x, array_ops.reshape(math_ops.negative(sum_y) if negate_y else sum_y, sy)


@RegisterGradient("AddV2")
def _add_grad(op, grad):
    x, y = op.inputs
    if _same_static_shapes(x, y, grad):
        return grad, grad
    return _reduced_to_inputs(op, grad, grad)


@RegisterGradient("Sub")
def _sub_grad(op, grad):
    x, y = op.inputs
    if _same_static_shapes(x, y, grad):
        return grad, math_ops.negative(grad)
    return _reduced_to_inputs(op, grad, grad, negate_y=True)


@RegisterGradient("Mul")
def _mul_grad(op, grad):
    """d(x·y) = g·y and x·g (``Mul``, ``Mul_1``), reduced to each input's shape.  TF's shortcut
    (one known shape for x, y and g, and a float32 or int32 g) skips the reduction and builds
    g·x for the second (its operands in that order); otherwise the reduction is built even
    where nothing is reduced."""
    x, y = op.inputs
    if _same_static_shapes(x, y, grad) and grad.dtype.base_dtype in (dtypes.float32, dtypes.int32):
        return math_ops.multiply(grad, y), math_ops.multiply(grad, x)
    return _reduced_to_inputs(op, math_ops.multiply(grad, y), math_ops.multiply(x, grad))


def _realdiv(x, y):
    with math_ops.name_scope(None, "RealDiv", [x, y]) as scope:
        return math_ops._binary("RealDiv", x, y, scope)


@RegisterGradient("RealDiv")
def _realdiv_grad(op, grad):
    """d(x/y) = g/y and -g·x/y²."""
    x, y = op.inputs
    gx = _realdiv(grad, y)
    gy = grad * _realdiv(_realdiv(math_ops.negative(x), y), y)  # TF's operator: "mul"
    return _reduced_to_inputs(op, gx, gy)


NotDifferentiable("FloorDiv")
# a range carries no gradient (input pipelines; comparisons: below)
NotDifferentiable("Range")


@RegisterGradient("Neg")
def _neg_grad(op, grad):
    return math_ops.negative(grad)


@RegisterGradient("Square")
def _square_grad(op, grad):
    """d(x²) = g·(2x), once g is there (``Const``, ``Mul``, ``Mul_1``)."""
    x = op.inputs[0]
    with op.graph.control_dependencies([grad]):
        two = array_ops.constant(2.0, dtype=x.dtype.base_dtype)
        return math_ops.multiply(grad, math_ops.multiply(x, two))


@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    """For ``a @ b``: ``g @ bᵀ`` (``MatMul``) and ``aᵀ @ g`` (``MatMul_1``); the other
    transpose combinations likewise."""
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    a, b = op.inputs
    mm = math_ops.matmul
    if not ta and not tb:
        return mm(grad, b, transpose_b=True), mm(a, grad, transpose_a=True)
    if not ta and tb:
        return mm(grad, b), mm(grad, a, transpose_a=True)
    if ta and not tb:
        return mm(b, grad, transpose_b=True), mm(a, grad)
    return (
        mm(b, grad, transpose_a=True, transpose_b=True),
        mm(grad, a, transpose_a=True, transpose_b=True),
    )


@RegisterGradient("AddN")
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    """The gradient cast back, between floating types only (else none flows)."""
    src, dst = op.inputs[0].dtype.base_dtype, grad.dtype.base_dtype
    if (src.is_floating or src.is_complex) and (dst.is_floating or dst.is_complex):
        return math_ops.cast(grad, src)
    return None


def _safe_shape_div(x, y):
    """``x // max(y, 1)``: a shape divided by another that may hold 0s (TF's)."""
    return x // math_ops.maximum(y, 1)


def _reduces_all(op):
    """The rank of the reduced input when the reduction is over every axis of it, given as a
    constant (TF's shortcut); else None."""
    x, axes_t = op.inputs
    rank, axes = x.shape.ndims, array_ops._static_value(axes_t)
    if rank is None or axes is None:
        return None
    if sorted(int(a) % max(rank, 1) for a in np.reshape(axes, -1)) != list(range(rank)):
        return None
    return rank


@RegisterGradient("Sum")
def _sum_grad(op, grad):
    """The gradient reshaped to the input's rank (reduced axes as 1s) and tiled back over
    them: for a sum of everything ``Reshape`` to 1s and ``Tile`` by the input's shape; else
    the kept-dims shape computed at run time (``reduced_shape``), as TF 1.15 does."""
    x = op.inputs[0]
    rank = _reduces_all(op)
    if rank is not None:  # everything summed: a scalar spread over x
        grad = array_ops.reshape(grad, [1] * rank)
        if x.shape.is_fully_defined():
            multiples = array_ops.constant(x.shape.as_list(), dtype=dtypes.int32)
        else:
            multiples = array_ops.shape(x)
        return array_ops.tile(grad, multiples), None
    input_shape = array_ops.shape(x)
    with op.graph.colocate_with(input_shape.op):
        kept = math_ops.reduced_shape(input_shape, op.inputs[1])
        tile_scaling = _safe_shape_div(input_shape, kept)
    grad = array_ops.reshape(grad, kept)
    return array_ops.tile(grad, tile_scaling), None


@RegisterGradient("Mean")
def _mean_grad(op, grad):
    """The Sum gradient divided by how many inputs each output averaged."""
    sum_grad = _sum_grad(op, grad)[0]
    in_shape, out_shape = op.inputs[0].shape, op.outputs[0].shape
    if in_shape.is_fully_defined() and out_shape.is_fully_defined():
        factor = in_shape.num_elements() // max(out_shape.num_elements(), 1)
        factor = array_ops.constant(factor, dtype=sum_grad.dtype.base_dtype)
    else:
        in_size = math_ops.reduce_prod(array_ops.shape(op.inputs[0]))
        out_size = math_ops.reduce_prod(array_ops.shape(op.outputs[0]))
        factor = _safe_shape_div(in_size, out_size)
    return math_ops.truediv(sum_grad, math_ops.cast(factor, sum_grad.dtype)), None


# -- the math of a small MLP (the nn engineer's ops) --------------------------------------------

for _t in (
    "Any",
    "All",
    "LogicalAnd",
    "LogicalOr",
    "ArgMax",
    "ArgMin",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "Where",
):
    NotDifferentiable(_t)


@RegisterGradient("Floor")
def _floor_grad(op, grad):
    """Floor is flat almost everywhere: TF hands back no gradient."""
    return None


@RegisterGradient("Exp")
def _exp_grad(op, grad):
    """d(eˣ) = g·eˣ, the op's own output, once g is there (``mul``)."""
    y = op.outputs[0]
    with op.graph.control_dependencies([grad]):
        return grad * y


@RegisterGradient("Log")
def _log_grad(op, grad):
    """d(log x) = g · (1/x), once g is there (``Reciprocal``, ``mul``)."""
    x = op.inputs[0]
    with op.graph.control_dependencies([grad]):
        return grad * math_ops.reciprocal(x)


@RegisterGradient("Reciprocal")
def _reciprocal_grad(op, grad):
    """d(1/x) = -g·y² with y the op's output: one ``ReciprocalGrad`` op."""
    return math_ops.grad_op("ReciprocalGrad", op.outputs[0], grad)


@RegisterGradient("Sqrt")
def _sqrt_grad(op, grad):
    """d(√x) = 0.5·g/y with y the op's output: one ``SqrtGrad`` op."""
    return math_ops.grad_op("SqrtGrad", op.outputs[0], grad)


@RegisterGradient("Rsqrt")
def _rsqrt_grad(op, grad):
    """d(x^-½) = -0.5·g·y³ with y the op's output: one ``RsqrtGrad`` op."""
    return math_ops.grad_op("RsqrtGrad", op.outputs[0], grad)


@RegisterGradient("Abs")
def _abs_grad(op, grad):
    """d|x| = g·sign(x) (0 at 0)."""
    x = op.inputs[0]
    dt = x.dtype.base_dtype
    zero = array_ops.constant(0, dtype=dt)
    sign = math_ops.subtract(
        math_ops.cast(math_ops.greater(x, zero), dt), math_ops.cast(math_ops.less(x, zero), dt)
    )
    return math_ops.multiply(grad, sign)


def _maximum_minimum_grad(op, grad, selector):
    """The gradient goes to x where ``selector(x, y)`` (x >= y for Maximum, x <= y for
    Minimum), else to y, each reduced over the axes it was broadcast along."""
    x, y = op.inputs
    zeros = array_ops.zeros_like(grad)
    xmask = selector(x, y)
    xgrad = math_ops.where(xmask, grad, zeros)
    ygrad = math_ops.where(xmask, zeros, grad)
    if _same_static_shapes(x, y, grad):
        return xgrad, ygrad
    return _reduced_to_inputs(op, xgrad, ygrad)


@RegisterGradient("SquaredDifference")
def _squared_difference_grad(op, grad):
    """d(x-y)² = 2g(x-y) for x, its negation for y, each summed to its input's shape (TF
    1.15: ``scalar`` and ``Mul``, then ``sub``, ``mul``; y's ``Neg`` after its reshape)."""
    x, y = op.inputs
    sx, sy, rx, ry = _broadcast_axes(op)
    with op.graph.control_dependencies([grad]):
        two = array_ops.constant(2.0, dtype=grad.dtype.base_dtype, name="scalar")
        x_grad = math_ops.multiply(two, grad) * (x - y)
    gx = array_ops.reshape(math_ops.reduce_sum(x_grad, rx), sx)
    gy = array_ops.reshape(math_ops.reduce_sum(x_grad, ry), sy)
    return gx, math_ops.negative(gy)


@RegisterGradient("FloorMod")
def _floor_mod_grad(op, grad):
    """d(x mod y) = g for x and -g·floor(x/y) for y, each summed to its input's shape."""
    x, y = op.inputs
    sx, sy, rx, ry = _broadcast_axes(op)
    floor_xy = math_ops.floordiv(x, y)
    gx = array_ops.reshape(math_ops.reduce_sum(grad, rx), sx)
    gy = array_ops.reshape(math_ops.reduce_sum(grad * math_ops.negative(floor_xy), ry), sy)
    return gx, gy


@RegisterGradient("Pow")
def _pow_grad(op, grad):
    """d(x^y) = g·y·x^(y-1) for x, g·z·log(x) for y (0 where x <= 0, which has no real log),
    each summed to its input's shape (TF 1.15's ops and order)."""
    x, y = op.inputs
    z = op.outputs[0]
    sx, sy, rx, ry = _broadcast_axes(op)
    gx = array_ops.reshape(math_ops.reduce_sum(grad * y * math_ops.pow(x, y - 1), rx), sx)
    mask = x > 0
    safe_x = math_ops.where(mask, x, array_ops.ones_like(x))
    log_x = math_ops.where(mask, math_ops.log(safe_x), array_ops.zeros_like(x))
    gy = array_ops.reshape(math_ops.reduce_sum(grad * z * log_x, ry), sy)
    return gx, gy


@RegisterGradient("Maximum")
def _maximum_grad(op, grad):
    return _maximum_minimum_grad(op, grad, math_ops.greater_equal)


@RegisterGradient("Minimum")
def _minimum_grad(op, grad):
    return _maximum_minimum_grad(op, grad, math_ops.less_equal)


@RegisterGradient("Max")
@RegisterGradient("Min")
def _min_or_max_grad(op, grad):
    """The gradient shared equally by the elements equal to the maximum (minimum) they reduced
    to, in the kept-dims shape computed at run time (``reduced_shape``)."""
    x = op.inputs[0]
    kept = math_ops.reduced_shape(array_ops.shape(x), op.inputs[1])
    y = array_ops.reshape(op.outputs[0], kept)
    grad = array_ops.reshape(grad, kept)
    indicators = math_ops.cast(math_ops.equal(y, x), grad.dtype.base_dtype)
    selected = array_ops.reshape(math_ops.reduce_sum(indicators, op.inputs[1]), kept)
    return math_ops.divide(indicators, selected) * grad, None  # "truediv", then "mul"


@RegisterGradient("Select")
def _select_grad(op, grad):
    """The gradient to x where the condition holds, to y elsewhere; none to the condition."""
    c, x = op.inputs[0], op.inputs[1]
    zeros = array_ops.zeros_like(x)
    return None, math_ops.where(c, grad, zeros), math_ops.where(c, zeros, grad)
