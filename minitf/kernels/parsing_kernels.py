"""Parsing kernels: ``DecodeCSV``, ``DecodeRaw`` and ``StringSplit``.

Book section: "Loading Data Directly from the Graph".  ``DecodeCSV`` follows TF 1.15's
core/kernels/decode_csv_op.cc: the field splitting (quotes, CR/LF, a trailing delimiter), the
defaults of empty or ``na_value`` fields, and the number parsers of core/lib/strings
(``safe_strto32``: spaces around, an optional ``-``, digits; ``safe_strtof``: double-conversion
with spaces, hex, ``inf``/``nan`` and its empty-string value 0.0 for a whitespace-only field:
1.15's behaviour, part 2 §14.3).  ``DecodeRaw`` is decode_raw_op.cc, ``StringSplit``
string_split_op.cc.
"""

from __future__ import annotations

import re

import numpy as np

from minitf.framework import dtypes
from minitf.kernels.registry import register
from minitf.kernels.tensor_ops import invalid_argument


def _text(b):
    return b.decode("utf-8", "surrogateescape")


# -- splitting a record into fields ------------------------------------------------------------


def _quoted_field(record, i, delim):
    """The body of the quoted field whose opening quote is before ``i``; the index after it."""
    field = bytearray()
    last = len(record) - 1
    while i < last and not (record[i] == 0x22 and record[i + 1] == delim):
        if record[i] != 0x22:
            field.append(record[i])
            i += 1
        elif record[i + 1] == 0x22:
            field.append(0x22)
            i += 2
        else:
            raise invalid_argument("Quote inside a string has to be escaped by another quote")
    if not (i <= last and record[i] == 0x22 and (i == last or record[i + 1] == delim)):
        raise invalid_argument("Quoted field has to end with quote followed by delim or end")
    return bytes(field), i + 2


def _plain_field(record, i, delim, quotes):
    """An unquoted field from ``i`` to the next delimiter; the index after the delimiter."""
    end = record.find(bytes([delim]), i)
    end = len(record) if end < 0 else end
    body = record[i:end]
    if (quotes and b'"' in body) or b"\n" in body or b"\r" in body:
        raise invalid_argument("Unquoted fields cannot have quotes/CRLFs inside")
    return body, end + 1


def split_fields(record: bytes, delim: int, quotes: bool, select_cols=()):
    """The fields of one CSV record (TF's ``ExtractFields``): ``\\r``/``\\n`` at a field's
    start are skipped, ``""`` has no field, a trailing delimiter adds an empty last field."""
    fields, parsed, i = [], 0, 0
    while i < len(record):
        if record[i] in (0x0A, 0x0D):
            i += 1
            continue
        if quotes and record[i] == 0x22:
            field, i = _quoted_field(record, i + 1, delim)
        else:
            field, i = _plain_field(record, i, delim, quotes)
        if not select_cols or select_cols[len(fields)] == parsed:
            fields.append(field)
            if select_cols and len(fields) == len(select_cols):
                return fields
        parsed += 1
    if record and record[-1] == delim and (not select_cols or select_cols[len(fields)] == parsed):
        fields.append(b"")
    return fields


# -- numbers -----------------------------------------------------------------------------------

_SPACES = b" \t\n\v\f\r"
_INT = re.compile(rb"-?[0-9]+\Z")
_FLOAT = re.compile(
    rb"[+-]?(?:(?P<special>inf|nan)|0x(?P<hex>[0-9a-f]+)|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)\Z",
    re.IGNORECASE,
)
_INT_RANGES = {dtypes.int32: (-(2**31), 2**31 - 1), dtypes.int64: (-(2**63), 2**63 - 1)}


def parse_int(field: bytes, dtype):
    """TF 1.15's ``safe_strto32``/``safe_strto64``: None when not a valid integer (a ``+``
    sign, a decimal point or an overflow are invalid)."""
    body = field.strip(_SPACES)
    if not _INT.match(body):
        return None
    value = int(body)
    low, high = _INT_RANGES[dtype]
    return value if low <= value <= high else None


def parse_float(field: bytes):
    """TF 1.15's ``safe_strtof``/``safe_strtod`` (double-conversion): None when invalid; a
    whitespace-only field is 0.0; 32 characters or more are invalid."""
    if len(field) >= 32:
        return None
    body = field.strip(_SPACES)
    if not body:
        return 0.0
    m = _FLOAT.match(body)
    if m is None:
        return None
    negative = body.startswith(b"-")
    if m.group("hex"):
        value = float(int(m.group("hex"), 16))
    elif m.group("special"):
        value = float(m.group("special").decode())
    else:
        value = float(body.lstrip(b"+-"))
    return -value if negative else value


_TYPE_NAMES = {
    dtypes.float32: "float",
    dtypes.float64: "double",
    dtypes.int32: "int32",
    dtypes.int64: "int64",
}


def _convert(field, dtype, f, i):
    """One non-empty field of column ``f`` in record ``i`` as a value of ``dtype``."""
    if dtype == dtypes.string:
        return field
    if dtype in _INT_RANGES:
        value = parse_int(field, dtype)
    else:
        value = parse_float(field)
    if value is None:
        raise invalid_argument(
            "Field %d in record %d is not a valid %s: %s" % (f, i, _TYPE_NAMES[dtype], _text(field))
        )
    return value


# -- DecodeCSV ---------------------------------------------------------------------------------


def _csv_settings(op):
    """The constructor's checks of DecodeCSV's attrs (errors at the first run, as in TF)."""
    types = list(op.get_attr("OUT_TYPE"))
    cols = list(op.get_attr("select_cols"))
    delim = op.get_attr("field_delim")
    delim = delim.encode() if isinstance(delim, str) else delim
    na_value = op.get_attr("na_value")
    na_value = na_value.encode() if isinstance(na_value, str) else na_value
    if cols and len(cols) != len(types):
        raise invalid_argument("select_cols should match output size")
    if any(a >= b for a, b in zip(cols, cols[1:])):
        raise invalid_argument("select_cols should be strictly increasing indices")
    if cols and cols[0] < 0:
        raise invalid_argument("select_cols should be non-negative indices")
    if len(delim) != 1:
        raise invalid_argument("field_delim should be only 1 char")
    return types, cols, delim[0], bool(op.get_attr("use_quote_delim")), na_value


def _column_defaults(defaults):
    """Each default as None (required) or its one value."""
    out = []
    for f, d in enumerate(defaults):
        d = np.asarray(d)
        if d.ndim > 1:
            raise invalid_argument("Each record default should be at most rank 1")
        if d.size > 1:
            raise invalid_argument(
                "There should only be 1 default per field but field %d has %d" % (f, d.size)
            )
        out.append(d.reshape(-1)[0] if d.size else None)
    return out


def _as_record(r):
    return r if isinstance(r, bytes) else str(r).encode()


def _decode_csv(op, device):
    types, cols, delim, quotes, na_value = _csv_settings(op)

    def compute(ctx, ins):
        records = np.asarray(ins[0], dtype=object)
        defaults = _column_defaults(ins[1:])
        if not cols:
            fast = _fast_columns(records, types, delim, quotes, na_value, defaults)
            if fast is not None:
                return fast
        columns = [[] for _ in types]
        for i, record in enumerate(records.reshape(-1)):
            fields = split_fields(_as_record(record), delim, quotes, cols)
            if len(fields) != len(types):
                raise invalid_argument(
                    "Expect %d fields but have %d in record %d" % (len(types), len(fields), i)
                )
            for f, field in enumerate(fields):
                if not field or field == na_value:
                    if defaults[f] is None:
                        raise invalid_argument(
                            "Field %d is required but missing in record %d!" % (f, i)
                        )
                    columns[f].append(defaults[f])
                else:
                    columns[f].append(_convert(field, types[f], f, i))
        return tuple(_column(c, t, records.shape) for c, t in zip(columns, types))

    return compute


# -- the common case at numpy's speed ------------------------------------------------------------

# a column of plain decimal fields, one per line: what both the exact parsers accept and numpy's
# own string-to-number conversion reads the same way (no hex, inf, nan or underscores)
_PLAIN_COLUMN = {
    "float": re.compile(
        rb"(?:[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*\n)*\Z"
    ),
    "int": re.compile(rb"(?:[ \t]*-?[0-9]+[ \t]*\n)*\Z"),
}


def _fast_columns(records, types, delim, quotes, na_value, defaults):
    """DecodeCSV's outputs when every record is plain (no quote, CR or LF; exactly one field
    per output) and every numeric field a plain decimal: each record split at C speed and each
    column converted by numpy at once.  None when anything is not plain: the exact parser
    then decides, its errors included, so both give the same results."""
    d, n = bytes([delim]), len(types)
    recs = [r if type(r) is bytes else _as_record(r) for r in records.reshape(-1)]
    blob = b"\n".join(recs)
    if (quotes and b'"' in blob) or b"\r" in blob or blob.count(b"\n") != len(recs) - 1:
        return None
    if not all(recs) or any(r.count(d) != n - 1 for r in recs):
        return None
    fields = blob.replace(b"\n", d).split(d)
    out = []
    for f, dtype in enumerate(types):
        column = _fast_column(fields[f::n], dtype, defaults[f], na_value)
        if column is None:
            return None
        out.append(_column(column, dtype, records.shape))
    return tuple(out)


def _fast_column(fields, dtype, default, na_value):
    """One column's values (a list of bytes, or an array), or None when a field needs the
    exact parser (a required field missing, a number that is not plain)."""
    missing = [not x or x == na_value for x in fields]
    if any(missing) and default is None:
        return None
    if dtype == dtypes.string:
        return [default if m else x for x, m in zip(fields, missing)]
    present = [x for x, m in zip(fields, missing) if not m]
    kind = "float" if dtype.is_floating else "int"
    if present and (
        (kind == "float" and max(map(len, present)) >= 32)
        or not _PLAIN_COLUMN[kind].match(b"\n".join(present) + b"\n")
    ):
        return None
    try:
        parsed = np.array(present).astype(np.float64 if kind == "float" else np.int64)
    except (ValueError, OverflowError):
        return None
    if kind == "int" and parsed.size:
        low, high = _INT_RANGES[dtype]
        if parsed.min() < low or parsed.max() > high:
            return None
    if not any(missing):
        return parsed
    values = np.full(len(fields), default, dtype=parsed.dtype)
    values[~np.array(missing)] = parsed
    return values


def _column(values, dtype, shape):
    if dtype == dtypes.string:
        out = np.empty(len(values), dtype=object)
        out[:] = [v if isinstance(v, bytes) else bytes(v) for v in values]
    else:
        with np.errstate(over="ignore"):
            out = np.array(values, dtype=np.float64 if dtype.is_floating else np.int64)
            out = out.astype(dtype.as_numpy_dtype)
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


# -- DecodeRaw ---------------------------------------------------------------------------------


def _decode_raw(op, device):
    out_type = op.get_attr("out_type")
    order = "<" if op.get_attr("little_endian") else ">"
    np_type = np.dtype(out_type.as_numpy_dtype).newbyteorder(order)

    def compute(ctx, ins):
        strings = np.asarray(ins[0], dtype=object)
        flat = [_as_record(s) for s in strings.reshape(-1)]
        size = len(flat[0]) if flat else 0
        if size % np_type.itemsize:
            raise invalid_argument(
                "Input to DecodeRaw has length %d that is not a multiple of %d, the size of %s"
                % (size, np_type.itemsize, out_type.name)
            )
        for i, s in enumerate(flat):
            if len(s) != size:
                raise invalid_argument(
                    "DecodeRaw requires input strings to all be the same size, but element %d "
                    "has size %d != %d" % (i, len(s), size)
                )
        width = size // np_type.itemsize
        values = np.frombuffer(b"".join(flat), dtype=np_type).astype(out_type.as_numpy_dtype)
        return (values.reshape(strings.shape + (width,)),)

    return compute


# -- StringSplit -------------------------------------------------------------------------------


def _tokens(text, delimiter, skip_empty):
    """TF's ``Split``: any byte of ``delimiter`` separates; an empty delimiter splits into
    single bytes."""
    if not delimiter:
        return [text[i : i + 1] for i in range(len(text))]
    pattern = b"[" + b"".join(re.escape(bytes([c])) for c in delimiter) + b"]"
    tokens = re.split(pattern, text)
    return [t for t in tokens if t] if skip_empty else tokens


def _string_split(op, device):
    skip_empty = bool(op.get_attr("skip_empty"))

    def compute(ctx, ins):
        source, delimiter = np.asarray(ins[0], dtype=object), ins[1]
        if source.ndim != 1:
            raise invalid_argument(
                "input must be a vector, got shape: %s" % _shape_text(source.shape)
            )
        if np.ndim(delimiter) != 0:
            raise invalid_argument(
                "delimiter must be a scalar, got shape: %s" % _shape_text(np.shape(delimiter))
            )
        delimiter = _as_record(np.asarray(delimiter, dtype=object)[()])
        indices, values, width = [], [], 0
        for i, text in enumerate(source):
            tokens = _tokens(_as_record(text), delimiter, skip_empty)
            indices.extend((i, j) for j in range(len(tokens)))
            values.extend(tokens)
            width = max(width, len(tokens))
        out_values = np.empty(len(values), dtype=object)
        out_values[:] = values
        out_indices = np.array(indices, dtype=np.int64).reshape(len(indices), 2)
        return out_indices, out_values, np.array([len(source), width], dtype=np.int64)

    return compute


def _shape_text(shape):
    return "[%s]" % ",".join(str(d) for d in shape)


register("DecodeCSV", _decode_csv, cpu="any")
register("DecodeRaw", _decode_raw, cpu="any")
register("StringSplit", _string_split, cpu="any")
