"""Partitioned variables in checkpoints: each shard saved as a slice of the full tensor, as TF
does (minitf.lib.tensor_slice, the slices of minitf.lib.tensor_bundle, the Saver).

Book section: "Sharding Variables Across Multiple Parameter Servers" (a model whose variables
are split over ps tasks, saved and restored).  The reference is
tests/data/tf_checkpoint/partitioned-3.*, written by TensorFlow 2.21
(tests/data/tf_checkpoint/make_checkpoint.py): a [200, 3] float32 variable in 3 row shards, a
[2, 5] int64 one in 2 column shards, and a scalar.  TensorFlow is not needed here.
"""

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.framework import dtypes, errors
from minitf.lib import table, tensor_bundle, tensor_slice
from minitf.lib.tensor_slice import TensorSlice

TF_PREFIX = str(Path(__file__).parent / "data" / "tf_checkpoint" / "partitioned-3")
EMB = np.arange(600, dtype=np.float32).reshape(200, 3) / 8
COLS = np.arange(10, dtype=np.int64).reshape(2, 5) - 4
EMB_ROWS = [(0, 67), (67, 67), (134, 66)]  # (start, length) of fixed_size_partitioner(3)
COL_PARTS = [(0, 3), (3, 2)]


def _tf_slices():
    """The tensors of the reference as (key, value, dtype, full shape, slice), in TF's order."""
    out = [("bias", np.float32(0.5), dtypes.float32)]
    for start, n in EMB_ROWS:
        slc = TensorSlice([start, 0], [n, 3])
        out.append(("emb", EMB[start : start + n], dtypes.float32, (200, 3), slc))
    for start, n in COL_PARTS:
        slc = TensorSlice([0, start], [2, n])
        out.append(("layer/w", COLS[:, start : start + n], dtypes.int64, (2, 5), slc))
    return out


# -- the format ---------------------------------------------------------------------------------


def test_slice_keys_are_tfs():
    """Every stored slice's key in TF's index is what slice_key makes (offsets past 63 take
    two bytes of TF's OrderedCode)."""
    keys = [k for k, _ in table.TableReader(Path(TF_PREFIX + ".index").read_bytes()).items()]
    ours = [tensor_slice.slice_key(t[0], t[4]) for t in _tf_slices()[1:]]
    assert sorted(k for k in keys if k[:1] == b"\x00") == sorted(ours)
    assert tensor_slice.slice_key("w", TensorSlice([4, 0], [3, 4])) == (
        b"\x00w\x00\x01\x01\x02\x84\x83\x80\x84"
    )


@given(st.lists(st.integers(-(2**62), 2**62), min_size=2, max_size=2))
def test_ordered_code_sorts_as_the_numbers(pair):
    """TF's signed encoding keeps order: the bytes of a < b sort before those of b."""
    a, b = sorted(pair)
    ea, eb = (tensor_slice._signed_num_increasing(x) for x in (a, b))
    assert (ea < eb) if a < b else ea == eb
    assert tensor_slice._signed_num_increasing(-1) == b"\x7f"  # a whole dimension's length


def test_tf_partitioned_checkpoint_reads_whole_and_in_any_slice():
    reader = tensor_bundle.BundleReader(TF_PREFIX)
    assert reader.names() == ["bias", "emb", "layer/w"]  # not the slices' keys
    assert reader.dtype_and_shape("emb") == (dtypes.float32, (200, 3))
    np.testing.assert_array_equal(reader.lookup("emb"), EMB)
    np.testing.assert_array_equal(reader.lookup("layer/w"), COLS)
    across = TensorSlice.parse("60,80:1,2")  # spans all three stored row shards
    np.testing.assert_array_equal(reader.lookup_slice("emb", (200, 3), across), EMB[60:140, 1:3])
    np.testing.assert_array_equal(
        reader.lookup_slice("layer/w", (2, 5), TensorSlice.parse("-:2,2")), COLS[:, 2:4]
    )


def test_minitf_writes_tfs_bytes_for_slices(tmp_path):
    prefix = str(tmp_path / "again")
    tensor_bundle.write_bundle(prefix, _tf_slices())
    for suffix in (".index", ".data-00000-of-00001"):
        assert Path(prefix + suffix).read_bytes() == Path(TF_PREFIX + suffix).read_bytes()


@st.composite
def _partitioned(draw):
    rows, cols = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    cuts = sorted(set(draw(st.lists(st.integers(1, rows - 1), max_size=4)) if rows > 1 else []))
    bounds = list(zip([0] + cuts, cuts + [rows]))
    lo = draw(st.integers(0, rows - 1))
    want = (lo, draw(st.integers(lo + 1, rows)))
    return np.arange(rows * cols, dtype=np.float64).reshape(rows, cols), bounds, want


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_partitioned())
def test_slices_round_trip_and_restore_in_any_partitioning(tmp_path, case):
    full, bounds, (lo, hi) = case
    prefix = str(tmp_path / "rt")
    whole = tensor_slice.FULL  # the columns: every shard has them all
    tensors = [
        ("v", full[a:b], dtypes.float64, full.shape, TensorSlice([a, 0], [b - a, whole]))
        for a, b in bounds
    ]
    tensor_bundle.write_bundle(prefix, tensors)
    reader = tensor_bundle.BundleReader(prefix)
    np.testing.assert_array_equal(reader.lookup("v"), full)
    got = reader.lookup_slice("v", full.shape, TensorSlice([lo, 0], [hi - lo, tensor_slice.FULL]))
    np.testing.assert_array_equal(got, full[lo:hi])


def test_slice_errors(tmp_path):
    prefix = str(tmp_path / "e")
    part = TensorSlice([0, 0], [67, 3])
    tensor_bundle.write_bundle(prefix, [("emb", EMB[:67], dtypes.float32, (200, 3), part)])
    reader = tensor_bundle.BundleReader(prefix)
    with pytest.raises(errors.NotFoundError, match="Does not have sufficient slices for "
                       "partitioned tensor emb to restore in slice_spec: 60,10:-"):  # fmt: skip
        reader.lookup_slice("emb", (200, 3), TensorSlice.parse("60,10:-"))
    with pytest.raises(errors.InvalidArgumentError, match=r"spec \[100, 3\] does not match"):
        reader.lookup_slice("emb", (100, 3), part)
    with pytest.raises(errors.InvalidArgumentError, match="is not a slice of emb"):
        reader.lookup_slice("emb", (200, 3), TensorSlice.parse("190,20:-"))
    with pytest.raises(errors.InvalidArgumentError, match="does not match the tensor's"):
        tensor_bundle.write_bundle(prefix, [("v", EMB[:3], dtypes.float32, (200, 3), part)])
    with pytest.raises(errors.InvalidArgumentError, match="saved before as another tensor"):
        tensor_bundle.write_bundle(
            prefix, [("v", EMB, dtypes.float32), ("v", EMB[:67], dtypes.float32, (200, 3), part)]
        )
    with pytest.raises(errors.InvalidArgumentError, match="starts with a 0 byte"):
        tensor_bundle.write_bundle(prefix, [("\x00v", EMB, dtypes.float32)])
    for bad in ("1,2,3", "a,1", "-1,2"):
        with pytest.raises(errors.InvalidArgumentError, match="string = %s" % bad):
            TensorSlice.parse(bad)


def test_merge_joins_the_slices_each_shard_wrote(tmp_path):
    """A sharded save writes each ps task's shards in its own bundle; the merged index lists
    every slice of the variable under its one name."""
    rows = _tf_slices()[1:4]
    parts = [str(tmp_path / "tmp" / ("part-%05d-of-00002" % i)) for i in range(2)]
    tensor_bundle.write_bundle(parts[0], rows[:1])
    tensor_bundle.write_bundle(parts[1], rows[1:])
    tensor_bundle.merge(parts, str(tmp_path / "m"))
    reader = tensor_bundle.BundleReader(str(tmp_path / "m"))
    assert len(reader.entries[b"emb"].slices) == 3 and reader.names() == ["emb"]
    np.testing.assert_array_equal(reader.lookup("emb"), EMB)


# -- the Saver ----------------------------------------------------------------------------------


def _model(emb_parts=3, col_parts=2):
    """The reference's variables, partitioned as asked (1: a plain variable)."""

    def var(name, shape, dtype, parts, axis):
        partitioner = tf.fixed_size_partitioner(parts, axis=axis) if parts > 1 else None
        return tf.get_variable(name, shape, dtype, tf.zeros_initializer(), partitioner=partitioner)

    emb = var("emb", [200, 3], tf.float32, emb_parts, 0)
    with tf.variable_scope("layer"):
        cols = var("w", [2, 5], tf.int64, col_parts, 1)
    return emb, cols, tf.Variable(np.float32(0.0), name="bias")


def test_saver_restores_tfs_partitioned_checkpoint_and_writes_its_bytes(tmp_path):
    emb, cols, bias = _model()
    assert [p._save_slice_info.spec for p in emb] == ["200 3 0,67:0,3", "200 3 67,67:0,3",
                                                      "200 3 134,66:0,3"]  # fmt: skip
    saver = tf.train.Saver()
    with tf.Session() as sess:
        saver.restore(sess, TF_PREFIX)
        np.testing.assert_array_equal(sess.run(tf.concat(list(emb), 0)), EMB)
        np.testing.assert_array_equal(sess.run(cols.as_tensor()), COLS)
        prefix = str(tmp_path / "partitioned")
        saver.save(sess, prefix, global_step=3, write_meta_graph=False, write_state=False)
    for suffix in (".index", ".data-00000-of-00001"):
        assert Path(prefix + "-3" + suffix).read_bytes() == Path(TF_PREFIX + suffix).read_bytes()
    assert tf.train.list_variables(prefix + "-3") == [("bias", []), ("emb", [200, 3]),
                                                      ("layer/w", [2, 5])]  # fmt: skip


@pytest.mark.parametrize("emb_parts, col_parts", [(5, 1), (1, 5), (2, 3)])
def test_a_checkpoint_restores_into_another_partitioning(emb_parts, col_parts):
    emb, cols, _ = _model(emb_parts, col_parts)
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, TF_PREFIX)
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(emb)), EMB)
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(cols)), COLS)


def test_sharded_saver_writes_each_devices_shards_and_merges_their_slices(tmp_path):
    """Shards of one variable on two devices (two ps tasks' stand-ins): one SaveV2 each, and
    the merged checkpoint holds the variable once, whole."""
    emb = []
    for i, (start, n) in enumerate(EMB_ROWS):
        with tf.device("/gpu:%d" % (i % 2)):
            v = tf.Variable(EMB[start : start + n], name="emb/part_%d" % i)
        v._save_slice_info = tf.Variable.SaveSliceInfo("emb", [200, 3], [start, 0], [n, 3])
        emb.append(v)
    saver = tf.train.Saver(emb, sharded=True)
    prefix = str(tmp_path / "sharded")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, prefix, write_meta_graph=False)
    assert sorted(os.listdir(tmp_path))[:3] == ["checkpoint", "sharded.data-00000-of-00002",
                                                "sharded.data-00001-of-00002"]  # fmt: skip
    np.testing.assert_array_equal(tf.train.load_variable(prefix, "emb"), EMB)
