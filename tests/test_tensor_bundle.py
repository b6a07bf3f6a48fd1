"""minitf.lib.table and minitf.lib.tensor_bundle: TF's V2 checkpoint format, byte for byte.

The reference is tests/data/tf_checkpoint/model-5.*, written by real TensorFlow 2.21
(tests/data/tf_checkpoint/make_checkpoint.py); TensorFlow is not needed here.
"""

import io
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minitf.framework import dtypes, errors
from minitf.lib import crc, table, tensor_bundle
from minitf.lib.bundle_pb2 import BundleEntryProto, BundleHeaderProto

TF_PREFIX = str(Path(__file__).parent / "data" / "tf_checkpoint" / "model-5")

TF_VALUES = {
    "w": (dtypes.float32, np.arange(6, dtype=np.float32).reshape(2, 3) / 4),
    "b": (dtypes.float32, np.float32(-1.5)),
    "layer/kernel": (dtypes.int64, np.array([[1, -2], [3, 2**40]], dtype=np.int64)),
    "layer/d": (dtypes.float64, np.linspace(0, 1, 5)),
    "global_step": (dtypes.int32, np.int32(7)),
    "empty": (dtypes.float32, np.zeros((0, 4), np.float32)),
    "s": (dtypes.string, np.array([b"ab", b"", b"x" * 200], dtype=object)),
}


def _write_table(items, block_size=table.BLOCK_SIZE):
    f = io.BytesIO()
    w = table.TableWriter(f, block_size=block_size)
    for k, v in items:
        w.add(k, v)
    size = w.finish()
    assert size == len(f.getvalue())
    return f.getvalue()


# -- the table ----------------------------------------------------------------------------------


def test_tf_index_is_a_table_minitf_reads_and_rewrites_byte_for_byte():
    data = Path(TF_PREFIX + ".index").read_bytes()
    items = list(table.TableReader(data).items())
    assert [k for k, _ in items] == [b"", b"b", b"empty", b"global_step", b"layer/d",
                                     b"layer/kernel", b"s", b"w"]  # fmt: skip
    assert _write_table(items) == data
    assert data[-8:] == struct.pack("<Q", table.MAGIC)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.binary(max_size=40), st.binary(max_size=300), max_size=120),
    st.sampled_from([64, 512, table.BLOCK_SIZE]),
)
def test_table_round_trip(mapping, block_size):
    items = sorted(mapping.items())
    data = _write_table(items, block_size)
    assert list(table.TableReader(data).items()) == items


def test_separators_and_successors_are_leveldbs():
    assert table.shortest_separator(b"abcdef", b"abzz") == b"abd"
    assert table.shortest_separator(b"abc", b"abd") == b"abc"  # no room between c and d
    assert table.shortest_separator(b"ab", b"abc") == b"ab"  # a prefix of the limit
    assert table.short_successor(b"w") == b"x"
    assert table.short_successor(b"\xff\xffa") == b"\xff\xffb"
    assert table.short_successor(b"\xff") == b"\xff"


def test_table_keys_must_increase():
    w = table.TableWriter(io.BytesIO())
    w.add(b"b", b"")
    with pytest.raises(ValueError, match="increasing order"):
        w.add(b"a", b"")


def test_corrupt_table_is_data_loss():
    data = bytearray(_write_table([(b"k%03d" % i, b"v" * 10) for i in range(50)]))
    data[5] ^= 0x01
    with pytest.raises(errors.DataLossError, match="block checksum mismatch"):
        list(table.TableReader(bytes(data)).items())
    with pytest.raises(errors.DataLossError, match="bad magic number"):
        table.TableReader(bytes(data[:-1]) + b"\x00")
    with pytest.raises(errors.DataLossError, match="too short"):
        table.TableReader(b"\x00" * 10)


def test_varints():
    out = bytearray()
    for n in (0, 127, 128, 300, 2**35):
        table.put_varint(out, n)
    pos, got = 0, []
    for _ in range(5):
        n, pos = table.get_varint(bytes(out), pos)
        got.append(n)
    assert got == [0, 127, 128, 300, 2**35]
    with pytest.raises(errors.DataLossError, match="bad varint"):
        table.get_varint(b"\x80\x80", 0)


# -- bundles ------------------------------------------------------------------------------------


def test_tf_bundle_read_exactly():
    reader = tensor_bundle.BundleReader(TF_PREFIX)
    assert reader.header.num_shards == 1 and reader.header.version.producer == 1
    assert reader.names() == sorted(TF_VALUES)
    for key, (dtype, value) in TF_VALUES.items():
        assert reader.dtype_and_shape(key) == (dtype, np.shape(value))
        got = reader.lookup(key)
        assert got.dtype == np.asarray(value).dtype
        np.testing.assert_array_equal(got, value)


def test_minitf_writes_tfs_bytes(tmp_path):
    prefix = str(tmp_path / "again")
    tensor_bundle.write_bundle(prefix, [(k, v, d) for k, (d, v) in sorted(TF_VALUES.items())])
    for suffix in (".index", ".data-00000-of-00001"):
        assert Path(prefix + suffix).read_bytes() == Path(TF_PREFIX + suffix).read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["again.data-00000-of-00001", "again.index"]


_DTYPES = [dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16,
           dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.bool,
           dtypes.complex64, dtypes.complex128]  # fmt: skip


@st.composite
def _tensors(draw):
    dtype = draw(st.sampled_from(_DTYPES + [dtypes.string]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if dtype == dtypes.string:
        flat = draw(st.lists(st.binary(max_size=20), min_size=int(np.prod(shape)),
                             max_size=int(np.prod(shape))))  # fmt: skip
        return dtype, np.array(flat + [None], dtype=object)[:-1].reshape(shape)
    return dtype, draw(hnp.arrays(np.dtype(dtype.as_numpy_dtype), shape))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda k: k[0] != "\x00"), _tensors(), max_size=8
    )
)
def test_bundle_round_trip(tmp_path, tensors):
    prefix = str(tmp_path / "rt")
    tensor_bundle.write_bundle(prefix, [(k, v, d) for k, (d, v) in tensors.items()])
    reader = tensor_bundle.BundleReader(prefix)
    assert set(reader.names()) == set(tensors)
    for key, (dtype, value) in tensors.items():
        assert reader.dtype_and_shape(key) == (dtype, value.shape)
        got = reader.lookup(key)
        assert got.shape == value.shape
        np.testing.assert_array_equal(got, value)  # NaNs compare equal here


def test_corrupt_data_is_data_loss_with_a_checksum_message(tmp_path):
    prefix = str(tmp_path / "c")
    tensor_bundle.write_bundle(prefix, [("v", np.arange(4.0), dtypes.float64)])
    path = Path(prefix + ".data-00000-of-00001")
    data = bytearray(path.read_bytes())
    data[3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(errors.DataLossError, match="Checksum does not match: stored "):
        tensor_bundle.BundleReader(prefix).lookup("v")


def test_entry_checksum_is_masked_crc32c(tmp_path):
    prefix = str(tmp_path / "m")
    tensor_bundle.write_bundle(prefix, [("v", np.arange(3, dtype=np.int32), dtypes.int32)])
    entry = tensor_bundle.BundleReader(prefix).entries[b"v"]
    assert entry.crc32c == crc.masked_value(np.arange(3, dtype="<i4").tobytes())
    assert (entry.offset, entry.size, entry.dtype) == (0, 12, 3)


def test_bundle_errors(tmp_path):
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files for"):
        tensor_bundle.BundleReader(str(tmp_path / "none"))
    prefix = str(tmp_path / "e")
    tensor_bundle.write_bundle(prefix, [("v", np.zeros(2), dtypes.float64)])
    with pytest.raises(errors.NotFoundError, match="^Key z not found in checkpoint$"):
        tensor_bundle.BundleReader(prefix).lookup("z")
    with pytest.raises(errors.InvalidArgumentError, match="duplicate key: v"):
        tensor_bundle.write_bundle(prefix, [("v", np.zeros(2), dtypes.float64)] * 2)
    with pytest.raises(errors.InvalidArgumentError, match="empty key"):
        tensor_bundle.write_bundle(prefix, [("", np.zeros(2), dtypes.float64)])
    with pytest.raises(errors.NotFoundError, match="nodir/sub; No such file or directory"):
        tensor_bundle.write_bundle(str(tmp_path / "nodir" / "sub" / "x"), [])
    assert sorted(os.listdir(tmp_path)) == ["e.data-00000-of-00001", "e.index"]  # no temp files


def _rewrite_index(prefix, header=None, entry_update=None):
    items = list(table.TableReader(Path(prefix + ".index").read_bytes()).items())
    out = []
    for k, v in items:
        if k == b"" and header:
            h = BundleHeaderProto.FromString(v)
            header(h)
            v = h.SerializeToString()
        elif k and entry_update:
            e = BundleEntryProto.FromString(v)
            entry_update(e)
            v = e.SerializeToString()
        out.append((k, v))
    Path(prefix + ".index").write_bytes(_write_table(out))


def test_unsupported_bundles(tmp_path):
    prefix = str(tmp_path / "u")
    tensor_bundle.write_bundle(prefix, [("v", np.zeros(2), dtypes.float64)])
    _rewrite_index(prefix, entry_update=lambda e: e.slices.add())  # a slice of rank 0
    with pytest.raises(errors.DataLossError, match=r"Invalid slice  of v\[2\] in bundle"):
        tensor_bundle.BundleReader(prefix).lookup("v")
    _rewrite_index(prefix, header=lambda h: setattr(h.version, "min_consumer", 9))
    with pytest.raises(errors.InvalidArgumentError, match="min consumer version 9"):
        tensor_bundle.BundleReader(prefix)
    _rewrite_index(prefix, header=lambda h: setattr(h, "endianness", h.BIG))
    with pytest.raises(errors.UnimplementedError, match="big endian"):
        tensor_bundle.BundleReader(prefix)


def test_merge_renumbers_shards_and_removes_the_temp_dir(tmp_path):
    tmp = tmp_path / "m_temp_x"
    parts = [str(tmp / ("part-%05d-of-00002" % i)) for i in range(2)]
    tensor_bundle.write_bundle(parts[0], [("a", np.arange(3.0), dtypes.float64)])
    tensor_bundle.write_bundle(parts[1], [("c", np.int32(5), dtypes.int32)])
    merged = str(tmp_path / "m")
    tensor_bundle.merge(parts, merged)
    assert sorted(os.listdir(tmp_path)) == ["m.data-00000-of-00002", "m.data-00001-of-00002",
                                            "m.index"]  # fmt: skip
    reader = tensor_bundle.BundleReader(merged)
    assert reader.header.num_shards == 2
    assert [reader.entries[k].shard_id for k in (b"a", b"c")] == [0, 1]
    np.testing.assert_array_equal(reader.lookup("a"), np.arange(3.0))
    assert reader.lookup("c") == 5


def test_merge_rejects_a_key_twice(tmp_path):
    parts = [str(tmp_path / ("p%d" % i)) for i in range(2)]
    for p in parts:
        tensor_bundle.write_bundle(p, [("a", np.zeros(1), dtypes.float64)])
    with pytest.raises(errors.InvalidArgumentError, match="Duplicate tensor keyed by a"):
        tensor_bundle.merge(parts, str(tmp_path / "m"))
