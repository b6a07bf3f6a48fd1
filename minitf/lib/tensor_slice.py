"""Slices of a tensor as checkpoints record them (TF's ``core/framework/tensor_slice.cc``,
``core/util/saved_tensor_slice_util.cc`` and the ``OrderedCode`` of
``core/lib/strings/ordered_code.cc`` that names them).

Book section: "Sharding Variables Across Multiple Parameter Servers", and saving a model: a
partitioned variable's shards live on different ps tasks, but a checkpoint holds one tensor of
the full shape.  Each shard is saved as a *slice* of it: the bundle's entry for the full name
lists the slices (``BundleEntryProto.slices``) and each slice's values are stored under a key
of their own, :func:`slice_key` (a ``0`` byte, the name and the slice's extents in TF's
order-preserving encoding).  A restore asks for any slice and gets it cut and pasted from the
stored ones, so a checkpoint can be restored with another partitioning, or unpartitioned.

A slice spec reads ``start,length`` per dimension joined by ``:`` (``-`` for a whole
dimension); a ``shape_and_slice`` string puts the full shape first: ``"10 4 0,4:-"``.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitf.framework import errors

FULL = -1  # the length of a dimension taken whole (TF's kFullExtent)


class TensorSlice:
    """Per dimension a start and a length (:data:`FULL`: the whole dimension)."""

    def __init__(self, starts: Sequence[int], lengths: Sequence[int]) -> None:
        self.starts = tuple(int(s) for s in starts)
        self.lengths = tuple(int(n) for n in lengths)

    @classmethod
    def full(cls, rank: int) -> TensorSlice:
        return cls([0] * rank, [FULL] * rank)

    @classmethod
    def parse(cls, spec: str) -> TensorSlice:
        """``"0,4:-"`` (TF's ``TensorSlice::Parse``); InvalidArgumentError if malformed."""
        starts, lengths = [], []
        for part in spec.split(":") if spec else []:
            if part == "-":
                starts.append(0)
                lengths.append(FULL)
                continue
            try:
                start, length = (int(x) for x in part.split(","))
            except ValueError:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Expected a pair of numbers or '-' but got '%s': string = %s" % (part, spec),
                ) from None
            if start < 0 or length < 0:
                raise errors.InvalidArgumentError(
                    None, None, "Expected non-negative start and length: string = %s" % spec
                )
            starts.append(start)
            lengths.append(length)
        return cls(starts, lengths)

    @classmethod
    def from_proto(cls, proto) -> TensorSlice:
        starts = [e.start for e in proto.extent]
        lengths = [e.length if e.HasField("length") else FULL for e in proto.extent]
        return cls(starts, lengths)

    def to_proto(self, proto) -> None:
        """Fills a ``TensorSliceProto`` as TF does: a whole dimension is an empty extent."""
        for start, length in zip(self.starts, self.lengths):
            extent = proto.extent.add()
            if length != FULL:
                extent.start = start
                extent.length = length

    def bounds(self, shape: Sequence[int]) -> list[tuple[int, int]]:
        """``[(lo, hi)]`` per dimension of a tensor of ``shape``."""
        return [
            (0, int(d)) if n == FULL else (s, s + n)
            for s, n, d in zip(self.starts, self.lengths, shape)
        ]

    def shape(self, full_shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(hi - lo for lo, hi in self.bounds(full_shape))

    def is_full(self, full_shape: Sequence[int]) -> bool:
        return all(lo == 0 and hi == d for (lo, hi), d in zip(self.bounds(full_shape), full_shape))

    def fits(self, full_shape: Sequence[int]) -> bool:
        return len(self.starts) == len(full_shape) and all(
            hi <= d for (_, hi), d in zip(self.bounds(full_shape), full_shape)
        )

    def __str__(self) -> str:
        return ":".join(
            "-" if n == FULL else "%d,%d" % (s, n) for s, n in zip(self.starts, self.lengths)
        )


def parse_shape_and_slice(text: str) -> tuple[tuple[int, ...], TensorSlice]:
    """``"10 4 0,4:-"`` -> ``((10, 4), slice)`` (TF's ``checkpoint::ParseShapeAndSlice``)."""
    words = text.split(" ")
    try:
        shape = tuple(int(w) for w in words[:-1])
    except ValueError:
        shape = None
    slc = TensorSlice.parse(words[-1]) if shape else None
    if not shape or any(d < 0 for d in shape) or not slc.fits(shape):
        raise errors.InvalidArgumentError(
            None, None, "Expected a full shape and a slice of it in shape_and_slice: %s" % text
        )
    return shape, slc


# -- TF's OrderedCode: byte strings that sort as the values they encode -------------------------

_BITS_TO_LENGTH = [1] * 7 + [2] * 7 + [3] * 7 + [4] * 7 + [5] * 7 + [6] * 7 + [7] * 7
_BITS_TO_LENGTH += [8] * 7 + [9] * 7 + [10]
_HEADER = [(0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0), (0xFC, 0), (0xFE, 0)]
_HEADER += [(0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0)]


def _num_increasing(value: int) -> bytes:
    """``WriteNumIncreasing``: the byte count, then the value big-endian."""
    n = (value.bit_length() + 7) // 8
    return bytes([n]) + value.to_bytes(n, "big")


def _string(data: bytes) -> bytes:
    """``WriteString``: 0x00 -> 00 ff, 0xff -> ff 00, then the terminator 00 01."""
    out = bytearray()
    for c in data:
        out += b"\x00\xff" if c == 0 else b"\xff\x00" if c == 0xFF else bytes([c])
    return bytes(out) + b"\x00\x01"


def _signed_num_increasing(value: int) -> bytes:
    """``WriteSignedNumIncreasing``: a length header in the leading bits, then the value."""
    x = ~value if value < 0 else value
    if x < 64:
        return bytes([(0x80 ^ value) & 0xFF])
    length = _BITS_TO_LENGTH[x.bit_length()]
    buf = bytearray((value & ((1 << 80) - 1)).to_bytes(10, "big")[10 - length :])
    buf[0] ^= _HEADER[length][0]
    buf[1] ^= _HEADER[length][1]
    return bytes(buf)


def slice_key(name: str, slc: TensorSlice) -> bytes:
    """The bundle key of one stored slice of tensor ``name`` (TF's
    ``checkpoint::EncodeTensorNameSlice``): it starts with a 0 byte, which no name does."""
    out = bytearray(_num_increasing(0))
    out += _string(name.encode("utf-8"))
    out += _num_increasing(len(slc.starts))
    for start, length in zip(slc.starts, slc.lengths):
        out += _signed_num_increasing(start)
        out += _signed_num_increasing(length)
    return bytes(out)
