"""The wire format of minitf's cluster: graphs and tensors as protocol buffers, and back.

Book section: "The Master and Worker Services".  Between a client, a master and its workers only
two kinds of things travel: *graphs* (the client's GraphDef to the master, one partition per
task from the master to each worker) and *tensors* (feeds, fetches, and every value a ``Send`` op
hands to a ``Recv`` op on another task).  This module turns both into the messages of
``protocol.proto`` and back.  It is pure functions: no sockets, no threads, no gRPC calls.

Tensors
    :func:`tensor_to_proto` / :func:`proto_to_tensor` for a tensor in one message;
    :func:`iter_tensor_chunks` / :func:`assemble_chunks` for a tensor streamed in pieces (so a
    64 MiB tensor moves although one gRPC message is capped at :data:`MAX_MESSAGE_BYTES`);
    :func:`split_named_tensors` / :class:`NamedTensorReceiver` for the feeds and fetches of a
    step (small ones inline, large ones in pieces).  The pieces are written and read by hand
    as protobuf lays them out (:func:`split_field`): their data is copied once per side, and
    a master forwards a worker's serialized responses as they are; :func:`coalesce` joins a
    step's small messages into one.
Graphs
    :func:`graph_to_proto` (a minitf Graph, or some of its ops, to a GraphDef),
    :func:`proto_to_node_records` (a GraphDef to plain records of minitf values),
    :func:`import_graph_def` (a GraphDef rebuilt as Operations in a minitf Graph), and
    :func:`iter_graph_def_chunks` / :func:`assemble_graph_def` to stream a large GraphDef.
Sessions and errors
    :func:`session_config_to_proto` / :func:`proto_to_session_config`,
    :func:`step_stats_to_proto` / :func:`proto_to_step_stats`,
    :func:`status_from_error` / :func:`error_from_status` (errors travel as gRPC status).

Safety rules for what is received (a server may be reachable by anyone on the network):

* nothing is unpickled or evaluated; dtypes are looked up by name in a fixed whitelist (never
  ``np.dtype(<received string>)``);
* every declared size is checked before memory is allocated for it: ranks above
  :data:`MAX_RANK`, negative dimensions, tensors above ``max_bytes`` (default
  :data:`MAX_TENSOR_BYTES`), content whose length does not match the shape, chunks out of order
  all raise :class:`minitf.errors.InvalidArgumentError`;
* decoded arrays are fresh, writable copies that share nothing with the message.

Byte order on the wire is little-endian; bools are one byte each (any non-zero byte reads as
True); string tensors are lists of ``bytes``.
"""

import heapq
from typing import NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from minitf.distributed import protocol_pb2 as pb
from minitf.framework import dtypes, errors, tensor_shape
from minitf.framework import graph as ops_graph

# -- limits ----------------------------------------------------------------------------------

#: Largest gRPC message a minitf server or client sends or accepts (both directions).
MAX_MESSAGE_BYTES = 4 << 20
#: gRPC channel/server options that apply :data:`MAX_MESSAGE_BYTES`.
GRPC_OPTIONS = (("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES))
#: Default cap on one received tensor (its bytes once decoded).
MAX_TENSOR_BYTES = 1 << 30
#: Default cap on one received (serialized) GraphDef.
MAX_GRAPH_BYTES = 1 << 30
#: Default size of the ``data`` of one TensorChunk and of one graph_def_chunk.
DEFAULT_CHUNK_BYTES = 1 << 20
#: :func:`split_named_tensors` sends tensors inline until they add up to this many bytes.
INLINE_TENSOR_BYTES = 1 << 20
#: Highest rank accepted for a received tensor or shape.
MAX_RANK = 32
#: Error messages are cut to this many UTF-8 bytes before they go into a gRPC status (gRPC
#: carries them in trailing metadata, whose default size limit is 8 KiB).
MAX_ERROR_MESSAGE_BYTES = 4096

#: Attrs that :func:`graph_to_proto` adds to every node and :func:`import_graph_def` consumes.
OUTPUT_TYPES_ATTR = "_output_types"
OUTPUT_SHAPES_ATTR = "_output_shapes"

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

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

# Attr dtypes: every base type above and its reference type ("float32_ref").
_ATTR_DTYPES = {}
for _dt, _ in _TENSOR_DTYPES.values():
    _ATTR_DTYPES[_dt.name] = _dt
    _ATTR_DTYPES[_dt.as_ref.name] = _dt.as_ref


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


def _tensor_dtype(name):
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
        raise _invalid("A tensor's shape must be fully known, got %s."
                       % [(-1 if d is None else d) for d in dims])
    # Count zero-sized dimensions as 1: numpy refuses shapes whose other dimensions are absurd
    # even when the array is empty, so such shapes are refused here, before numpy sees them.
    span = 1
    for d in dims:
        span *= max(d, 1)
        if span * itemsize > max_bytes:
            raise _invalid("Tensor of shape %s with %d-byte elements exceeds the limit of %d "
                           "bytes." % (_short(dims), itemsize, max_bytes))
    n = 1
    for d in dims:
        n *= d
    return tuple(dims), n


# -- tensors ---------------------------------------------------------------------------------

def _normalize(value):
    """(dtype name, ndarray) for a value to send: numeric/bool arrays keep their type (it must be
    a minitf dtype); str/bytes (and arrays of them) become an object array of bytes."""
    arr = np.asarray(value)
    if arr.dtype.kind in "USO":
        flat = arr.reshape(-1)
        out = np.empty(flat.shape, dtype=object)
        for i, x in enumerate(flat.tolist() if arr.dtype.kind != "O" else flat):
            if isinstance(x, str):
                x = x.encode("utf-8")
            elif isinstance(x, (bytes, bytearray, memoryview)):
                x = bytes(x)
            else:
                raise _invalid("Cannot send a tensor element of type %s: only numbers, bools, "
                               "bytes and str travel." % type(x).__name__)
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
    return arr.size * _TENSOR_DTYPES[name][1].itemsize


def _wire_bytes(name, arr):
    """A bytes-like view of a numeric/bool array in wire layout (may share arr's memory)."""
    wire = _TENSOR_DTYPES[name][1]
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
    name, arr = _normalize(value)
    msg = pb.TensorProto(dtype=name)
    _shape_to_proto(arr.shape, msg.shape)
    if name == "string":
        msg.string_val.extend(arr.reshape(-1).tolist())
    else:
        msg.content = bytes(_wire_bytes(name, arr))
    return msg


def _from_wire(buf, name, shape):
    """ndarray of dtype ``name`` and ``shape`` from the raw bytes ``buf`` (length checked)."""
    dt, wire = _TENSOR_DTYPES[name]
    flat = np.frombuffer(buf, dtype=wire)
    if name == "bool":
        return (flat != 0).reshape(shape)
    native = np.dtype(dt.as_numpy_dtype)
    if isinstance(buf, (bytearray, np.ndarray)) and native == wire:
        return flat.reshape(shape)  # the buffer is ours alone: already a writable copy
    return flat.astype(native, copy=True).reshape(shape)


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
            raise _invalid("String tensor of shape %s needs %d elements, got %d."
                           % (list(shape), n, count))
        values = list(msg.string_val)
        if 8 * n + sum(len(v) for v in values) > max_bytes:
            raise _invalid("String tensor exceeds the limit of %d bytes." % max_bytes)
        return _strings_array(values, shape)
    shape, n = _tensor_dims(msg.shape, max_bytes, wire.itemsize)
    if len(msg.string_val):
        raise _invalid("A %s tensor carries its elements in content, not string_val." % name)
    content = msg.content
    expected = n * wire.itemsize
    if len(content) != expected:
        raise _invalid("Tensor of dtype %s and shape %s needs %d bytes of content, got %d."
                       % (name, list(shape), expected, len(content)))
    return _from_wire(content, name, shape)


# -- chunked tensors -------------------------------------------------------------------------

def _string_stream(arr):
    """The byte stream of a string tensor: per element an 8-byte LE length, then the bytes."""
    parts = []
    for x in arr.reshape(-1):
        parts.append(len(x).to_bytes(8, "little"))
        parts.append(x)
    return memoryview(b"".join(parts))


def _tensor_stream(value):
    """(dtype name, shape, bytes-like wire stream) of a value to stream in chunks."""
    name, arr = _normalize(value)
    stream = _string_stream(arr) if name == "string" else _wire_bytes(name, arr)
    return name, arr.shape, stream


def _pieces(name, shape, stream, chunk_bytes):
    """Yields ``(TensorChunk without data, data view)`` per piece of a tensor's byte stream: the
    first carries the header (dtype, shape, total_bytes) and offset 0, each later one only its
    offset.  The data views share the stream's memory."""
    chunk_bytes = int(chunk_bytes)
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive, got %d" % chunk_bytes)
    total = len(stream)
    header = pb.TensorChunk(dtype=name, total_bytes=total, offset=0)
    _shape_to_proto(shape, header.shape)
    yield header, stream[:chunk_bytes]
    for offset in range(chunk_bytes, total, chunk_bytes):
        yield pb.TensorChunk(offset=offset), stream[offset:offset + chunk_bytes]


def iter_tensor_chunks(value, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Yields the serialized :class:`TensorChunk` messages (bytes) that carry ``value``.

    The first chunk has the header (dtype, shape, total_bytes) and offset 0, and at most
    ``chunk_bytes`` of data; each later chunk carries the next at most ``chunk_bytes`` bytes.
    An empty tensor is one header chunk with no data.
    """
    for header, data in _pieces(*_tensor_stream(value), chunk_bytes):
        yield encode_chunk(header, data)


# -- the bytes of streamed tensors, coded by hand ----------------------------------------------
#
# A streamed tensor's bytes are nearly all of what crosses the network in a big step.  Put into
# protobuf objects they would be copied into the message, again when it is serialized, when
# the receiver parses it and when it reads the field.  So the pieces are written and read here
# as the protobuf wire format lays them out (a field is a key varint ``number << 3 | type``,
# then for a length-delimited field a length varint and the bytes), with the data copied once
# on each side; everything else in those messages is still built and parsed by protobuf.  The
# bytes are valid messages of protocol.proto: protobuf parses them (the tests check it).

def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_prefix(number, length):
    """Key and length of a length-delimited field."""
    return _varint(number << 3 | 2) + _varint(length)


def _malformed(what):
    return _invalid("Malformed %s message." % what)


def _read_varint(view, pos, end, what):
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _malformed(what)
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def serialize(message):
    """gRPC serializer of minitf's calls: protobuf messages, or bytes already serialized."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def coalesce(messages, limit=INLINE_TENSOR_BYTES):
    """Serializes a stream of messages of one type, joining runs of small ones into one
    message: a step's small answers (fetched values, step stats of several tasks) then cost
    one gRPC message instead of one each.  Protobuf reads concatenated messages as their merge
    (repeated fields appended, sub-messages merged), so nothing is lost; a message of at least
    ``limit`` bytes goes alone."""
    pending, size = [], 0
    for m in messages:
        raw = serialize(m)
        if pending and size + len(raw) > limit:
            yield b"".join(pending)
            pending, size = [], 0
        if len(raw) >= limit:
            yield raw
        else:
            pending.append(raw)
            size += len(raw)
    if pending:
        yield b"".join(pending)


def _fields(view, what):
    """``(number, value start, end)`` of each top-level field of serialized message bytes
    (``view``, a memoryview); for a length-delimited field the value is its bytes, without
    the length.  Malformed bytes raise InvalidArgumentError."""
    pos, end = 0, len(view)
    while pos < end:
        key, pos = _read_varint(view, pos, end, what)
        kind, start = key & 7, pos
        if kind == 0:
            _, pos = _read_varint(view, pos, end, what)
        elif kind == 1:
            pos += 8
        elif kind == 5:
            pos += 4
        elif kind == 2:
            length, start = _read_varint(view, pos, end, what)
            pos = start + length
        else:
            raise _malformed(what)
        if pos > end:
            raise _malformed(what)
        yield key, start, pos


def split_field(cls, raw, number):
    """Parses serialized ``raw`` as a ``cls`` message except its length-delimited field
    ``number``, whose values come back as views of ``raw`` (no copy): ``(message, [views])``.
    Malformed bytes raise InvalidArgumentError."""
    what = cls.DESCRIPTOR.name
    view = raw if isinstance(raw, memoryview) else memoryview(raw)
    rest, found, field_start = [], [], 0
    for key, start, end in _fields(view, what):
        if key == number << 3 | 2:
            found.append(view[start:end])
        else:
            rest.append(view[field_start:end])
        field_start = end
    try:
        return cls.FromString(b"".join(rest)), found
    except DecodeError:
        raise _malformed(what) from None


def encode_chunk(header, data):
    """A serialized TensorChunk: ``header`` (a TensorChunk without data) plus ``data``."""
    return b"".join(_chunk_pieces(header, data))


def _chunk_pieces(header, data):
    return [header.SerializeToString(), _field_prefix(_CHUNK_DATA, len(data)), data]


def decode_chunk(raw):
    """``(TensorChunk without data, data view)`` of a serialized TensorChunk (or of a message,
    serialized first)."""
    if isinstance(raw, pb.TensorChunk):
        raw = raw.SerializeToString()
    chunk, data = split_field(pb.TensorChunk, raw, _CHUNK_DATA)
    if len(data) > 1:
        raise _malformed("TensorChunk")
    return chunk, data[0] if data else memoryview(b"")


def _encode_part(number, name, header, data):
    """A message whose length-delimited field ``number`` holds one TensorPart."""
    name = name.encode("utf-8")
    chunk = _chunk_pieces(header, data)
    part = [_field_prefix(_PART_NAME, len(name)), name,
            _field_prefix(_PART_CHUNK, sum(len(c) for c in chunk))] + chunk
    return b"".join([_field_prefix(number, sum(len(p) for p in part))] + part)


def _decode_parts(views):
    """``[(name, TensorChunk without data, data view)]`` of serialized TensorParts."""
    out = []
    for v in views:
        part, chunks = split_field(pb.TensorPart, v, _PART_CHUNK)
        if len(chunks) != 1:
            raise _malformed("TensorPart")
        out.append((part.name,) + decode_chunk(chunks[0]))
    return out


_CHUNK_DATA = pb.TensorChunk.DESCRIPTOR.fields_by_name["data"].number
_PART_NAME = pb.TensorPart.DESCRIPTOR.fields_by_name["name"].number
_PART_CHUNK = pb.TensorPart.DESCRIPTOR.fields_by_name["chunk"].number


class _ChunkAssembler:
    """Rebuilds one tensor from its chunks, checking every declared size before trusting it."""

    def __init__(self, header, data, max_bytes):
        if not header.dtype:
            raise _invalid("The first chunk of a tensor must carry its header (dtype, shape, "
                           "total_bytes).")
        self.name = header.dtype
        dt, wire = _tensor_dtype(self.name)
        if not header.HasField("shape"):
            raise _invalid("The header chunk of a %s tensor has no shape." % self.name)
        total = header.total_bytes
        if self.name == "string":
            self.shape, self.n = _tensor_dims(header.shape, max_bytes, 8)
            if total < 8 * self.n:
                raise _invalid("A string tensor of %d elements needs at least %d bytes, header "
                               "says %d." % (self.n, 8 * self.n, total))
        else:
            self.shape, self.n = _tensor_dims(header.shape, max_bytes, wire.itemsize)
            if total != self.n * wire.itemsize:
                raise _invalid("Tensor of dtype %s and shape %s has %d bytes, header says %d."
                               % (self.name, list(self.shape), self.n * wire.itemsize, total))
        if total > max_bytes:
            raise _invalid("Tensor of %d bytes exceeds the limit of %d bytes."
                           % (total, max_bytes))
        if header.offset != 0:
            raise _invalid("The header chunk must have offset 0, got %d." % header.offset)
        self.total = total
        # np.empty, not bytearray(total): no zero-filling pass over memory every byte of which
        # the chunks overwrite (finish() checks that they all came)
        self.buf = np.empty(total, dtype=np.uint8)
        self._view = memoryview(self.buf)
        self.pos = 0
        self._put(data)

    def _put(self, data):
        end = self.pos + len(data)
        if end > self.total:
            raise _invalid("Chunks carry more than the %d bytes the header announced."
                           % self.total)
        self._view[self.pos:end] = data
        self.pos = end

    @property
    def complete(self):
        return self.pos == self.total

    def add(self, chunk, data):
        if chunk.dtype or chunk.HasField("shape") or chunk.total_bytes:
            raise _invalid("Only the first chunk of a tensor may carry a header.")
        if not len(data):
            raise _invalid("A chunk after the header must carry data.")
        if chunk.offset != self.pos:
            raise _invalid("Chunk at offset %d, expected %d: chunks must be contiguous and in "
                           "order." % (chunk.offset, self.pos))
        self._put(data)

    def finish(self):
        if self.pos != self.total:
            raise _invalid("Tensor stream ended after %d of %d bytes." % (self.pos, self.total))
        if self.name != "string":
            return _from_wire(self.buf, self.name, self.shape)
        values, view, pos = [], memoryview(self.buf), 0
        for _ in range(self.n):
            if pos + 8 > self.total:
                raise _invalid("String tensor stream is truncated.")
            length = int.from_bytes(view[pos:pos + 8], "little")
            pos += 8
            if length > self.total - pos:
                raise _invalid("String element of %d bytes overruns the stream." % length)
            values.append(view[pos:pos + length])
            pos += length
        if pos != self.total:
            raise _invalid("String tensor stream has %d bytes after its %d elements."
                           % (self.total - pos, self.n))
        return _strings_array(values, self.shape)


def assemble_chunks(chunks, max_bytes=MAX_TENSOR_BYTES):
    """The ndarray carried by an iterable of serialized :class:`TensorChunk` messages (as
    iter_tensor_chunks made them; TensorChunk objects are accepted too).

    Checks the header (dtype whitelist, shape, total size against the shape and ``max_bytes``)
    before allocating, then that chunks are contiguous, in order and exactly fill the total.
    Every violation raises InvalidArgumentError.
    """
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        raise _invalid("Empty tensor stream: no header chunk.")
    asm = _ChunkAssembler(*decode_chunk(first), max_bytes)
    for chunk in it:
        asm.add(*decode_chunk(chunk))
    return asm.finish()


# -- named tensors of a step (feeds, fetches, sends, recvs) -----------------------------------

def _field_number(cls, field):
    return cls.DESCRIPTOR.fields_by_name[field].number


def split_named_tensors(items, inline_bytes=INLINE_TENSOR_BYTES,
                        chunk_bytes=DEFAULT_CHUNK_BYTES, wrap=(pb.RunStepResponse,
                                                              "tensor_part")):
    """Splits ``(name, value)`` pairs into what fits in one message and what is streamed.

    Returns ``(inline, parts)``: a list of :class:`NamedTensor` (tensors kept while their sizes
    add up to at most ``inline_bytes``) and an iterator over the others, chunk by chunk.  Put
    ``inline`` in the first message of a stream (RunStepRequest.feed, RunGraphRequest.send ...)
    and send the parts as the following messages.

    ``wrap=(message class, repeated TensorPart field)`` (e.g. ``(RunGraphResponse,
    "recv_part")``): each part comes as a serialized message of that class (bytes) holding one
    TensorPart, written by hand so the chunk's bytes are copied once (see ``serialize``).
    """
    number = _field_number(*wrap)
    inline, large, budget = [], [], inline_bytes
    for name, value in items:
        dname, arr = _normalize(value)
        size = _payload_bytes(dname, arr)
        if size <= budget:
            inline.append(pb.NamedTensor(name=name, tensor=tensor_to_proto(arr)))
            budget -= size
        else:
            large.append((name, arr))
    if int(chunk_bytes) < 1:
        raise ValueError("chunk_bytes must be positive, got %d" % chunk_bytes)

    def parts():
        for name, arr in large:
            for header, data in _pieces(*_tensor_stream(arr), chunk_bytes):
                yield _encode_part(number, name, header, data)
    return inline, parts()


class NamedTensorReceiver:
    """Collects the tensors of one streamed request or response into ``{name: ndarray}``.

    Feed it every serialized message (``add_message``), or every :class:`NamedTensor`
    (``add_tensor``) and tensor part (``add_part``) in arrival order, then call ``finish()``.
    The parts of one tensor come in order (parts of different tensors may interleave: a master
    forwards the streams of several tasks); names must be unique; no tensor may exceed
    ``max_tensor_bytes`` and all of them together not ``max_total_bytes``.  Violations raise
    InvalidArgumentError.
    """

    def __init__(self, max_tensor_bytes=MAX_TENSOR_BYTES, max_total_bytes=MAX_TENSOR_BYTES):
        self.max_tensor_bytes = max_tensor_bytes
        self.max_total_bytes = max_total_bytes
        self._values = {}
        self._open = {}     # name -> _ChunkAssembler of a tensor still streaming
        self._total = 0

    def _claim(self, name, nbytes):
        if name in self._values or name in self._open:
            raise _invalid("Tensor %s was sent twice." % _short(name))
        self._total += nbytes
        if self._total > self.max_total_bytes:
            raise _invalid("The tensors of this message exceed the limit of %d bytes in all."
                           % self.max_total_bytes)

    def add_message(self, raw, cls, tensors_field, parts_field):
        """Adds the tensors of one serialized ``cls`` message whose ``tensors_field`` holds
        NamedTensors and ``parts_field`` TensorParts; returns the rest of the message parsed
        (header fields, step stats ...), the parts field left empty."""
        msg, views = split_field(cls, raw, _field_number(cls, parts_field))
        for t in getattr(msg, tensors_field):
            self.add_tensor(t)
        for name, chunk, data in _decode_parts(views):
            self.add_part(name, chunk, data)
        return msg

    def add_tensor(self, named):
        """Adds a NamedTensor sent whole."""
        self._claim(named.name, named.tensor.ByteSize())
        self._values[named.name] = proto_to_tensor(
            named.tensor, min(self.max_tensor_bytes, self.max_total_bytes))

    def add_part(self, name, chunk, data=None):
        """Adds one piece of tensor ``name``: a TensorChunk, its data given apart (or in the
        chunk); the first piece of a tensor carries its header."""
        data = chunk.data if data is None else data
        asm = self._open.get(name)
        if asm is not None:
            asm.add(chunk, data)
        else:
            remaining = max(self.max_total_bytes - self._total, 0)
            self._claim(name, 0)
            asm = _ChunkAssembler(chunk, data, min(self.max_tensor_bytes, remaining))
            self._total += asm.total
            self._open[name] = asm
        if asm.complete:
            self._values[name] = asm.finish()
            del self._open[name]

    def finish(self):
        """``{name: ndarray}`` in the order they completed; InvalidArgumentError if a tensor is
        incomplete."""
        for name, asm in self._open.items():
            raise _invalid("Tensor %s ended after %d of %d bytes."
                           % (_short(name), asm.pos, asm.total))
        return dict(self._values)


# -- attrs -----------------------------------------------------------------------------------

_LIST_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor", "u")


def _scalar_kind(v):
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, dtypes.DType):
        return "type"
    if isinstance(v, tensor_shape.TensorShape):
        return "shape"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    if isinstance(v, bytes):
        return "s"
    if isinstance(v, str):
        return "u"
    if isinstance(v, np.ndarray):
        return "tensor"
    return None


def _check_int64(v, where):
    v = int(v)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise _invalid("%s: integer %d does not fit in 64 bits." % (where, v))
    return v


def _attr_to_proto(value, where):
    msg = pb.AttrValue()
    if value is None:
        return msg
    kind = _scalar_kind(value)
    if kind == "b":
        msg.b = bool(value)
    elif kind == "type":
        msg.type = value.name
    elif kind == "shape":
        _shape_to_proto(value, msg.shape)
    elif kind == "i":
        msg.i = _check_int64(value, where)
    elif kind == "f":
        msg.f = float(value)
    elif kind == "s":
        msg.s = value
    elif kind == "u":
        msg.u = value
    elif kind == "tensor":
        msg.tensor.CopyFrom(tensor_to_proto(value))
    elif isinstance(value, (list, tuple)):
        msg.list.SetInParent()
        kinds = {_scalar_kind(x) for x in value}
        if len(kinds) > 1 or None in kinds:
            raise _invalid("%s: a list attr must hold values of one supported kind, got %s."
                           % (where, sorted(type(x).__name__ for x in value)))
        if value:
            kind = kinds.pop()
            field = getattr(msg.list, kind)
            for x in value:
                if kind == "type":
                    field.append(x.name)
                elif kind == "shape":
                    _shape_to_proto(x, field.add())
                elif kind == "tensor":
                    field.add().CopyFrom(tensor_to_proto(x))
                elif kind == "i":
                    field.append(_check_int64(x, where))
                elif kind == "f":
                    field.append(float(x))
                elif kind == "b":
                    field.append(bool(x))
                else:
                    field.append(x)
    else:
        raise _invalid("%s: a value of type %s cannot be sent." % (where, type(value).__name__))
    return msg


def _shape_from_proto(msg):
    return tensor_shape.TensorShape(_dims_from_proto(msg))


def _attr_from_proto(msg, max_tensor_bytes):
    which = msg.WhichOneof("value")
    if which is None:
        return None
    if which in ("s", "u", "f", "b"):
        v = getattr(msg, which)
        return bytes(v) if which == "s" else v
    if which == "i":
        return int(msg.i)
    if which == "type":
        return _dtype_from_name(msg.type)
    if which == "shape":
        return _shape_from_proto(msg.shape)
    if which == "tensor":
        return proto_to_tensor(msg.tensor, max_tensor_bytes)
    lst = msg.list
    used = [k for k in _LIST_KINDS if len(getattr(lst, k))]
    if len(used) > 1:
        raise _invalid("A list attr mixes kinds %s." % used)
    if not used:
        return []
    kind = used[0]
    items = getattr(lst, kind)
    if kind == "type":
        return [_dtype_from_name(x) for x in items]
    if kind == "shape":
        return [_shape_from_proto(x) for x in items]
    if kind == "tensor":
        return [proto_to_tensor(x, max_tensor_bytes) for x in items]
    if kind == "s":
        return [bytes(x) for x in items]
    return list(items)


# -- graphs ----------------------------------------------------------------------------------

def _topological(ops):
    """``ops`` in creation order, except that an op follows every op of ``ops`` it depends on
    (a control input added after creation can point forward)."""
    chosen = set(ops)
    deps = {op: {t.op for t in op.inputs if t.op in chosen} |
            {c for c in op.control_inputs if c in chosen} for op in ops}
    users = {op: [] for op in ops}
    for op, ds in deps.items():
        for d in ds:
            users[d].append(op)
    waiting = {op: len(ds) for op, ds in deps.items()}
    position = {op: i for i, op in enumerate(ops)}
    ready = [(op._id, i, op) for i, op in enumerate(ops) if not waiting[op]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, op = heapq.heappop(ready)
        out.append(op)
        for u in users[op]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, (u._id, position[u], u))
    if len(out) != len(ops):
        raise _invalid("The graph has a cycle through %s."
                       % sorted(op.name for op in ops if waiting[op])[:5])
    return out


def _node_to_proto(op, msg):
    nd = op.node_def
    msg.name, msg.op = nd.name, nd.op
    msg.input.extend(nd.input)
    msg.device = nd.device or ""
    for key in sorted(nd.attr):
        if key in (OUTPUT_TYPES_ATTR, OUTPUT_SHAPES_ATTR):
            continue
        msg.attr[key].CopyFrom(_attr_to_proto(nd.attr[key], "attr %r of node %r"
                                              % (key, nd.name)))
    msg.attr[OUTPUT_TYPES_ATTR].CopyFrom(_attr_to_proto([t.dtype for t in op.outputs], ""))
    msg.attr[OUTPUT_SHAPES_ATTR].CopyFrom(_attr_to_proto([t.shape for t in op.outputs], ""))


def graph_to_proto(graph_or_ops, since_version=0):
    """A :class:`GraphDef` of a minitf Graph (or of a list of its Operations).

    Nodes come in topological order (creation order, adjusted only where a later control edge
    requires it) with every attr encoded, plus ``_output_types`` / ``_output_shapes`` so that
    :func:`import_graph_def` can rebuild the output tensors.  ``version`` is the number of ops the
    graph has; ``since_version=n`` keeps only ops created after the first ``n`` (what a client
    sends to extend a session it created at version ``n``).  Note: a control edge added later to
    an op that was already sent is not part of an extension.
    """
    if isinstance(graph_or_ops, ops_graph.Graph):
        graph, ops = graph_or_ops, graph_or_ops.get_operations()
    else:
        ops = list(graph_or_ops)
        graph = ops[0].graph if ops else None
        for op in ops:
            if not isinstance(op, ops_graph.Operation):
                raise TypeError("graph_to_proto needs a Graph or Operations, got %s"
                                % type(op).__name__)
            if op.graph is not graph:
                raise ValueError("graph_to_proto: the ops come from different graphs")
    version = len(graph.get_operations()) if graph is not None else since_version
    ops = [op for op in ops if op._id >= since_version]
    msg = pb.GraphDef(version=version)
    for op in _topological(ops):
        _node_to_proto(op, msg.node.add())
    return msg


class NodeRecord(NamedTuple):
    """One received node, decoded to minitf values (DType, TensorShape, ndarray, lists ...).

    ``inputs`` are NodeDef input strings (``"x"``, ``"x:1"``, ``"^ctrl"``); ``attrs`` excludes
    ``_output_types`` / ``_output_shapes``, which become ``output_types`` (list of DType, or None
    when absent) and ``output_shapes`` (list of TensorShape, or None).
    """
    name: str
    op: str
    inputs: list
    device: str
    attrs: dict
    output_types: list
    output_shapes: list

    def node_def(self):
        """The record as minitf's :class:`minitf.NodeDef`."""
        return ops_graph.NodeDef(self.name, self.op, list(self.inputs), self.device,
                                 dict(self.attrs))


def _node_record(node, max_tensor_bytes):
    name = node.name
    if not ops_graph._VALID_OP_NAME.match(name):
        raise _invalid("Node name %s is not a valid op name." % _short(name))
    if not node.op:
        raise _invalid("Node %s has no op type." % name)
    attrs = {}
    for key, value in sorted(node.attr.items()):
        try:
            attrs[key] = _attr_from_proto(value, max_tensor_bytes)
        except errors.InvalidArgumentError as e:
            raise _invalid("attr %s of node %s: %s" % (_short(key), name, e.message)) from None
    out_types = attrs.pop(OUTPUT_TYPES_ATTR, None)
    out_shapes = attrs.pop(OUTPUT_SHAPES_ATTR, None)
    if out_types is not None and (not isinstance(out_types, list) or
                                  not all(isinstance(t, dtypes.DType) for t in out_types)):
        raise _invalid("Node %s: %s must be a list of dtypes." % (name, OUTPUT_TYPES_ATTR))
    if out_shapes is not None:
        if not isinstance(out_shapes, list) or not all(
                isinstance(s, tensor_shape.TensorShape) for s in out_shapes):
            raise _invalid("Node %s: %s must be a list of shapes." % (name, OUTPUT_SHAPES_ATTR))
        if out_types is None or len(out_shapes) != len(out_types):
            raise _invalid("Node %s: %s and %s differ in length."
                           % (name, OUTPUT_TYPES_ATTR, OUTPUT_SHAPES_ATTR))
    return NodeRecord(name, node.op, list(node.input), node.device, attrs, out_types,
                      out_shapes)


def proto_to_node_records(graph_def, max_tensor_bytes=MAX_TENSOR_BYTES):
    """The nodes of a received :class:`GraphDef` as :class:`NodeRecord` s, in order.

    Attr values are decoded through the whitelists (dtype names, shapes, tensors checked as in
    :func:`proto_to_tensor`); InvalidArgumentError names the node and attr that failed.
    """
    return [_node_record(node, max_tensor_bytes) for node in graph_def.node]


def _parse_input(text, node):
    """('data' | 'control', op name, output index) of a NodeDef input string."""
    if text.startswith("^"):
        src, kind, index = text[1:], "control", None
    else:
        kind = "data"
        src, sep, idx = text.rpartition(":")
        if not sep:
            src, index = text, 0
        elif idx.isdigit() and len(idx) < 10:  # isdigit: no sign, no spaces
            index = int(idx)
        else:
            raise _invalid("Node %s has a malformed input %s." % (node, _short(text)))
    if not ops_graph._VALID_OP_NAME.match(src):
        raise _invalid("Node %s has a malformed input %s." % (node, _short(text)))
    return kind, src, index


def import_graph_def(graph_def, graph=None, max_tensor_bytes=MAX_TENSOR_BYTES):
    """Rebuilds the nodes of ``graph_def`` as Operations of ``graph`` (default: the default graph).

    Every op keeps its name, type, device, attrs (``_class`` included), data inputs, control
    inputs and output dtypes/shapes: the graph's device, colocation, container and
    control-dependency blocks do not apply.  Inputs may name nodes earlier in ``graph_def`` or
    ops ``graph`` already has (a session extension).  Everything is checked before the first op
    is created, so a rejected GraphDef leaves ``graph`` unchanged.  Returns the new Operations.
    The graph's build-time stacks are set aside during the import, so do not build ops in the
    same graph from another thread meanwhile (servers import into a graph of their own).

    Raises InvalidArgumentError: unregistered op type, input naming an unknown node (or a later
    one: nodes must be in topological order) or a missing output, duplicate node name, missing
    ``_output_types``, or any malformed attr.
    """
    from minitf.ops import op_def as op_def_mod   # the op registry lives above the graph layer
    graph = ops_graph.get_default_graph() if graph is None else graph
    if graph.finalized:
        raise RuntimeError("Graph is finalized and cannot be modified.")
    records = proto_to_node_records(graph_def, max_tensor_bytes)

    n_outputs = {op.name: len(op.outputs) for op in graph.get_operations()}
    plan = []
    for r in records:
        if r.name in n_outputs:
            raise _invalid("Duplicate node name in graph: %s." % _short(r.name))
        try:
            op_def = op_def_mod.get_op_def(r.op)
        except KeyError:
            raise _invalid("Op type not registered %s (node %s)." % (_short(r.op), r.name)) \
                from None
        if r.output_types is None:
            raise _invalid("Node %s has no %s attr: import only GraphDefs made by "
                           "graph_to_proto." % (r.name, OUTPUT_TYPES_ATTR))
        shapes = r.output_shapes or [tensor_shape.unknown_shape()] * len(r.output_types)
        data, control = [], []
        for text in r.inputs:
            kind, src, index = _parse_input(text, r.name)
            if src not in n_outputs:
                raise _invalid("Node %s has input %s, which names no earlier node."
                               % (r.name, _short(text)))
            if kind == "control":
                control.append(src)
                continue
            if control:
                raise _invalid("Node %s has data input %s after a control input."
                               % (r.name, _short(text)))
            if index >= n_outputs[src]:
                raise _invalid("Node %s has input %s, but %s has %d outputs."
                               % (r.name, _short(text), src, n_outputs[src]))
            data.append((src, index))
        n_outputs[r.name] = len(r.output_types)
        plan.append((r, op_def, list(zip(r.output_types, shapes)), data, control))

    created = []
    with graph._lock:
        saved = (graph._device_function_stack, graph._colocation_stack,
                 graph._control_dependencies_stack, graph._default_attrs, graph._container,
                 graph._name_stack)
        graph._device_function_stack, graph._colocation_stack = [], []
        graph._control_dependencies_stack, graph._default_attrs = [], {}
        graph._container, graph._name_stack = "", ""
        try:
            for r, op_def, specs, data, control in plan:
                inputs = [graph.get_operation_by_name(src).outputs[i] for src, i in data]
                op = graph.create_op(r.op, inputs, specs, r.name + "/", dict(r.attrs),
                                     op_def=op_def)
                op._device = r.device
                op._attrs = dict(r.attrs)
                op._control_inputs = []
                for src in control:
                    op._add_control_input(graph.get_operation_by_name(src))
                _mark_name_used(graph, r.name)
                created.append(op)
        finally:
            (graph._device_function_stack, graph._colocation_stack,
             graph._control_dependencies_stack, graph._default_attrs, graph._container,
             graph._name_stack) = saved
    return created


def _mark_name_used(graph, name):
    """Later ops built in ``graph`` get fresh names (``add_1`` after an imported ``add``), and
    scopes of imported names count as used too."""
    parts = name.split("/")
    for i in range(1, len(parts) + 1):
        graph._names_in_use.setdefault("/".join(parts[:i]).lower(), 1)


def iter_graph_def_chunks(graph_def, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """The serialized ``graph_def`` in pieces of at most ``chunk_bytes`` (at least one piece)."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive, got %d" % chunk_bytes)
    data = graph_def.SerializeToString()
    yield data[:chunk_bytes]
    for offset in range(chunk_bytes, len(data), chunk_bytes):
        yield data[offset:offset + chunk_bytes]


def assemble_graph_def(pieces, max_bytes=MAX_GRAPH_BYTES):
    """The GraphDef whose serialization is the concatenation of ``pieces`` (bytes).

    InvalidArgumentError if the pieces add up to more than ``max_bytes`` (checked as they come)
    or do not parse.
    """
    buf = bytearray()
    for piece in pieces:
        if len(buf) + len(piece) > max_bytes:
            raise _invalid("GraphDef exceeds the limit of %d bytes." % max_bytes)
        buf += piece
    try:
        return pb.GraphDef.FromString(bytes(buf))
    except DecodeError as e:
        raise _invalid("Malformed GraphDef: %s" % e) from None


# -- session config and step stats -----------------------------------------------------------

def session_config_to_proto(config=None):
    """The :class:`SessionConfig` of a ``tf.ConfigProto`` (None: all defaults)."""
    msg = pb.SessionConfig()
    if config is None:
        return msg
    msg.allow_soft_placement = bool(config.allow_soft_placement)
    msg.log_device_placement = bool(config.log_device_placement)
    msg.operation_timeout_in_ms = int(config.operation_timeout_in_ms)
    msg.device_filters.extend(config.device_filters)
    msg.isolate_session_state = bool(config.isolate_session_state)
    return msg


def proto_to_session_config(msg):
    """A ``tf.ConfigProto`` with the fields a :class:`SessionConfig` carries."""
    from minitf.runtime.config_proto import ConfigProto
    return ConfigProto(allow_soft_placement=msg.allow_soft_placement,
                       log_device_placement=msg.log_device_placement,
                       operation_timeout_in_ms=msg.operation_timeout_in_ms,
                       device_filters=list(msg.device_filters),
                       isolate_session_state=msg.isolate_session_state)


def step_stats_to_proto(stats):
    """A :class:`StepStatsProto` of ``run_metadata.step_stats`` (minitf.runtime.step_stats)."""
    msg = pb.StepStatsProto()
    for dev in stats.dev_stats:
        d = msg.dev_stats.add(device=dev.device)
        for ns in dev.node_stats:
            n = d.node_stats.add(
                node_name=ns.node_name, op_type=ns.op_type,
                all_start_micros=int(ns.all_start_micros),
                op_start_rel_micros=int(ns.op_start_rel_micros),
                op_end_rel_micros=int(ns.op_end_rel_micros),
                all_end_rel_micros=int(ns.all_end_rel_micros),
                scheduled_micros=int(ns.scheduled_micros or 0), thread_id=int(ns.thread_id),
                thread_name=ns.thread_name or "", pool=ns.pool or "",
                timeline_label=ns.timeline_label or "")
            for out in ns.output:
                o = n.output.add(slot=out.slot, dtype=out.dtype or "",
                                 requested_bytes=int(out.requested_bytes))
                _shape_to_proto(out.shape, o.shape)
            for c in ns.chunks:
                n.chunks.add(index=c.index, thread_id=int(c.thread_id),
                             thread_name=c.thread_name or "", start_micros=int(c.start_micros),
                             end_micros=int(c.end_micros))
    for t in stats.transfers:
        msg.transfers.add(tensor_name=t.tensor_name, src_node=t.src_node, dst_node=t.dst_node,
                          src_device=t.src_device, dst_device=t.dst_device, bytes=int(t.bytes),
                          micros=int(t.micros), has_start_micros=t.start_micros is not None,
                          start_micros=int(t.start_micros or 0))
    return msg


def proto_to_step_stats(msg):
    """``config_proto.StepStats`` of the minitf record classes from a :class:`StepStatsProto`."""
    from minitf.runtime import step_stats as ss
    from minitf.runtime.config_proto import StepStats
    out = StepStats()
    for d in msg.dev_stats:
        nodes = []
        for n in d.node_stats:
            outputs = []
            for o in n.output:
                dims = _dims_from_proto(o.shape)
                outputs.append(ss.TensorOutput(o.slot, o.dtype,
                                               None if dims is None else tuple(dims),
                                               o.requested_bytes))
            chunks = [ss.ChunkStats(c.index, c.thread_id, c.thread_name, c.start_micros,
                                    c.end_micros) for c in n.chunks]
            ns = ss.NodeExecStats(n.node_name, n.op_type, n.all_start_micros,
                                  n.all_end_rel_micros, n.thread_id, n.thread_name, n.pool,
                                  n.timeline_label, scheduled_micros=n.scheduled_micros,
                                  output=outputs, chunks=chunks)
            ns.op_start_rel_micros = n.op_start_rel_micros
            ns.op_end_rel_micros = n.op_end_rel_micros
            nodes.append(ns)
        out.dev_stats.append(ss.DeviceStepStats(d.device, nodes))
    for t in msg.transfers:
        out.transfers.append(ss.TransferStats(t.tensor_name, t.src_node, t.dst_node,
                                              t.src_device, t.dst_device, t.bytes, t.micros,
                                              t.start_micros if t.has_start_micros else None))
    return out


# -- errors as gRPC status -------------------------------------------------------------------

def _cut_message(message):
    data = message.encode("utf-8", "replace")
    if len(data) <= MAX_ERROR_MESSAGE_BYTES:
        return message
    marker = " [... truncated]"
    keep = MAX_ERROR_MESSAGE_BYTES - len(marker)
    return data[:keep].decode("utf-8", "ignore") + marker


def status_from_error(exc):
    """``(grpc.StatusCode, details)`` for an exception a servicer caught: an OpError keeps its
    code; anything else (a bug of minitf's, not a failure of the step) is INTERNAL with
    ``"<Type>: <text>"``, whichever call (RunStep, RunSteps ...) reports it.  Use as
    ``context.abort(*wire.status_from_error(e))``."""
    import grpc
    exc = errors.as_op_error(exc)
    code, message = exc.error_code, exc.message
    by_number = {c.value[0]: c for c in grpc.StatusCode}
    status = by_number.get(code, grpc.StatusCode.UNKNOWN)
    if status is grpc.StatusCode.OK:
        status = grpc.StatusCode.UNKNOWN
    return status, _cut_message(message or "")


def error_from_status(code, details):
    """The minitf OpError for a failed RPC's status (``grpc.StatusCode`` or its number), e.g.
    ``raise wire.error_from_status(rpc_error.code(), rpc_error.details())``."""
    number = code.value[0] if hasattr(code, "value") else int(code)
    try:
        cls = errors.exception_type_from_error_code(number)
    except KeyError:  # OK or a code minitf does not know
        cls = errors.UnknownError
    return cls(None, None, _cut_message(details or ""))


# -- reading client-streamed requests ---------------------------------------------------------

def read_graph_stream(request_iterator, what):
    """(first message, GraphDef) of a streamed request whose messages carry
    ``graph_def_chunk`` pieces (CreateSession, ExtendSession, RegisterGraph)."""
    header, pieces = None, []
    for msg in request_iterator:
        if header is None:
            header = msg
        pieces.append(msg.graph_def_chunk)
    if header is None:
        raise errors.InvalidArgumentError(None, None, "Empty %s request." % what)
    return header, assemble_graph_def(pieces)


def read_tensor_stream(request_iterator, what, cls, tensors_field, parts_field):
    """(first message, {name: ndarray}) of a streamed request of serialized ``cls`` messages
    carrying inline NamedTensors in ``tensors_field`` and TensorParts in ``parts_field``
    (RunStep, RunGraph)."""
    header = None
    receiver = NamedTensorReceiver()
    for raw in request_iterator:
        msg = receiver.add_message(raw, cls, tensors_field, parts_field)
        if header is None:
            header = msg
    if header is None:
        raise errors.InvalidArgumentError(None, None, "Empty %s request." % what)
    return header, receiver.finish()
