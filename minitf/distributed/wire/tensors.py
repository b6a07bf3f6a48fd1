"""One tensor as one TensorProto message and back: the dtype whitelist, shapes, and the checks
on every received size.

Book section: "The Master and Worker Services".
"""

import numpy as np

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire.limits import MAX_RANK, MAX_TENSOR_BYTES
from minitf.framework import dtypes, errors, tensor_shape
from minitf.framework.dead_tensor import DEAD

# -- dtype whitelists ------------------------------------------------------------------------

# Tensor element types: name -> (DType, little-endian wire dtype; None for string).
_TENSOR_DTYPES = {
    "float16": (dtypes.float16, np.dtype("<f2")),
    "float32": (dtypes.float32, np.dtype("<f4")),
    "float64": (dtypes.float64, np.dtype("<f8")),
    "int8": (dtypes.int8, np.dtype("i1")),
    "int16": (dtypes.int16, np.dtype("<i2")),
    "int32": (dtypes.int32, np.dtype("<i4")),
    "int64": (dtypes.int64, np.dtype("<i8")),
    "uint8": (dtypes.uint8, np.dtype("u1")),
    "uint16": (dtypes.uint16, np.dtype("<u2")),
    "uint32": (dtypes.uint32, np.dtype("<u4")),
    "uint64": (dtypes.uint64, np.dtype("<u8")),
    "complex64": (dtypes.complex64, np.dtype("<c8")),
    "complex128": (dtypes.complex128, np.dtype("<c16")),
    "bool": (dtypes.bool, np.dtype("u1")),
    "string": (dtypes.string, None),
}
#: The dtype names a tensor may carry on the wire.
TENSOR_DTYPE_NAMES = frozenset(_TENSOR_DTYPES)
#: numpy dtype -> its wire dtype name, for the numeric and bool types (``_normalize``)
_WIRE_NAME_OF = {
    np.dtype(dt.as_numpy_dtype): name
    for name, (dt, _) in _TENSOR_DTYPES.items()
    if name != "string"
}

# Attr dtypes: every base type above and its reference type ("float32_ref").
_ATTR_DTYPES = {}
for _dt, _ in _TENSOR_DTYPES.values():
    _ATTR_DTYPES[_dt.name] = _dt
    _ATTR_DTYPES[_dt.as_ref.name] = _dt.as_ref
_ATTR_DTYPES["resource"] = dtypes.resource  # a queue op's handle (never a wire tensor)
_ATTR_DTYPES["variant"] = dtypes.variant  # a dataset op's output (never a wire tensor)


def _invalid(message):
    return errors.InvalidArgumentError(None, None, message)


def _short(value, limit=80):
    """repr(value), cut: received strings may be huge and end up in error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _dtype_from_name(name):
    """The DType for a received dtype name (attrs: ref types allowed)."""
    dt = _ATTR_DTYPES.get(name)
    if dt is None:
        raise _invalid("Unknown or unsupported dtype name %s." % _short(name))
    return dt


#: The wire dtype name of a dead tensor (the side of a ``tf.cond`` not taken, TF's ``is_dead``
#: bit): shape [0], no content; it decodes to ``DEAD``.
DEAD_NAME = "dead"
_DEAD_ENTRY = (None, np.dtype("u1"))
_DEAD_ARRAY = np.zeros((0,), np.uint8)


def _tensor_dtype(name):
    if name == DEAD_NAME:
        return _DEAD_ENTRY
    entry = _TENSOR_DTYPES.get(name)
    if entry is None:
        raise _invalid("Unknown or unsupported tensor dtype name %s." % _short(name))
    return entry


# -- shapes ----------------------------------------------------------------------------------


def _shape_to_proto(shape, msg):
    """Fills TensorShapeProto ``msg`` from a TensorShape, a tuple/list (None = unknown) or None
    (unknown rank)."""
    msg.SetInParent()
    if isinstance(shape, tensor_shape.TensorShape):
        shape = None if shape.ndims is None else shape.as_list()
    if shape is None:
        msg.unknown_rank = True
        return msg
    msg.dims.extend(-1 if d is None else int(d) for d in shape)
    return msg


def _dims_from_proto(msg):
    """A received shape as a list of ints/None, or None for unknown rank (validated)."""
    if msg.unknown_rank:
        if len(msg.dims):
            raise _invalid("A shape with unknown rank must not list dimensions.")
        return None
    if len(msg.dims) > MAX_RANK:
        raise _invalid("Shape has rank %d; at most %d is supported." % (len(msg.dims), MAX_RANK))
    dims = []
    for d in msg.dims:
        if d < -1:
            raise _invalid("Shape has a negative dimension %d." % d)
        dims.append(None if d == -1 else int(d))
    return dims


def _tensor_dims(msg, max_bytes, itemsize):
    """The fully known shape of a received tensor, checked against ``max_bytes``."""
    dims = _dims_from_proto(msg)
    if dims is None:
        raise _invalid("A tensor's shape must have a known rank.")
    if any(d is None for d in dims):
        raise _invalid(
            "A tensor's shape must be fully known, got %s."
            % [(-1 if d is None else d) for d in dims]
        )
    # Count zero-sized dimensions as 1: numpy refuses shapes whose other dimensions are absurd
    # even when the array is empty, so such shapes are refused here, before numpy sees them.
    span = 1
    for d in dims:
        span *= max(d, 1)
        if span * itemsize > max_bytes:
            raise _invalid(
                "Tensor of shape %s with %d-byte elements exceeds the limit of %d "
                "bytes." % (_short(dims), itemsize, max_bytes)
            )
    n = 1
    for d in dims:
        n *= d
    return tuple(dims), n


# -- tensors ---------------------------------------------------------------------------------


def _normalize(value):
    """(dtype name, ndarray) for a value to send: numeric/bool arrays keep their type (it must be
    a minitf dtype); str/bytes (and arrays of them) become an object array of bytes.  A bare
    str/bytes goes into an object array as it is (numpy's fixed-width ``S`` type would drop its
    trailing NUL bytes, which serialized protos such as summaries can end with)."""
    if value is DEAD:
        return DEAD_NAME, _DEAD_ARRAY
    if isinstance(value, (bytes, str)):
        value = np.array(value, dtype=object)
    arr = np.asarray(value)
    name = _WIRE_NAME_OF.get(arr.dtype)
    if name is not None:  # a numeric or bool array (most values): no conversion to look up
        return name, arr
    if arr.dtype.kind in "USO":
        flat = arr.reshape(-1)
        out = np.empty(flat.shape, dtype=object)
        for i, x in enumerate(flat.tolist() if arr.dtype.kind != "O" else flat):
            if isinstance(x, str):
                x = x.encode("utf-8")
            elif isinstance(x, (bytes, bytearray, memoryview)):
                x = bytes(x)
            elif hasattr(x, "elements"):  # a dataset (kernels/dataset_kernels.py)
                raise _invalid(
                    "A dataset cannot be sent to another task: build the dataset on the task "
                    "(and device) of the iterator that reads it."
                )
            else:
                raise _invalid(
                    "Cannot send a tensor element of type %s: only numbers, bools, "
                    "bytes and str travel." % type(x).__name__
                )
            out[i] = x
        return "string", out.reshape(arr.shape)
    try:
        dt = dtypes.as_dtype(arr.dtype)
    except TypeError:
        raise _invalid("Cannot send a tensor of numpy dtype %s." % arr.dtype) from None
    if dt.name not in _TENSOR_DTYPES:
        raise _invalid("Cannot send a tensor of dtype %s." % dt.name)
    return dt.name, arr


def _string_stream_size(arr):
    return 8 * arr.size + sum(len(x) for x in arr.reshape(-1))


def _payload_bytes(name, arr):
    """Bytes the tensor takes on the wire (raw content or the string byte stream)."""
    if name == "string":
        return _string_stream_size(arr)
    return arr.size * _tensor_dtype(name)[1].itemsize


def _wire_bytes(name, arr):
    """A bytes-like view of a numeric/bool array in wire layout (may share arr's memory)."""
    wire = _tensor_dtype(name)[1]
    if name == "bool":
        arr = arr.astype(np.uint8)
    arr = np.ascontiguousarray(arr, dtype=wire)
    return memoryview(arr).cast("B") if arr.size else memoryview(b"")


def tensor_to_proto(value):
    """A :class:`TensorProto` holding ``value`` (an ndarray, numpy or Python scalar, bytes, str).

    Numeric and bool tensors go as raw little-endian bytes in ``content``; strings as one
    ``bytes`` per element in ``string_val`` (``str`` is encoded as UTF-8).  Raises
    InvalidArgumentError for values that have no minitf dtype (objects, datetimes ...).
    """
    return fill_tensor_proto(pb.TensorProto(), *_normalize(value))


def fill_tensor_proto(msg, name, arr):
    """Fills the empty TensorProto ``msg`` (a NamedTensor's own ``tensor``: no copy) with
    ``arr`` of dtype ``name``, as ``_normalize`` gave them; returns ``msg``."""
    msg.dtype = name
    shape = msg.shape
    shape.SetInParent()
    shape.dims.extend(arr.shape)
    if name == "string":
        msg.string_val.extend(arr.reshape(-1).tolist())
    else:
        msg.content = bytes(_wire_bytes(name, arr))
    return msg


def _from_wire(buf, name, shape):
    """ndarray of dtype ``name`` and ``shape`` from the raw bytes ``buf`` (length checked)."""
    if name == DEAD_NAME:
        return DEAD
    dt, wire = _TENSOR_DTYPES[name]
    flat = np.frombuffer(buf, dtype=wire)
    if name == "bool":
        return (flat != 0).reshape(shape)
    native = np.dtype(dt.as_numpy_dtype)
    if isinstance(buf, (bytearray, np.ndarray)) and native == wire:
        return flat.reshape(shape)  # the buffer is ours alone: already a writable copy
    out = flat.astype(native, copy=True)
    out.shape = shape  # in place: one array object, not a copy plus a reshaped view
    return out


def _strings_array(values, shape):
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = bytes(v)
    return out.reshape(shape)


def proto_to_tensor(msg, max_bytes=MAX_TENSOR_BYTES):
    """The ndarray a received :class:`TensorProto` describes (a fresh, writable copy).

    Raises InvalidArgumentError for an unknown dtype name, a shape with unknown or negative
    dimensions or rank over :data:`MAX_RANK`, a tensor over ``max_bytes`` bytes, or content whose
    length does not match the shape.  Scalars come back as 0-d arrays.
    """
    name, shape, payload = _checked_tensor(msg, max_bytes)
    if name == "string":
        return _strings_array(payload, shape)
    return _from_wire(payload, name, shape)


class EncodedTensor(bytes):
    """A received :class:`TensorProto`, checked but not decoded: its serialized bytes (a master
    runs no kernel: it forwards constants to the workers as they came, as TF's master does)."""

    __slots__ = ()


def check_tensor(msg, max_bytes=MAX_TENSOR_BYTES):
    """The checks of :func:`proto_to_tensor` alone: InvalidArgumentError for a bad
    :class:`TensorProto`, and no array made."""
    _checked_tensor(msg, max_bytes)


def _checked_tensor(msg, max_bytes):
    """``(dtype name, shape, payload)`` of a TensorProto that passed every check: the payload
    is the list of elements of a string tensor, else the raw content bytes."""
    name = msg.dtype
    dt, wire = _tensor_dtype(name)
    if not msg.HasField("shape"):
        raise _invalid("TensorProto of dtype %s has no shape." % name)
    if name == "string":
        shape, n = _tensor_dims(msg.shape, max_bytes, 8)
        if msg.content:
            raise _invalid("A string tensor carries its elements in string_val, not content.")
        count = len(msg.string_val)
        if count != n:
            raise _invalid(
                "String tensor of shape %s needs %d elements, got %d." % (list(shape), n, count)
            )
        values = list(msg.string_val)
        if 8 * n + sum(len(v) for v in values) > max_bytes:
            raise _invalid("String tensor exceeds the limit of %d bytes." % max_bytes)
        return name, shape, values
    shape, n = _tensor_dims(msg.shape, max_bytes, wire.itemsize)
    if len(msg.string_val):
        raise _invalid("A %s tensor carries its elements in content, not string_val." % name)
    content = msg.content
    expected = n * wire.itemsize
    if len(content) != expected:
        raise _invalid(
            "Tensor of dtype %s and shape %s needs %d bytes of content, got %d."
            % (name, list(shape), expected, len(content))
        )
    return name, shape, content
