"""Tensors streamed in pieces, coded by hand (one copy of the data per side), and the named
tensors of a step: what fits inline, what is streamed in parts, and their reassembly.

Book section: "The Master and Worker Services" (how a 64 MiB variable crosses the network).
"""

import functools
import itertools

import numpy as np
from google.protobuf.message import DecodeError

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire.limits import (
    DEFAULT_CHUNK_BYTES,
    INLINE_TENSOR_BYTES,
    MAX_TENSOR_BYTES,
    SMALL_TENSOR_BYTES,
)
from minitf.distributed.wire.tensors import (
    _from_wire,
    _invalid,
    _normalize,
    _payload_bytes,
    _shape_to_proto,
    _short,
    _strings_array,
    _tensor_dims,
    _tensor_dtype,
    _wire_bytes,
    fill_tensor_proto,
    proto_to_tensor,
)

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


def malformed(what):
    return _invalid("Malformed %s message." % what)


def _read_varint(view, pos, end, what):
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise malformed(what)
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def serialize(message):
    """gRPC serializer of minitf's calls: protobuf messages, or bytes already serialized."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def coalesce(messages, limit=INLINE_TENSOR_BYTES, alone=SMALL_TENSOR_BYTES):
    """Serializes a stream of messages of one type, joining runs of small ones into one
    message: a step's small answers (fetched values, step stats of several tasks) then cost
    one gRPC message instead of one each.  Protobuf reads concatenated messages as their merge
    (repeated fields appended, sub-messages merged), so nothing is lost.  Joined messages add
    up to at most ``limit`` bytes; one of more than ``alone`` bytes (a tensor's part) goes as it
    is, since joining would copy it; an empty one (the merge of nothing) is dropped unless the
    stream has nothing else."""
    pending, size, sent, empty = [], 0, False, False
    for m in messages:
        raw = serialize(m)
        if not raw:
            empty = True
            continue
        sent = True
        if pending and (size + len(raw) > limit or len(raw) > alone):
            yield b"".join(pending)
            pending, size = [], 0
        if len(raw) > alone:
            yield raw
        else:
            pending.append(raw)
            size += len(raw)
    if pending:
        yield b"".join(pending)
    elif empty and not sent:
        yield b""


def message_fields(view, what):
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
            raise malformed(what)
        if pos > end:
            raise malformed(what)
        yield key, start, pos


def split_field(cls, raw, number):
    """Parses serialized ``raw`` as a ``cls`` message except its length-delimited field
    ``number``, whose values come back as views of ``raw`` (no copy): ``(message, [views])``.
    Malformed bytes raise InvalidArgumentError.

    When ``number`` is a repeated field, a message of at most ``SMALL_TENSOR_BYTES`` (a step's
    request or answer of small values: most of them) is parsed by protobuf in one call, a few
    microseconds less than walking its fields here; only if it holds parts is it walked."""
    what = cls.DESCRIPTOR.name
    repeated = _repeated_field_name(cls, number)
    if repeated is not None and len(raw) <= SMALL_TENSOR_BYTES:
        try:
            msg = cls.FromString(raw)
        except DecodeError:
            raise malformed(what) from None
        if not len(getattr(msg, repeated)):
            return msg, []
    view = raw if isinstance(raw, memoryview) else memoryview(raw)
    rest, found, field_start = [], [], 0
    for key, start, end in message_fields(view, what):
        if key == number << 3 | 2:
            found.append(view[start:end])
        else:
            rest.append(view[field_start:end])
        field_start = end
    try:
        return cls.FromString(b"".join(rest)), found
    except DecodeError:
        raise malformed(what) from None


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
        raise malformed("TensorChunk")
    return chunk, data[0] if data else memoryview(b"")


def _encode_part(number, name, header, data):
    """A message whose length-delimited field ``number`` holds one TensorPart."""
    name = name.encode("utf-8")
    chunk = _chunk_pieces(header, data)
    part = [
        _field_prefix(_PART_NAME, len(name)),
        name,
        _field_prefix(_PART_CHUNK, sum(len(c) for c in chunk)),
    ] + chunk
    return b"".join([_field_prefix(number, sum(len(p) for p in part))] + part)


def _decode_parts(views):
    """``[(name, TensorChunk without data, data view)]`` of serialized TensorParts."""
    out = []
    for v in views:
        part, chunks = split_field(pb.TensorPart, v, _PART_CHUNK)
        if len(chunks) != 1:
            raise malformed("TensorPart")
        out.append((part.name,) + decode_chunk(chunks[0]))
    return out


_CHUNK_DATA = pb.TensorChunk.DESCRIPTOR.fields_by_name["data"].number
_PART_NAME = pb.TensorPart.DESCRIPTOR.fields_by_name["name"].number
_PART_CHUNK = pb.TensorPart.DESCRIPTOR.fields_by_name["chunk"].number


class _ChunkAssembler:
    """Rebuilds one tensor from its chunks, checking every declared size before trusting it."""

    def __init__(self, header, data, max_bytes):
        if not header.dtype:
            raise _invalid(
                "The first chunk of a tensor must carry its header (dtype, shape, total_bytes)."
            )
        self.name = header.dtype
        dt, wire = _tensor_dtype(self.name)
        if not header.HasField("shape"):
            raise _invalid("The header chunk of a %s tensor has no shape." % self.name)
        total = header.total_bytes
        if self.name == "string":
            self.shape, self.n = _tensor_dims(header.shape, max_bytes, 8)
            if total < 8 * self.n:
                raise _invalid(
                    "A string tensor of %d elements needs at least %d bytes, header "
                    "says %d." % (self.n, 8 * self.n, total)
                )
        else:
            self.shape, self.n = _tensor_dims(header.shape, max_bytes, wire.itemsize)
            if total != self.n * wire.itemsize:
                raise _invalid(
                    "Tensor of dtype %s and shape %s has %d bytes, header says %d."
                    % (self.name, list(self.shape), self.n * wire.itemsize, total)
                )
        if total > max_bytes:
            raise _invalid("Tensor of %d bytes exceeds the limit of %d bytes." % (total, max_bytes))
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
            raise _invalid("Chunks carry more than the %d bytes the header announced." % self.total)
        self._view[self.pos : end] = data
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
            raise _invalid(
                "Chunk at offset %d, expected %d: chunks must be contiguous and in "
                "order." % (chunk.offset, self.pos)
            )
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
            length = int.from_bytes(view[pos : pos + 8], "little")
            pos += 8
            if length > self.total - pos:
                raise _invalid("String element of %d bytes overruns the stream." % length)
            values.append(view[pos : pos + length])
            pos += length
        if pos != self.total:
            raise _invalid(
                "String tensor stream has %d bytes after its %d elements."
                % (self.total - pos, self.n)
            )
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
        yield pb.TensorChunk(offset=offset), stream[offset : offset + chunk_bytes]


def iter_tensor_chunks(value, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Yields the serialized :class:`TensorChunk` messages (bytes) that carry ``value``.

    The first chunk has the header (dtype, shape, total_bytes) and offset 0, and at most
    ``chunk_bytes`` of data; each later chunk carries the next at most ``chunk_bytes`` bytes.
    An empty tensor is one header chunk with no data.
    """
    for header, data in _pieces(*_tensor_stream(value), chunk_bytes):
        yield encode_chunk(header, data)


# -- named tensors of a step (feeds, fetches, sends, recvs) -----------------------------------


@functools.lru_cache(maxsize=None)
def _field_number(cls, field):
    return cls.DESCRIPTOR.fields_by_name[field].number


@functools.lru_cache(maxsize=None)
def _repeated_field_name(cls, number):
    """The name of ``cls``'s field ``number`` if it is a repeated one, else None."""
    field = cls.DESCRIPTOR.fields_by_number.get(number)
    return field.name if field is not None and field.is_repeated else None


def split_named_tensors(
    items,
    inline_bytes=INLINE_TENSOR_BYTES,
    chunk_bytes=DEFAULT_CHUNK_BYTES,
    wrap=(pb.RunStepResponse, "tensor_part"),
):
    """Splits ``(name, value)`` pairs into what fits in one message and what is streamed.

    Returns ``(inline, parts)``: a list of :class:`NamedTensor` (tensors of at most
    ``SMALL_TENSOR_BYTES`` kept while their sizes add up to at most ``inline_bytes``) and an
    iterator over the others, chunk by chunk.  Put ``inline`` in the first message of a stream
    (RunStepRequest.feed, RunGraphRequest.send ...) and send the parts as the following
    messages, or in the first one (:func:`with_parts`).

    ``wrap=(message class, repeated TensorPart field)`` (e.g. ``(RunGraphResponse,
    "recv_part")``): each part comes as a serialized message of that class (bytes) holding one
    TensorPart, written by hand so the chunk's bytes are copied once (see ``serialize``).
    """
    number = _field_number(*wrap)
    inline, large, budget = [], [], inline_bytes
    for name, value in items:
        dname, arr = _normalize(value)
        size = _payload_bytes(dname, arr)
        if size <= min(budget, SMALL_TENSOR_BYTES):
            named = pb.NamedTensor(name=name)
            fill_tensor_proto(named.tensor, dname, arr)  # in place: no copy of a TensorProto
            inline.append(named)
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


def with_parts(first, parts, limit=INLINE_TENSOR_BYTES):
    """``(request, rest)``: the serialized ``first`` message of a streamed request with the
    ``parts`` of :func:`split_named_tensors` appended when they add up to at most ``limit``
    bytes (protobuf reads concatenated messages as their merge, and a receiver takes parts from
    any message).  ``rest`` is None when they did, so the request is one message (a step on a
    call kept open), else an iterator over all the parts, to send after it."""
    pieces, size = [serialize(first)], 0
    for p in parts:
        pieces.append(p)
        size += len(p)
        if size > limit:
            return pieces[0], itertools.chain(pieces[1:], parts)
    return b"".join(pieces), None


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
        self._open = {}  # name -> _ChunkAssembler of a tensor still streaming
        self._taken = set()  # names of the tensors take() handed out
        self._total = 0

    def _claim(self, name, nbytes):
        if name in self._values or name in self._open or name in self._taken:
            raise _invalid("Tensor %s was sent twice." % _short(name))
        self._total += nbytes
        if self._total > self.max_total_bytes:
            raise _invalid(
                "The tensors of this message exceed the limit of %d bytes in all."
                % self.max_total_bytes
            )

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
            named.tensor, min(self.max_tensor_bytes, self.max_total_bytes)
        )

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
            raise _invalid(
                "Tensor %s ended after %d of %d bytes." % (_short(name), asm.pos, asm.total)
            )
        return dict(self._values)

    def take(self):
        """``{name: ndarray}`` of the tensors completed since the last take (a stream whose
        tensors are used as they arrive); finish() then returns only those not taken."""
        done, self._values = self._values, {}
        self._taken.update(done)
        return done
