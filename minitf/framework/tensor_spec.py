"""``tf.TensorSpec``: the type and static shape of a tensor, without a tensor.

Book section: "Loading Data Directly from the Graph" (the Data API): a dataset's element is a
nest of components, each described by a spec; an iterator's ``get_next`` makes tensors of them.
"""

from __future__ import annotations

from minitf.framework import dtypes, tensor_shape


class TensorSpec:
    """``dtype``, ``shape`` (a :class:`TensorShape`, maybe partly unknown) and ``name``."""

    __slots__ = ("dtype", "shape", "name")

    def __init__(self, shape, dtype=dtypes.float32, name=None) -> None:
        self.shape = tensor_shape.as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    def __repr__(self) -> str:
        return "TensorSpec(shape=%s, dtype=%r, name=%r)" % (self.shape, self.dtype, self.name)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, TensorSpec)
            and self.dtype == other.dtype
            and _dims(self.shape) == _dims(other.shape)
        )

    def __hash__(self) -> int:
        return hash((self.dtype, _dims(self.shape)))

    @staticmethod
    def from_tensor(t) -> TensorSpec:
        return TensorSpec(t.shape, t.dtype.base_dtype)


def _dims(shape):
    return None if shape.ndims is None else tuple(shape.as_list())
