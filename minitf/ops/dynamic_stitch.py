"""``tf.dynamic_stitch``: merges the values of several tensors into one, each row at the place
an index tensor says.

Book section: none directly; it is how TF's gradients of ``Sum``, ``Mean``, ``Max`` and ``Min``
over some axes compute, at run time, the reduced shape with those axes kept as 1s
(``math_ops.reduced_shape``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import Tensor, convert_to_tensor, name_scope
from minitf.ops.array_ops import TensorLike, _static_value
from minitf.ops.op_def import apply_op, register_op

register_op("DynamicStitch")


def _stitched_shape(indices: list[Tensor], data: list[Tensor]) -> tensor_shape.TensorShape:
    """The output's static shape: ``[max index + 1]`` when every index is a constant, then the
    dimensions of the data past its index's rank."""
    first = None
    values = [_static_value(i) for i in indices]
    if all(v is not None for v in values):
        first = max((int(np.max(v)) + 1 for v in values if np.size(v)), default=0)
    i0, d0 = indices[0].shape, data[0].shape
    if i0.ndims is None or d0.ndims is None:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape([first] + d0.as_list()[i0.ndims :])


def dynamic_stitch(
    indices: Sequence[TensorLike], data: Sequence[TensorLike], name: str | None = None
) -> Tensor:
    """``DynamicStitch``: ``out[indices[m][i]] = data[m][i]``, a later ``m`` winning where
    indices repeat; the first dimension is the largest index plus one."""
    indices, data = list(indices), list(data)
    if len(indices) != len(data):
        raise ValueError(
            "List argument 'indices' to 'DynamicStitch' Op with length %d must match length "
            "%d of argument 'data'." % (len(indices), len(data))
        )
    with name_scope(name, "DynamicStitch", indices + data) as scope:
        indices = [convert_to_tensor(i, dtype=dtypes.int32) for i in indices]
        data = [convert_to_tensor(d) for d in data]
        dt = data[0].dtype.base_dtype
        attrs = {"N": len(data), "T": dt}
        shape = _stitched_shape(indices, data)
        return apply_op("DynamicStitch", indices + data, [(dt, shape)], scope, attrs).outputs[0]
