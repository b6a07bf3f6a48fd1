"""String ops: ``tf.string_split`` (TF 1.15's python/ops/string_ops.py).

Book section: "Loading Data Directly from the Graph" (string tensors: what readers produce).
``tf.string_split(source, sep=None, skip_empty=True, delimiter=None)`` splits each string of a
vector on any character of the delimiter (default ``" "``; ``""`` splits into characters) with
one ``StringSplit`` op, and returns a :class:`~minitf.framework.sparse_tensor.SparseTensor`
of shape ``[len(source), most tokens]``.
"""

from __future__ import annotations

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import convert_to_tensor, name_scope
from minitf.framework.sparse_tensor import SparseTensor
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op, shape_error

register_op("StringSplit")
NotDifferentiable("StringSplit")


def string_split(
    source, sep=None, skip_empty=True, delimiter=None, result_type="SparseTensor", name=None
):
    """``tf.string_split``: the tokens of each string of ``source`` as a SparseTensor."""
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'sep' and 'delimiter'")
    delimiter = sep if delimiter is None else delimiter
    if result_type == "RaggedTensor":
        raise NotImplementedError("minitf has no RaggedTensor: use result_type='SparseTensor'")
    if result_type != "SparseTensor":
        raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")
    delimiter = convert_to_tensor(" " if delimiter is None else delimiter, dtype=dtypes.string)
    source = convert_to_tensor(source, dtype=dtypes.string)
    with name_scope(name, "StringSplit", []) as scope:
        for t, rank in ((source, 1), (delimiter, 0)):
            if t.shape.ndims is not None and t.shape.ndims != rank:
                reason = "Shape must be rank %d but is rank %d" % (rank, t.shape.ndims)
                raise shape_error("StringSplit", scope, [source, delimiter], reason)
        outs = [
            (dtypes.int64, tensor_shape.TensorShape([None, 2])),
            (dtypes.string, tensor_shape.TensorShape([None])),
            (dtypes.int64, tensor_shape.TensorShape([2])),
        ]
        attrs = {"skip_empty": bool(skip_empty)}
        op = apply_op("StringSplit", [source, delimiter], outs, scope, attrs)
    return SparseTensor(*op.outputs)
