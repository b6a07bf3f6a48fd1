"""Tensor bundles: TF's V2 checkpoint format (``core/util/tensor_bundle/tensor_bundle.cc``).

Book section: "Saving and restoring" (``tf.train.Saver``); in the distributed chapter each
parameter server writes one shard of a checkpoint.

A bundle with prefix ``P`` is ``P.index``, a table (``minitf.lib.table``) whose value under the
empty key is a ``BundleHeaderProto`` (number of data files, endianness, format version) and
under each tensor's name a ``BundleEntryProto`` (dtype, shape, data file, offset, size, masked
CRC32C of the bytes), and the data files ``P.data-00000-of-0000N`` holding the tensors' raw
little-endian bytes one after the other.  A string tensor is stored as TF stores it: each
element's length as a varint64, the masked CRC32C of those lengths (as fixed32 little-endian
values), then the elements' bytes; its entry's checksum covers the lengths as fixed32 values,
that checksum and the bytes.  ``merge`` joins shards written by several ``SaveV2`` ops into one
bundle (``MergeV2Checkpoints``).  A tensor saved in slices (a partitioned variable's shards,
``minitf.lib.tensor_slice``) has an entry under its name with its dtype, full shape and list of
slices but no bytes, and one ordinary entry per slice under the slice's own key.
"""

from __future__ import annotations

import os
import struct
import uuid

import numpy as np

from minitf.framework import dtypes, errors
from minitf.lib import crc
from minitf.lib.bundle_pb2 import BundleEntryProto, BundleHeaderProto
from minitf.lib.table import TableReader, TableWriter, get_varint, put_varint
from minitf.lib.tensor_slice import TensorSlice, slice_key

VERSION = 1  # TF's kTensorBundleVersion


def data_filename(prefix: str, shard: int, num_shards: int) -> str:
    """``P.data-00000-of-00001``: the name of one data file of a bundle."""
    return "%s.data-%05d-of-%05d" % (prefix, shard, num_shards)


def index_filename(prefix: str) -> str:
    return prefix + ".index"


def _temp_name(path):
    return "%s.tempstate%s" % (path, uuid.uuid4().int % 10**19)


def _open_for_write(path):
    try:
        return open(path, "wb")  # noqa: SIM115 - closed by the caller
    except FileNotFoundError:
        raise errors.NotFoundError(
            None, None, "Failed to create a NewWriteableFile: %s : No such file or directory" % path
        ) from None
    except OSError as e:
        raise errors.PermissionDeniedError(None, None, "%s: %s" % (path, e.strerror)) from None


def encode_tensor(array: np.ndarray, dtype: dtypes.DType) -> tuple[bytes, int]:
    """The bytes TF stores for a tensor and the (unmasked) CRC32C its entry records."""
    if dtype == dtypes.string:
        return _encode_strings(array)
    np_dtype = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
    data = np.ascontiguousarray(array, dtype=np_dtype).tobytes()
    return data, crc.value(data)


def _as_bytes(x):
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


def _encode_strings(array):
    elems = [_as_bytes(x) for x in np.asarray(array, dtype=object).reshape(-1)]
    lengths, sized = bytearray(), bytearray()
    for e in elems:
        put_varint(lengths, len(e))
        sized += struct.pack("<I", len(e)) if len(e) <= 0xFFFFFFFF else struct.pack("<Q", len(e))
    length_crc = struct.pack("<I", crc.mask(crc.value(bytes(sized))))
    body = b"".join(elems)
    checksum = crc.value(body, crc.value(length_crc, crc.value(bytes(sized))))
    return bytes(lengths) + length_crc + body, checksum


def decode_tensor(data: bytes, dtype: dtypes.DType, shape: tuple[int, ...], key: str) -> np.ndarray:
    """Inverse of :func:`encode_tensor` (checksums are checked by the reader)."""
    if dtype == dtypes.string:
        n = int(np.prod(shape, dtype=np.int64))
        pos, sizes = 0, []
        for _ in range(n):
            size, pos = get_varint(data, pos)
            sizes.append(size)
        pos += 4
        out = np.empty(n, dtype=object)
        for i, size in enumerate(sizes):
            out[i] = bytes(data[pos : pos + size])
            pos += size
        return out.reshape(shape)
    np_dtype = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
    arr = np.frombuffer(data, dtype=np_dtype)
    if arr.size != int(np.prod(shape, dtype=np.int64)):
        raise errors.DataLossError(None, None, "Invalid size in bundle entry: key %s" % key)
    return arr.astype(np_dtype.newbyteorder("="), copy=True).reshape(shape)


def _shape_proto(entry, shape):
    entry.shape.SetInParent()  # TF writes the shape of a scalar too: an empty message
    for d in shape:
        entry.shape.dim.add(size=int(d))


def _write_index(prefix, header, entries):
    path = index_filename(prefix)
    tmp = _temp_name(path)
    with _open_for_write(tmp) as f:
        table = TableWriter(f)
        table.add(b"", header.SerializeToString())
        for key in sorted(entries):
            table.add(key, entries[key].SerializeToString())
        table.finish()
    os.replace(tmp, path)


def _make_parent_dir(prefix):
    """Like TF's BundleWriter: the prefix's directory is created, one level only (so a save
    to ``new/model`` works and one to ``nodir/sub/model`` fails with NotFoundError)."""
    parent = os.path.dirname(prefix)
    if not parent:
        return
    try:
        os.mkdir(parent)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, "%s; No such file or directory" % parent) from None


class BundleWriter:
    """Writes one bundle with one data file (what one ``SaveV2`` op writes)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        _make_parent_dir(prefix)
        self.entries: dict[bytes, BundleEntryProto] = {}
        self._data_path = data_filename(prefix, 0, 1)
        self._tmp = _temp_name(self._data_path)
        self._file = _open_for_write(self._tmp)
        self._offset = 0

    def add(self, key: str, array: np.ndarray, dtype: dtypes.DType) -> None:
        """Appends a tensor's bytes to the data file and records its entry."""
        bkey = key.encode("utf-8")
        if not bkey:
            raise errors.InvalidArgumentError(None, None, "Adding an empty key is not allowed")
        if bkey[:1] == b"\x00":
            raise errors.InvalidArgumentError(
                None, None, "Adding a key that starts with a 0 byte (the slices' keys do): %r" % key
            )
        self._add(bkey, key, array, dtype)

    def add_slice(self, key, full_shape, slc: TensorSlice, array, dtype: dtypes.DType) -> None:
        """Saves ``array`` as slice ``slc`` of the tensor ``key`` of ``full_shape`` (TF's
        ``BundleWriter::AddSlice``; a slice that is the whole tensor is saved as the tensor)."""
        full_shape = tuple(int(d) for d in full_shape)
        if slc.is_full(full_shape):
            return self.add(key, array, dtype)
        if tuple(np.shape(array)) != slc.shape(full_shape):
            raise errors.InvalidArgumentError(
                None,
                None,
                "Shape of slice %s of %s: %s does not match the tensor's %s"
                % (slc, key, list(slc.shape(full_shape)), list(np.shape(array))),
            )
        bkey = key.encode("utf-8")
        full = self.entries.get(bkey)
        if full is None:
            full = self.entries[bkey] = BundleEntryProto(dtype=dtype.base_dtype.as_datatype_enum)
            _shape_proto(full, full_shape)
        elif (
            not len(full.slices)
            or full.dtype != dtype.base_dtype.as_datatype_enum
            or tuple(d.size for d in full.shape.dim) != full_shape
        ):
            raise errors.InvalidArgumentError(
                None, None, "Adding slice %s of %s, saved before as another tensor" % (slc, key)
            )
        self._add(slice_key(key, slc), "%s (slice %s)" % (key, slc), array, dtype)
        slc.to_proto(full.slices.add())

    def _add(self, bkey, key, array, dtype):
        if bkey in self.entries:
            raise errors.InvalidArgumentError(None, None, "Adding duplicate key: %s" % key)
        data, checksum = encode_tensor(array, dtype)
        entry = BundleEntryProto(
            dtype=dtype.base_dtype.as_datatype_enum,
            offset=self._offset,
            size=len(data),
            crc32c=crc.mask(checksum),
        )
        _shape_proto(entry, np.shape(array))
        self._file.write(data)
        self._offset += len(data)
        self.entries[bkey] = entry

    def finish(self) -> None:
        """Closes the data file and writes the index (each through a temporary file)."""
        self._file.close()
        os.replace(self._tmp, self._data_path)
        header = BundleHeaderProto(num_shards=1)
        header.version.producer = VERSION
        _write_index(self.prefix, header, self.entries)

    def abort(self) -> None:
        self._file.close()
        if os.path.exists(self._tmp):
            os.remove(self._tmp)


def write_bundle(prefix: str, tensors: list[tuple]) -> None:
    """Writes ``(key, array, dtype)`` tensors as the bundle ``prefix``; a tuple may go on
    with ``full_shape, slice`` for a slice of a larger tensor."""
    writer = BundleWriter(prefix)
    try:
        for key, array, dtype, *sliced in tensors:
            if sliced:
                writer.add_slice(key, sliced[0], sliced[1], array, dtype)
            else:
                writer.add(key, array, dtype)
    except BaseException:
        writer.abort()
        raise
    writer.finish()


def _read_file(path, prefix=None):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        if prefix is None:
            raise errors.NotFoundError(None, None, "%s; No such file or directory" % path) from None
        raise errors.NotFoundError(
            None,
            None,
            "Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
            "for %s" % prefix,
        ) from None


class BundleReader:
    """Reads a bundle: its index at construction, a tensor's bytes on ``lookup``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        path = index_filename(prefix)
        self.entries: dict[bytes, BundleEntryProto] = {}
        self.header = BundleHeaderProto()
        for key, value in TableReader(_read_file(path, prefix), path).items():
            if key == b"":
                self.header.ParseFromString(value)
            else:
                entry = BundleEntryProto()
                entry.ParseFromString(value)
                self.entries[key] = entry
        if self.header.endianness != BundleHeaderProto.LITTLE:
            raise errors.UnimplementedError(
                None, None, "Reading a big endian bundle is not supported: %s" % prefix
            )
        if self.header.version.min_consumer > VERSION:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Checkpoint min consumer version %d above current version %d for bundle %s"
                % (self.header.version.min_consumer, VERSION, prefix),
            )
        self._data: dict[int, bytes] = {}

    def names(self) -> list[str]:
        """The saved tensors' names, sorted (not the keys of their slices, which start with a
        0 byte)."""
        return [k.decode("utf-8", "replace") for k in sorted(self.entries) if k[:1] != b"\x00"]

    def contains(self, key: str) -> bool:
        return key.encode("utf-8") in self.entries

    def _entry(self, key):
        entry = self.entries.get(key.encode("utf-8"))
        if entry is None:
            raise errors.NotFoundError(None, None, "Key %s not found in checkpoint" % key)
        return entry

    def dtype_and_shape(self, key: str) -> tuple[dtypes.DType, tuple[int, ...]]:
        """The dtype and (full) shape recorded for ``key`` (NotFoundError if not there)."""
        entry = self._entry(key)
        return dtypes.as_dtype(entry.dtype), tuple(int(d.size) for d in entry.shape.dim)

    def lookup(self, key: str) -> np.ndarray:
        """The tensor saved under ``key``, its checksum checked (DataLossError if wrong); one
        saved in slices comes back whole."""
        dtype, shape = self.dtype_and_shape(key)
        entry = self._entry(key)
        if len(entry.slices):
            return self.lookup_slice(key, shape, TensorSlice.full(len(shape)))
        return self._read(entry, dtype, shape, key)

    def lookup_slice(self, key: str, full_shape, slc: TensorSlice) -> np.ndarray:
        """Slice ``slc`` of the tensor ``key`` of ``full_shape``, cut from the tensor or pasted
        together from the stored slices that overlap it (TF's ``BundleReader::LookupSlice``)."""
        dtype, shape = self.dtype_and_shape(key)
        if tuple(full_shape) != shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "tensor_name = %s; shape in shape_and_slice spec %s does not match the shape "
                "stored in checkpoint: %s" % (key, list(full_shape), list(shape)),
            )
        if not slc.fits(shape):
            raise errors.InvalidArgumentError(
                None, None, "Slice %s is not a slice of %s%s" % (slc, key, list(shape))
            )
        want = slc.bounds(shape)
        entry = self._entry(key)
        if not len(entry.slices):
            return self._read(entry, dtype, shape, key)[tuple(slice(lo, hi) for lo, hi in want)]
        out = np.empty(slc.shape(shape), dtype=_numpy_dtype(dtype))
        covered = 0
        for proto in entry.slices:
            stored = TensorSlice.from_proto(proto)
            if not stored.fits(shape):
                raise errors.DataLossError(
                    None, None, "Invalid slice %s of %s%s in bundle" % (stored, key, list(shape))
                )
            have = stored.bounds(shape)
            cut = [(max(a, c), min(b, d)) for (a, b), (c, d) in zip(want, have)]
            if any(lo >= hi for lo, hi in cut):
                continue
            name = "%s (slice %s)" % (key, stored)  # as the writer names it in its errors
            part = self._read(
                self._raw(slice_key(key, stored), name), dtype, stored.shape(shape), name
            )
            out[tuple(slice(lo - w, hi - w) for (lo, hi), (w, _) in zip(cut, want))] = part[
                tuple(slice(lo - h, hi - h) for (lo, hi), (h, _) in zip(cut, have))
            ]
            covered += int(np.prod([hi - lo for lo, hi in cut], dtype=np.int64))
        if covered < out.size:
            raise errors.NotFoundError(
                None,
                None,
                "Does not have sufficient slices for partitioned tensor %s to restore in "
                "slice_spec: %s" % (key, slc),
            )
        return out

    def _raw(self, bkey, name):
        entry = self.entries.get(bkey)
        if entry is None:
            raise errors.DataLossError(None, None, "Missing slice entry in bundle: %s" % name)
        return entry

    def _read(self, entry, dtype, shape, key):
        shard = entry.shard_id
        if shard not in self._data:
            self._data[shard] = _read_file(
                data_filename(self.prefix, shard, max(self.header.num_shards, 1))
            )
        data = self._data[shard][entry.offset : entry.offset + entry.size]
        actual = crc.mask(_stored_checksum(data, dtype, int(np.prod(shape, dtype=np.int64))))
        if len(data) != entry.size or actual != entry.crc32c:
            raise errors.DataLossError(
                None,
                None,
                "Checksum does not match: stored %08d vs. calculated on the restored bytes %d"
                % (entry.crc32c, actual),
            )
        return decode_tensor(data, dtype, shape, key)


def _numpy_dtype(dtype):
    return object if dtype == dtypes.string else np.dtype(dtype.as_numpy_dtype)


def _stored_checksum(data, dtype, count):
    """The CRC32C an entry records for ``data`` holding ``count`` elements (string tensors:
    see the module docstring)."""
    if dtype != dtypes.string:
        return crc.value(data)
    pos, sized = 0, bytearray()
    for _ in range(count):
        size, pos = get_varint(data, pos)
        sized += struct.pack("<I", size) if size <= 0xFFFFFFFF else struct.pack("<Q", size)
    return crc.value(data[pos:], crc.value(bytes(sized)))


def _merge_entry(entries, bkey, entry, base, prefix):
    """Adds one shard's entry to the merged index: its data renumbered to the merged shard,
    or, for a tensor saved in slices, its slices joined to those other shards hold."""
    merged = entries.get(bkey)
    if merged is not None and len(entry.slices) and len(merged.slices):
        if merged.dtype != entry.dtype or merged.shape != entry.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Slices of %s disagree on dtype or shape, when merging prefix: %s"
                % (bkey.decode("utf-8", "replace"), prefix),
            )
        merged.slices.extend(entry.slices)
        return
    if merged is not None:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Duplicate tensor keyed by %s encountered, when merging prefix: %s"
            % (bkey.decode("utf-8", "replace"), prefix),
        )
    merged = entries[bkey] = BundleEntryProto()
    merged.CopyFrom(entry)
    if not len(entry.slices):  # a full entry of slices points at no data
        merged.shard_id = entry.shard_id + base


def merge(prefixes: list[str], merged_prefix: str, delete_old_dirs: bool = True) -> None:
    """``MergeV2Checkpoints``: joins the bundles ``prefixes`` (one data file each, or more)
    into ``merged_prefix``: their data files are renamed, their entries renumbered into one
    index; the old index files go, and their directories too if ``delete_old_dirs`` and empty."""
    readers = [BundleReader(p) for p in prefixes]
    total = sum(max(r.header.num_shards, 1) for r in readers)
    entries: dict[bytes, BundleEntryProto] = {}
    base = 0
    for reader in readers:
        n = max(reader.header.num_shards, 1)
        for bkey, entry in reader.entries.items():
            _merge_entry(entries, bkey, entry, base, reader.prefix)
        for shard in range(n):
            os.replace(
                data_filename(reader.prefix, shard, n),
                data_filename(merged_prefix, base + shard, total),
            )
        base += n
    header = BundleHeaderProto(num_shards=total)
    header.version.producer = VERSION
    _write_index(merged_prefix, header, entries)
    for prefix in prefixes:
        os.remove(index_filename(prefix))
        if delete_old_dirs:
            try:
                os.rmdir(os.path.dirname(prefix) or ".")
            except OSError:
                pass  # not empty, or already gone (TF ignores this too)
