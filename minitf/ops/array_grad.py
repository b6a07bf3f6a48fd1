"""Gradient functions of the array ops (TF's ``python/ops/array_grad.py``).

Book section: "Training".  Ops that only move or reshape values hand the gradient back moved
or reshaped; ops that read only a shape (``Shape``, ``ZerosLike``) pass no gradient on;
``StopGradient`` stops it; ``PreventGradient`` refuses it with its message.
"""

from __future__ import annotations

from minitf.lib.strided_slice import masks_of
from minitf.ops import array_ops, math_ops
from minitf.ops.op_def import NotDifferentiable, RegisterGradient
from minitf.ops.slicing import strided_slice_grad
from minitf.ops.transpose import invert_permutation, transpose

for _t in (
    "Shape",
    "Size",
    "Rank",
    "ZerosLike",
    "OnesLike",
    "BroadcastGradientArgs",
    "StopGradient",
):
    NotDifferentiable(_t)
NotDifferentiable("Const")
NotDifferentiable("LogicalNot")
NotDifferentiable("Where")
NotDifferentiable("Placeholder")


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return grad


RegisterGradient("PlaceholderWithDefault")(_identity_grad)  # its default passes through


@RegisterGradient("Reshape")
def _reshape_grad(op, grad):
    return array_ops.reshape(grad, array_ops.shape(op.inputs[0])), None


@RegisterGradient("ExpandDims")
def _expand_dims_grad(op, grad):
    return array_ops.reshape(grad, array_ops.shape(op.inputs[0])), None


@RegisterGradient("Squeeze")
def _squeeze_grad(op, grad):
    """The dropped size-1 axes put back: the gradient reshaped to the input."""
    return array_ops.reshape(grad, array_ops.shape(op.inputs[0]))


@RegisterGradient("Tile")
def _tile_grad(op, grad):
    """Each tile's gradient summed back onto the input: the gradient reshaped to
    ``[multiple_0, dim_0, multiple_1, dim_1, ...]`` and summed over the multiples."""
    x = op.inputs[0]
    rank = x.shape.ndims
    if rank is None:
        raise NotImplementedError("minitf differentiates Tile only for inputs of known rank")
    shape = array_ops.shape(x)
    split = array_ops.reshape(array_ops.stack([op.inputs[1], shape], axis=1), [-1])
    summed = math_ops.reduce_sum(array_ops.reshape(grad, split), axis=list(range(0, 2 * rank, 2)))
    return summed, None


@RegisterGradient("Fill")
def _fill_grad(op, grad):
    """The fill value's gradient: the sum of the whole gradient."""
    return None, math_ops.reduce_sum(grad)


@RegisterGradient("PreventGradient")
def _prevent_gradient_grad(op, grad):
    raise LookupError("Gradient explicitly disabled. Reason: %s" % op.get_attr("message"))


@RegisterGradient("ConcatV2")
def _concat_grad(op, grad):
    """Each input's rows of the gradient along the concatenation axis.  TF slices them out
    with ``ConcatOffset`` and ``Slice``; minitf gathers the same rows (``GatherV2``), which
    needs the inputs' sizes along the axis at graph time (partitioned variables have them)."""
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    axis = array_ops._static_value(axis_t)
    sizes = (
        [v.shape.as_list()[int(axis)] if v.shape.ndims is not None else None for v in values]
        if axis is not None
        else [None]
    )
    if None in sizes:
        raise NotImplementedError(
            "minitf differentiates ConcatV2 only along a constant axis of known sizes"
        )
    axis = int(axis) % values[0].shape.ndims
    grads, start = [], 0
    for size in sizes:
        grads.append(array_ops.gather(grad, list(range(start, start + size)), axis=axis))
        start += size
    return grads + [None]


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op, grad):
    """The gradient scattered back into zeros of the input's shape (``StridedSliceGrad``,
    the input's shape a Const when known); none for begin, end and strides."""
    begin, end, strides = op.inputs[1:]
    shape = array_ops.shape(op.inputs[0], out_type=begin.dtype.base_dtype)
    return strided_slice_grad(shape, begin, end, strides, grad, masks_of(op)), None, None, None


NotDifferentiable("StridedSliceGrad")


@RegisterGradient("Transpose")
def _transpose_grad(op, grad):
    """The gradient transposed back (``InvertPermutation`` of the op's perm)."""
    return transpose(grad, invert_permutation(op.inputs[1])), None


NotDifferentiable("InvertPermutation")


@RegisterGradient("DynamicStitch")
def _dynamic_stitch_grad(op, grad):
    """Each data tensor gets the rows of the gradient its indices picked (``GatherV2``); the
    indices get none."""
    n = len(op.inputs) // 2
    return [None] * n + [array_ops.gather(grad, op.inputs[i]) for i in range(n)]
