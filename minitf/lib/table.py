"""The immutable sorted key/value table of a checkpoint's ``.index`` file: TF's LevelDB-style
table (``core/lib/io/table_builder.cc``, ``block_builder.cc``, ``format.cc``, ``table.cc``).

Book section: "Saving and restoring" (``tf.train.Saver`` writes a ``.index`` table naming every
saved tensor; the distributed chapter's parameter servers each write one shard of it).

A table is data blocks, then a metaindex block (empty in TF's tables) and an index block, then a
48-byte footer: the metaindex and index block handles (varint64 offset and size), zero padding
to 40 bytes, and the 8-byte magic number.  A block holds its entries with prefix-compressed
keys (varint32 shared length, unshared length, value length, the unshared key bytes, the value),
a full key at every restart point (every 16th entry; every entry in the index block), the
restart offsets (fixed32) and their count.  Each block is followed by a 5-byte trailer: the
compression type (0: none) and the masked CRC32C of the block and that byte.  The index block
maps a key at least as large as a data block's last key (and below the next block's first key)
to that block's handle.  No compression is written or read: TF's bundles use none.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from minitf.framework import errors
from minitf.lib import crc

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
BLOCK_SIZE = 262144  # TF's table::Options defaults
RESTART_INTERVAL = 16


def put_varint(out: bytearray, n: int) -> None:
    """Appends ``n`` as a protobuf-style varint (LevelDB's PutVarint32/64)."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def get_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; DataLossError past the end."""
    result = shift = 0
    while pos < len(data) and shift <= 63:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise errors.DataLossError(None, None, "bad varint in table block")


class BlockBuilder:
    """One block under construction (``block_builder.cc``)."""

    def __init__(self, restart_interval: int = RESTART_INTERVAL) -> None:
        self.restart_interval = restart_interval
        self.buffer = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""
        self.empty = True

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.restart_interval:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buffer))
            self.counter = 0
        for n in (shared, len(key) - shared, len(value)):
            put_varint(self.buffer, n)
        self.buffer += key[shared:]
        self.buffer += value
        self.last_key = key
        self.counter += 1
        self.empty = False

    def size_estimate(self) -> int:
        return len(self.buffer) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        tail = struct.pack("<%dI" % (len(self.restarts) + 1), *self.restarts, len(self.restarts))
        return bytes(self.buffer) + tail


def shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key k with start <= k < limit (LevelDB's BytewiseComparator)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def short_successor(key: bytes) -> bytes:
    """A short key k >= ``key``: its first byte that is not 0xff, incremented."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def encode_handle(offset: int, size: int) -> bytes:
    out = bytearray()
    put_varint(out, offset)
    put_varint(out, size)
    return bytes(out)


class TableWriter:
    """Writes a table to a binary file object; keys must come in strictly increasing order."""

    def __init__(self, file, block_size: int = BLOCK_SIZE) -> None:
        self.file = file
        self.block_size = block_size
        self.offset = 0
        self.data_block = BlockBuilder()
        self.index_block = BlockBuilder(restart_interval=1)
        self.last_key: bytes | None = None
        self.pending_handle: bytes | None = None

    def add(self, key: bytes, value: bytes) -> None:
        if self.last_key is not None and key <= self.last_key:
            raise ValueError(
                "table keys must be added in increasing order: %r after %r" % (key, self.last_key)
            )
        if self.pending_handle is not None:
            self.index_block.add(shortest_separator(self.last_key, key), self.pending_handle)
            self.pending_handle = None
        self.last_key = key
        self.data_block.add(key, value)
        if self.data_block.size_estimate() >= self.block_size:
            self._flush()

    def _flush(self) -> None:
        if self.data_block.empty:
            return
        self.pending_handle = self._write_block(self.data_block)
        self.data_block = BlockBuilder()

    def _write_block(self, block: BlockBuilder) -> bytes:
        raw = block.finish()
        checksum = crc.mask(crc.value(b"\x00", crc.value(raw)))
        self.file.write(raw + b"\x00" + struct.pack("<I", checksum))
        handle = encode_handle(self.offset, len(raw))
        self.offset += len(raw) + BLOCK_TRAILER_SIZE
        return handle

    def finish(self) -> int:
        """Writes the last data block, the metaindex and index blocks and the footer; returns
        the table's size in bytes."""
        self._flush()
        metaindex = self._write_block(BlockBuilder())
        if self.pending_handle is not None:
            self.index_block.add(short_successor(self.last_key), self.pending_handle)
            self.pending_handle = None
        index = self._write_block(self.index_block)
        footer = (metaindex + index).ljust(FOOTER_SIZE - 8, b"\x00")
        self.file.write(footer + struct.pack("<Q", MAGIC))
        self.offset += FOOTER_SIZE
        return self.offset


def _corrupt(what: str, name: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, "%s in table %s" % (what, name))


def read_block(data: bytes, handle: tuple[int, int], name: str = "") -> bytes:
    """The contents of the block at ``handle`` after checking its trailer's checksum."""
    offset, size = handle
    end = offset + size + BLOCK_TRAILER_SIZE
    if end > len(data):
        raise _corrupt("truncated block read", name)
    raw, kind = data[offset : offset + size], data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if crc.unmask(stored) != crc.value(bytes([kind]), crc.value(raw)):
        raise _corrupt("block checksum mismatch", name)
    if kind != 0:
        raise _corrupt("unsupported block compression type %d" % kind, name)
    return raw


def block_entries(raw: bytes, name: str = "") -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of a block's contents, in order."""
    if len(raw) < 4:
        raise _corrupt("bad block contents", name)
    (num_restarts,) = struct.unpack_from("<I", raw, len(raw) - 4)
    limit = len(raw) - 4 * (num_restarts + 1)
    if limit < 0:
        raise _corrupt("bad block contents", name)
    pos, key = 0, b""
    while pos < limit:
        shared, pos = get_varint(raw, pos)
        unshared, pos = get_varint(raw, pos)
        value_len, pos = get_varint(raw, pos)
        if shared > len(key) or pos + unshared + value_len > limit:
            raise _corrupt("bad entry in block", name)
        key = key[:shared] + raw[pos : pos + unshared]
        pos += unshared
        yield key, raw[pos : pos + value_len]
        pos += value_len


class TableReader:
    """Reads a whole table held in memory (``data``: the file's bytes)."""

    def __init__(self, data: bytes, name: str = "") -> None:
        self.data, self.name = data, name
        if len(data) < FOOTER_SIZE:
            raise _corrupt("file is too short to be an sstable", name)
        (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
        if magic != MAGIC:
            raise _corrupt("not an sstable (bad magic number)", name)
        footer = data[len(data) - FOOTER_SIZE :]
        handles, pos = [], 0
        for _ in range(4):
            n, pos = get_varint(footer, pos)
            handles.append(n)
        self.index = [
            _decode_handle(v, name) for _, v in block_entries(read_block(data, handles[2:], name))
        ]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) pair, in key order."""
        for handle in self.index:
            yield from block_entries(read_block(self.data, handle, self.name), self.name)


def _decode_handle(value: bytes, name: str) -> tuple[int, int]:
    offset, pos = get_varint(value, 0)
    size, _ = get_varint(value, pos)
    return offset, size
