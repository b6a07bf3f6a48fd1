"""TFRecord files (minitf/lib/tf_record.py, ``tf.python_io``): TF's framing byte for byte, and
TF's DataLossError texts for damaged files (reference §14.2)."""

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.lib import tf_record

# reference §14.2: b"abc", b"", b"hello" as TF writes them
VECTOR = bytes.fromhex(
    "0300000000000000b099490e6162636e57f121"
    "000000000000000029039807d8ea82a2"
    "0500000000000000eab2043e68656c6c6fbb1f1c19"
)


def _write(path, records, options=None):
    with tf.python_io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)


def test_the_reference_vector_byte_for_byte(tmp_path):
    path = tmp_path / "v.tfr"
    _write(path, [b"abc", b"", b"hello"])
    assert path.read_bytes() == VECTOR
    assert list(tf.python_io.tf_record_iterator(str(path))) == [b"abc", b"", b"hello"]


def test_records_start_where_tf_record_reader_keys_say():
    # TFRecordReader's keys are byte offsets: :0, :19, :35
    assert tf_record.read_record(VECTOR, 0) == (b"abc", 19)
    assert tf_record.read_record(VECTOR, 19) == (b"", 35)
    assert tf_record.read_record(VECTOR, 35) == (b"hello", 56)
    assert tf_record.read_record(VECTOR, 56) is None


@settings(max_examples=30, deadline=None)
@given(
    records=st.lists(st.binary(max_size=300), max_size=8),
    compression=st.sampled_from([None, "", "ZLIB", "GZIP", 0, 1, 2]),
)
def test_round_trip(tmp_path_factory, records, compression):
    path = tmp_path_factory.mktemp("rt") / "r.tfr"
    _write(path, records, compression)
    options = tf.python_io.TFRecordOptions(compression)
    assert list(tf.python_io.tf_record_iterator(str(path), options)) == records


def test_str_records_are_written_as_utf8(tmp_path):
    _write(tmp_path / "s.tfr", ["é"])
    assert list(tf.python_io.tf_record_iterator(str(tmp_path / "s.tfr"))) == ["é".encode()]


@pytest.mark.parametrize("cut", [47, 50, 55])
def test_a_record_cut_short_is_a_truncated_record_at_its_offset(tmp_path, cut):
    # cut inside the third record's data (or right after its header): TF reports where the
    # record starts (TF 2.21 adds "' failed with Read less bytes than requested")
    path = tmp_path / "t.tfr"
    path.write_bytes(VECTOR[:cut])
    it = tf.python_io.tf_record_iterator(str(path))
    assert next(it) == b"abc"
    assert next(it) == b""
    with pytest.raises(tf.errors.DataLossError, match=r"^truncated record at 35$"):
        next(it)


def test_a_partial_header_ends_the_file(tmp_path):
    # TF's buffered reader reports a short header read as the end of the file (TF 2.21 too)
    path = tmp_path / "h.tfr"
    path.write_bytes(VECTOR[:40])
    assert list(tf.python_io.tf_record_iterator(str(path))) == [b"abc", b""]


def test_corrupted_data_and_header(tmp_path):
    data = bytearray(VECTOR)
    data[50] ^= 1  # inside b"hello": the data's checksum fails where the data starts
    (tmp_path / "d.tfr").write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError, match=r"^corrupted record at 47$"):
        list(tf.python_io.tf_record_iterator(str(tmp_path / "d.tfr")))
    data = bytearray(VECTOR)
    data[20] ^= 1  # the second record's length: its header checksum fails at its offset
    (tmp_path / "l.tfr").write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError, match=r"^corrupted record at 19$"):
        list(tf.python_io.tf_record_iterator(str(tmp_path / "l.tfr")))


def test_corrupt_compressed_stream_is_data_loss(tmp_path):
    (tmp_path / "z.tfr").write_bytes(b"not zlib at all")
    with pytest.raises(tf.errors.DataLossError, match="ZLIB"):
        list(tf.python_io.tf_record_iterator(str(tmp_path / "z.tfr"), "ZLIB"))


def test_missing_file_is_not_found(tmp_path):
    path = str(tmp_path / "nope.tfr")
    with pytest.raises(tf.errors.NotFoundError, match="nope.tfr; No such file or directory"):
        list(tf.python_io.tf_record_iterator(path))


def test_writer_truncates_flushes_and_closes(tmp_path):
    path = tmp_path / "w.tfr"
    path.write_bytes(b"old contents")
    w = tf.python_io.TFRecordWriter(str(path))
    assert path.read_bytes() == b""  # opened (truncated) at construction
    w.write(b"abc")
    w.flush()
    assert path.read_bytes() == VECTOR[:19]
    w.close()
    w.close()  # closing again does nothing
    with pytest.raises(tf.errors.FailedPreconditionError, match="^Writer is closed.$"):
        w.write(b"x")
    with pytest.raises(tf.errors.FailedPreconditionError, match="^Writer is closed.$"):
        w.flush()


def test_compressed_writer_flush_makes_records_readable(tmp_path):
    path = tmp_path / "g.tfr"
    w = tf.python_io.TFRecordWriter(str(path), tf.python_io.TFRecordCompressionType.GZIP)
    w.write(b"abc")
    w.flush()
    assert zlib.decompressobj(wbits=31).decompress(path.read_bytes()) == VECTOR[:19]
    w.close()


def test_options():
    opts = tf.python_io.TFRecordOptions
    assert opts.get_compression_type_string(None) == ""
    assert opts.get_compression_type_string(tf.python_io.TFRecordCompressionType.NONE) == ""
    assert opts.get_compression_type_string(opts("GZIP")) == "GZIP"
    assert opts(1).compression_type == "ZLIB"
    with pytest.raises(ValueError, match='^Not a valid compression_type: "LZ"$'):
        opts("LZ")
    with pytest.raises(ValueError, match="Not a valid compression_type"):
        opts(7)
