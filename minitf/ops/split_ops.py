"""``tf.split`` and ``tf.unstack``: one tensor into several (TF's ``Split``, ``SplitV``,
``Unpack``), and their gradients, which join the pieces back (``concat``, ``stack``).

Book section: "Model parallelism" -- a layer cut into parts, one per device, is a split of
its inputs or weights; and everyday TF code.
"""

from __future__ import annotations

import numbers

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import array_ops
from minitf.ops.array_ops import TensorLike, _static_value
from minitf.ops.op_def import RegisterGradient, apply_op, register_op, shape_error

register_op("Split")
register_op("SplitV")
register_op("Unpack")


def split(value: TensorLike, num_or_size_splits, axis: TensorLike = 0, num=None, name="split"):
    """``Split`` into ``num_or_size_splits`` equal pieces (an int), or ``SplitV`` into pieces
    of the given sizes (a list or tensor: one size may be -1, the rest)."""
    if isinstance(num_or_size_splits, (numbers.Integral, tensor_shape.Dimension)):
        return _split_even(value, int(num_or_size_splits), axis, name)
    sizes = convert_to_tensor(num_or_size_splits)  # outside the scope: "Const", as in TF
    if sizes.shape.ndims == 0:
        raise ValueError(
            "Rank-0 tensors are not supported as the num_or_size_splits argument to split. "
            "Argument provided: %s" % (num_or_size_splits,)
        )
    if num is None:
        num = sizes.shape[0].value if sizes.shape.ndims else None
        if num is None:
            raise ValueError("Cannot infer num from shape %s" % (num_or_size_splits,))
    return _split_sizes(value, sizes, axis, num, name)


def _split_even(value, num, axis, name):
    with name_scope(name, "Split", [value]) as scope:
        axis_t = convert_to_tensor(axis, dtype=dtypes.int32, name="split_dim")
        x = convert_to_tensor(value, name="value")
        dims, at = _split_dims(x, axis_t)
        if at is not None and dims[at] is not None:
            if dims[at] % num:
                reason = (
                    "Dimension size must be evenly divisible by %d but is %d\n\tNumber of ways "
                    "to split should evenly divide the split dimension" % (num, dims[at])
                )
                raise shape_error("Split", scope, [axis_t, x], reason)
            dims[at] //= num
        shape = tensor_shape.TensorShape(dims) if dims is not None else None
        outs = [(x.dtype.base_dtype, shape or tensor_shape.unknown_shape())] * num
        attrs = {"T": x.dtype.base_dtype, "num_split": num}
        return apply_op("Split", [axis_t, x], outs, scope, attrs).outputs


def _split_sizes(value, sizes, axis, num, name):
    with name_scope(name, "SplitV", [value, sizes]) as scope:
        x = convert_to_tensor(value, name="value")
        axis_t = convert_to_tensor(axis, dtype=dtypes.int32, name="split_dim")
        dims, at = _split_dims(x, axis_t)
        known = _static_value(sizes)
        shapes = [tensor_shape.unknown_shape(x.shape.ndims)] * num
        if known is not None and at is not None:
            known = [int(s) for s in np.reshape(known, -1)]
            if dims[at] is not None and -1 not in known and sum(known) != dims[at]:
                reason = (
                    "Determined shape must either match input shape along split_dim exactly if "
                    "fully specified, or be less than the size of the input along split_dim if "
                    "not fully specified.  Got: %d" % sum(known)
                )
                raise shape_error("SplitV", scope, [x, sizes, axis_t], reason)
            if -1 in known and dims[at] is not None:
                known[known.index(-1)] = dims[at] - sum(s for s in known if s != -1)
            shapes = [
                tensor_shape.TensorShape(dims[:at] + [s if s >= 0 else None] + dims[at + 1 :])
                for s in known
            ]
        attrs = {"T": x.dtype.base_dtype, "Tlen": sizes.dtype.base_dtype, "num_split": num}
        outs = [(x.dtype.base_dtype, s) for s in shapes]
        return apply_op("SplitV", [x, sizes, axis_t], outs, scope, attrs).outputs


def _split_dims(x, axis_t):
    """The input's dims (a list, None for an unknown rank) and the split axis when known."""
    if x.shape.ndims is None:
        return None, None
    dims, axis = x.shape.as_list(), _static_value(axis_t)
    if axis is None:
        return dims, None
    return dims, _axis_in(int(axis), len(dims))


def _axis_in(axis, rank):
    """``axis`` counted from 0 (a negative one from the end), or 1.15's ValueError."""
    if not -rank <= axis < rank:
        raise ValueError("axis = %d not in [%d, %d)" % (axis, -rank, rank))
    return axis % rank


def unstack(value: TensorLike, num=None, axis: int = 0, name: str = "unstack") -> list[Tensor]:
    """``Unpack``: the ``num`` slices of ``value`` along ``axis``, that axis removed."""
    x = convert_to_tensor(value)
    if num is None:
        if x.shape.ndims is not None:
            num = x.shape.as_list()[_axis_in(axis, x.shape.ndims)]
        if num is None:
            raise ValueError("Cannot infer num from shape %s" % (x.shape,))
    with name_scope(name, "Unpack", [x]) as scope:
        shape = tensor_shape.unknown_shape()
        if x.shape.ndims is not None:
            dims = x.shape.as_list()
            del dims[axis % len(dims)]
            shape = tensor_shape.TensorShape(dims)
        attrs = {"T": x.dtype.base_dtype, "num": num, "axis": axis}
        return apply_op("Unpack", [x], [(x.dtype.base_dtype, shape)] * num, scope, attrs).outputs


@RegisterGradient("Split")
def _split_grad(op, *grads):
    """The pieces' gradients joined back along the split axis (``concat``)."""
    return None, array_ops.concat(list(grads), op.inputs[0])


@RegisterGradient("SplitV")
def _split_v_grad(op, *grads):
    return array_ops.concat(list(grads), op.inputs[2]), None, None


@RegisterGradient("Unpack")
def _unpack_grad(op, *grads):
    """The slices' gradients stacked back along the unstacked axis (``stack``)."""
    return array_ops.stack(list(grads), axis=op.get_attr("axis"))
