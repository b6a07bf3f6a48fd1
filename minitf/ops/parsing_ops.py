"""Parsing ops: ``tf.decode_csv`` and ``tf.decode_raw`` (TF 1.15's python/ops/parsing_ops.py).

Book section: "Loading Data Directly from the Graph": a reader's lines go through
``tf.decode_csv(value, record_defaults=[[-1.], [-1.], [-1]])``; each column's dtype is the
dtype of its default, and an empty default makes the column required (part 2 §14.3).  One
``DecodeCSV`` op returns a list of tensors, each shaped like ``records``.  ``decode_raw``
reinterprets the bytes of each string as numbers (``DecodeRaw``).  The parsing itself is in
``kernels/parsing_kernels.py``.
"""

from __future__ import annotations

from minitf.framework import dtypes, tensor_shape
from minitf.framework.graph import convert_to_tensor, name_scope
from minitf.ops.op_def import NotDifferentiable, apply_op, register_op, shape_error

register_op("DecodeCSV")
register_op("DecodeRaw")
NotDifferentiable("DecodeCSV")
NotDifferentiable("DecodeRaw")

_CSV_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)
_RAW_TYPES = (
    dtypes.float16,
    dtypes.float32,
    dtypes.float64,
    dtypes.int32,
    dtypes.uint16,
    dtypes.uint8,
    dtypes.int16,
    dtypes.int8,
    dtypes.int64,
    dtypes.complex64,
    dtypes.complex128,
    dtypes.bool,
)


def _check_type(param, dtype, allowed):
    """TF's op-helper check of a dtype against an op's allowed list."""
    if dtype.base_dtype not in allowed:
        raise TypeError(
            "Value passed to parameter '%s' has DataType %s not in list of allowed values: %s"
            % (param, dtype.base_dtype.name, ", ".join(d.name for d in allowed))
        )


def _check_select_cols(select_cols, record_defaults):
    """``decode_csv``'s Python checks of ``select_cols``."""
    if select_cols is None:
        return []
    cols = list(select_cols)
    if any(cols[i] >= cols[i + 1] for i in range(len(cols) - 1)):
        raise ValueError("select_cols is not strictly increasing.")
    if cols and cols[0] < 0:
        raise ValueError("select_cols contains negative values.")
    if len(cols) != len(record_defaults):
        raise ValueError("Length of select_cols and record_defaults do not match.")
    return [int(c) for c in cols]


def _check_default_shapes(scope, records, defaults):
    """DecodeCSV's shape function: each default a scalar or a vector of at most one element."""
    for d in defaults:
        ndims = d.shape.ndims
        if ndims is not None and ndims > 1:
            reason = "Shape must be at most rank 1 but is rank %d" % ndims
            raise shape_error("DecodeCSV", scope, [records] + defaults, reason)
        if ndims == 1 and (d.shape[0].value or 0) > 1:
            reason = "Shape of a default must be a length-0 or length-1 vector, or a scalar."
            raise shape_error("DecodeCSV", scope, [records] + defaults, reason)


def decode_csv(
    records,
    record_defaults,
    field_delim=",",
    use_quote_delim=True,
    name=None,
    na_value="",
    select_cols=None,
):
    """``tf.decode_csv``: one ``DecodeCSV`` op; a list with one tensor per column (the
    column's dtype is its default's; an empty default makes the column required)."""
    cols = _check_select_cols(select_cols, record_defaults)
    with name_scope(name, "DecodeCSV", []) as scope:
        records = convert_to_tensor(records, dtype=dtypes.string, name="records")
        defaults = [
            convert_to_tensor(d, name="record_defaults_%d" % i)
            for i, d in enumerate(record_defaults)
        ]
        for d in defaults:
            _check_type("record_defaults", d.dtype, _CSV_TYPES)
        _check_default_shapes(scope, records, defaults)
        attrs = {
            "OUT_TYPE": [d.dtype.base_dtype for d in defaults],
            "field_delim": field_delim,
            "use_quote_delim": bool(use_quote_delim),
            "na_value": na_value,
            "select_cols": cols,
        }
        outs = [(d.dtype.base_dtype, records.shape) for d in defaults]
        op = apply_op("DecodeCSV", [records] + defaults, outs, scope, attrs)
    return list(op.outputs)


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):  # noqa: A002 - TF's deprecated argument name
    """``tf.decode_raw``: each string's bytes as a vector of ``out_type`` (a ``DecodeRaw``
    op; the output has one more dimension than the input)."""
    if input_bytes is not None and bytes is not None:
        raise ValueError("Cannot specify both 'input_bytes' and 'bytes'")
    input_bytes = bytes if input_bytes is None else input_bytes
    if out_type is None:
        raise ValueError("decode_raw_v1() missing 1 positional argument: 'out_type'")
    out_type = dtypes.as_dtype(out_type)
    _check_type("out_type", out_type, _RAW_TYPES)
    with name_scope(name, "DecodeRaw", []) as scope:
        t = convert_to_tensor(input_bytes, dtype=dtypes.string, name="bytes")
        shape = t.shape.concatenate(tensor_shape.TensorShape([None]))
        attrs = {"out_type": out_type, "little_endian": bool(little_endian)}
        return apply_op("DecodeRaw", [t], [(out_type, shape)], scope, attrs).outputs[0]
