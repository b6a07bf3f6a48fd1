"""``tf.SparseTensor``: a sparse value as three dense tensors (TF's framework/sparse_tensor.py).

Book section: "Loading Data Directly from the Graph" (``tf.string_split`` returns one).  A
``SparseTensor`` names the non-default entries of a tensor of shape ``dense_shape``: their
``indices`` (int64, one row per entry) and ``values``.  It is not an op's output but a triple
of tensors; ``sess.run`` of one returns a :class:`SparseTensorValue` with the three arrays.
"""

from __future__ import annotations

import collections

from minitf.framework import dtypes
from minitf.framework.graph import convert_to_tensor
from minitf.framework.tensor_shape import TensorShape, unknown_shape

SparseTensorValue = collections.namedtuple(
    "SparseTensorValue", ["indices", "values", "dense_shape"]
)


class SparseTensor:
    """``tf.SparseTensor(indices, values, dense_shape)``: the three tensors of a sparse value."""

    def __init__(self, indices, values, dense_shape):
        self._indices = convert_to_tensor(indices, name="indices", dtype=dtypes.int64)
        self._values = convert_to_tensor(values, name="values")
        self._dense_shape = convert_to_tensor(dense_shape, name="dense_shape", dtype=dtypes.int64)
        self._indices.shape.with_rank(2)
        self._values.shape.with_rank(1)
        self._dense_shape.shape.with_rank(1)

    @property
    def indices(self):
        return self._indices

    @property
    def values(self):
        return self._values

    @property
    def dense_shape(self):
        return self._dense_shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def op(self):
        return self._values.op

    @property
    def graph(self):
        return self._indices.graph

    @property
    def shape(self) -> TensorShape:
        """The static dense shape: known when ``dense_shape`` is a constant, else its rank."""
        op = self._dense_shape.op
        if op.type == "Const":
            return TensorShape([int(d) for d in op.get_attr("value")])
        rank = self._dense_shape.shape[0].value
        return unknown_shape() if rank is None else TensorShape([None] * rank)

    def get_shape(self) -> TensorShape:
        return self.shape

    def __repr__(self):
        return "SparseTensor(indices=%s, values=%s, dense_shape=%s)" % (
            self._indices,
            self._values,
            self._dense_shape,
        )
