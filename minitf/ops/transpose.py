"""``tf.transpose`` and ``tf.invert_permutation`` (TF's ``array_ops.transpose``).

Book section: none of its own -- ``tf.transpose(W)`` is everyday TF code.  Its default
permutation needs arithmetic on the rank when the rank is unknown (``math_ops``), so it lives
apart from ``array_ops``, which ``math_ops`` builds on.
"""

from __future__ import annotations

import numpy as np

from minitf.framework import tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops import math_ops
from minitf.ops.array_ops import TensorLike, _static_value, rank_op
from minitf.ops.op_def import apply_op, register_op, shape_error

register_op("Transpose")
register_op("InvertPermutation")


def transpose(a: TensorLike, perm: TensorLike = None, name: str = "transpose") -> Tensor:
    """``Transpose``: dimension i of the output is dimension ``perm[i]`` of ``a``; by default
    the dimensions reversed: a Const ``perm`` when the rank is known and not 0, else TF 1.15's
    ``(Rank - 1) - Range(0, Rank, 1)`` computed when run."""
    with name_scope(name, "transpose", [a]) as scope:
        x = convert_to_tensor(a, name="a")
        if perm is None and not x.shape.ndims:
            rank = rank_op(x)
            perm = (rank - 1) - math_ops.range_(0, rank, 1, name="Range")
        elif perm is None:
            perm = np.arange(x.shape.ndims - 1, -1, -1, dtype=np.int32)
        perm = convert_to_tensor(perm, name="perm")
        out = tensor_shape.unknown_shape(x.shape.ndims)
        order = _static_value(perm)
        if order is not None and x.shape.ndims is not None:
            order = [int(i) for i in np.reshape(order, -1)]
            if len(order) != x.shape.ndims:
                reason = "Dimension must be %d but is %d" % (x.shape.ndims, len(order))
                raise shape_error("Transpose", scope, [x, perm], reason)
            dims = x.shape.dims
            if sorted(order) == list(range(len(order))):
                out = tensor_shape.TensorShape([dims[i] for i in order])
        attrs = {"T": x.dtype.base_dtype, "Tperm": perm.dtype.base_dtype}
        outs = [(x.dtype.base_dtype, out)]
        return apply_op("Transpose", [x, perm], outs, scope, attrs).outputs[0]


def invert_permutation(x: TensorLike, name: str | None = None) -> Tensor:
    """``InvertPermutation``: ``y[x[i]] = i`` (the permutation that undoes ``x``)."""
    with name_scope(name, "InvertPermutation", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        return apply_op("InvertPermutation", [x], [(dt, x.shape)], scope, {"T": dt}).outputs[0]
