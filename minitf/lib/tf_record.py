"""TFRecord files: TF's record framing, written and read (``core/lib/io/record_writer.cc``,
``record_reader.cc``; ``tf.python_io.TFRecordWriter`` and ``tf_record_iterator`` of
``python/lib/io/tf_record.py``).

Book section: "Distributing TensorFlow" (event files for TensorBoard are TFRecord files of
``Event`` protos; input pipelines read TFRecord files).  One record on disk is::

    uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)

all little-endian, with no file header or footer.  ``ZLIB`` and ``GZIP`` compress the whole
stream of records (TF's ``ZlibOutputBuffer`` with window bits 15, or 15 + 16 for gzip).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from minitf.framework import errors
from minitf.lib import crc

HEADER_SIZE = 12  # length (8) and its masked CRC (4)
FOOTER_SIZE = 4  # the masked CRC of the data


class TFRecordCompressionType:
    """``tf.python_io.TFRecordCompressionType``: NONE (0), ZLIB (1), GZIP (2)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_TYPE_NAMES = {TFRecordCompressionType.ZLIB: "ZLIB", TFRecordCompressionType.GZIP: "GZIP"}
_WINDOW_BITS = {"ZLIB": 15, "GZIP": 15 + 16}


class TFRecordOptions:
    """``tf.python_io.TFRecordOptions(compression_type)``: ``None``/``""``, ``"ZLIB"``,
    ``"GZIP"`` or a :class:`TFRecordCompressionType` value."""

    def __init__(self, compression_type: str | int | None = None) -> None:
        self.compression_type = self.get_compression_type_string(compression_type)

    @classmethod
    def get_compression_type_string(cls, options: TFRecordOptions | str | int | None) -> str:
        """The compression name of ``options`` (TF's classmethod of the same name)."""
        if options is None:
            return ""
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        if isinstance(options, int) and not isinstance(options, bool):
            if options == TFRecordCompressionType.NONE:
                return ""
            if options in _TYPE_NAMES:
                return _TYPE_NAMES[options]
        if options in ("", "ZLIB", "GZIP"):
            return options
        raise ValueError('Not a valid compression_type: "%s"' % (options,))


def encode_record(data: bytes) -> bytes:
    """One framed record: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return b"".join(
        (
            length,
            struct.pack("<I", crc.masked_value(length)),
            data,
            struct.pack("<I", crc.masked_value(data)),
        )
    )


class TFRecordWriter:
    """``tf.python_io.TFRecordWriter(path, options=None)``: opens (truncates) ``path`` at once;
    ``write(record)``, ``flush()``, ``close()``; a context manager."""

    def __init__(self, path: str, options: TFRecordOptions | str | int | None = None) -> None:
        kind = TFRecordOptions.get_compression_type_string(options)
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._compressor = zlib.compressobj(wbits=_WINDOW_BITS[kind]) if kind else None

    def write(self, record: bytes) -> None:
        """Appends one record (``bytes``; a ``str`` is encoded as UTF-8, as TF's ``compat``)."""
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if isinstance(record, str):
            record = record.encode("utf-8")
        framed = encode_record(bytes(record))
        if self._compressor is not None:
            framed = self._compressor.compress(framed)
        self._file.write(framed)

    def flush(self) -> None:
        """Pushes what was written to the operating system (TF: ``Flush()``)."""
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if self._compressor is not None:
            self._file.write(self._compressor.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def close(self) -> None:
        """Flushes and closes the file; closing again does nothing."""
        if self._file is None:
            return
        if self._compressor is not None:
            self._file.write(self._compressor.flush())
        self._file.close()
        self._file = None

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _data_loss(what: str, offset: int) -> errors.DataLossError:
    return errors.DataLossError(None, None, "%s record at %d" % (what, offset))


def _read_checksummed(data: bytes, offset: int, n: int) -> bytes | None:
    """``n`` bytes at ``offset`` followed by their masked CRC (TF's ``ReadChecksummed`` over a
    buffered stream): None when fewer bytes are left (the stream's OutOfRange), DataLossError
    ``corrupted record at <offset>`` when the CRC does not match."""
    if offset + n + FOOTER_SIZE > len(data):
        return None
    payload = data[offset : offset + n]
    (masked,) = struct.unpack_from("<I", data, offset + n)
    if crc.unmask(masked) != crc.value(payload):
        raise _data_loss("corrupted", offset)
    return payload


def read_record(data: bytes, offset: int) -> tuple[bytes, int] | None:
    """The record at ``offset`` of a file's bytes and the offset of the next one, or None at
    the end.  TF's ``RecordReader::ReadRecord``: a missing or partial *header* is the end of the
    file; data cut short is ``DataLossError("truncated record at <record offset>")``; a bad
    checksum is ``corrupted record at N``, N being the record's offset for the header and the
    data's (record offset + 12) for the data (checked against TF 2.21, whose texts add a
    suffix)."""
    header = _read_checksummed(data, offset, 8)
    if header is None:
        return None
    (length,) = struct.unpack("<Q", header)
    payload = _read_checksummed(data, offset + HEADER_SIZE, length)
    if payload is None:
        raise _data_loss("truncated", offset)
    return payload, offset + HEADER_SIZE + length + FOOTER_SIZE


def _file_bytes(path: str, kind: str) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, "%s; No such file or directory" % path) from None
    if not kind:
        return raw
    try:
        return zlib.decompressobj(wbits=_WINDOW_BITS[kind]).decompress(raw)
    except zlib.error as e:
        raise errors.DataLossError(None, None, "%s: %s" % (kind, e)) from None


def tf_record_iterator(
    path: str, options: TFRecordOptions | str | int | None = None
) -> Iterator[bytes]:
    """``tf.python_io.tf_record_iterator(path, options=None)``: yields each record's payload;
    a damaged record raises DataLossError where it starts (see :func:`read_record`)."""
    data = _file_bytes(path, TFRecordOptions.get_compression_type_string(options))
    offset = 0
    while True:
        got = read_record(data, offset)
        if got is None:
            return
        record, offset = got
        yield record
