"""Indexing tensors and variables: ``x[1:, 0]`` as TF's StridedSlice (ops/slicing.py).

The names, masks and static shapes below were recorded from TF 2.21's compat.v1 graph mode
(whose ``_slice_helper`` and shape function are 1.15's); values and gradients are checked
against numpy and central differences.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.framework import errors

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


def test_names_masks_and_static_shapes_as_tf_records_them():
    x = tf.constant(np.arange(24.0, dtype=np.float32).reshape(2, 3, 4), name="x")
    p = tf.placeholder(tf.float32, [None, 3], name="p")
    i = tf.placeholder(tf.int32, [], name="i")
    cases = [
        (x[0], (3, 4), (0, 0, 0, 0, 1)),
        (x[:, 1], (2, 4), (1, 1, 0, 0, 2)),
        (x[..., ::2], (2, 3, 2), (2, 2, 1, 0, 0)),
        (x[1, None, :, -1], (1, 3), (4, 4, 0, 2, 9)),
        (tf.shape(p)[0], (), (0, 0, 0, 0, 1)),
        (p[:, 1:], (None, 2), (1, 3, 0, 0, 0)),
        (x[i], (3, 4), (0, 0, 0, 0, 1)),
        (x[1:i], (None, 3, 4), (0, 0, 0, 0, 0)),
    ]
    for k, (y, shape, masks) in enumerate(cases):
        name = "strided_slice" + ("_%d" % k if k else "")
        assert y.name == name + ":0" and y.op.type == "StridedSlice"
        assert tuple(y.shape.as_list()) == shape, (k, y.shape)
        assert tuple(y.op.get_attr(m) for m in MASKS) == masks, k
    first = tf.get_default_graph().get_operation_by_name("strided_slice")
    assert [t.op.name for t in first.inputs] == [
        "x",
        "strided_slice/stack",
        "strided_slice/stack_1",
        "strided_slice/stack_2",
    ]
    assert [first.inputs[k].op.get_attr("value").tolist() for k in (1, 2, 3)] == [[0], [1], [1]]
    got = run([y for y, _, _ in cases], {p: np.ones((5, 3)), i: 1})
    a = np.arange(24.0).reshape(2, 3, 4)
    want = [a[0], a[:, 1], a[..., ::2], a[1, None, :, -1], 5, np.ones((5, 2)), a[1], a[1:1]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _specs(rank):
    """Index specs numpy and TF read alike: ints, slices (any bounds, non-zero steps), at most
    one ellipsis, new axes."""
    bound = st.one_of(st.none(), st.integers(-4, 4))
    part = st.one_of(
        st.integers(-1, 0),
        st.builds(slice, bound, bound, st.one_of(st.none(), st.sampled_from([-2, -1, 1, 2]))),
        st.none(),
    )
    return st.lists(part, max_size=rank + 1).flatmap(
        lambda parts: (
            st.integers(0, len(parts)).map(
                lambda at: tuple(parts[:at]) + (Ellipsis,) + tuple(parts[at:])
            )
            | st.just(tuple(parts))
        )
    )


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)), st.data())
def test_any_spec_selects_what_numpy_selects(a, data):
    spec = data.draw(_specs(a.ndim))
    dims = sum(1 for s in spec if s is not None and s is not Ellipsis)
    tf.reset_default_graph()
    if dims > a.ndim:
        with pytest.raises(ValueError, match="Index out of range using input dim"):
            tf.constant(a)[spec]
        return
    want = a[spec]
    y = tf.constant(a)[spec]
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(run(y), want)
    fed = tf.placeholder(tf.float32, [None] * a.ndim)  # static dims unknown: the run decides
    np.testing.assert_array_equal(run(fed[spec], {fed: a}), want)


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float64, (3, 4), elements=st.floats(-2, 2)), st.data())
def test_gradient_scatters_back_where_the_slice_read(x0, data):
    spec = data.draw(st.sampled_from([(1,), (slice(None), 2), (slice(None, None, -2), None)]))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, x0.shape)
        y = x[spec] * 3.0
        (g,) = tf.gradients(tf.reduce_sum(y), x)
        assert g.op.type == "StridedSliceGrad"
        with tf.Session() as sess, sess.as_default():
            want = np.zeros_like(x0)
            want[spec] = 3.0
            np.testing.assert_array_equal(sess.run(g, {x: x0}), want)
            err = tf.test.compute_gradient_error(
                x, [3, 4], y, y.shape.as_list(), x_init_value=x0, delta=1e-6
            )
    assert err < 1e-6


def test_bad_indices_get_tfs_errors():
    x = tf.constant(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError) as e:
        x[5]
    assert str(e.value) == (
        "slice index 5 of dimension 0 out of bounds. for 'strided_slice' (op: 'StridedSlice') "
        "with input shapes: [2,3], [1], [1], [1]."
    )
    with pytest.raises(ValueError, match="Index out of range using input dim 2; input has only 2"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="Multiple ellipses in slice spec not allowed"):
        x[..., ...]
    for bad in ("a", 1.5, tf.constant(1.0), (0, "b")):
        with pytest.raises(TypeError, match=r"Only integers, slices \(`:`\), ellipsis"):
            x[bad]
    i = tf.placeholder(tf.int32, [])
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(x[i], {i: 7})
        assert e.value.message == (
            "slice index 7 of dimension 0 out of bounds.\n\t [[{{node strided_slice_3}}]]"
        )
        assert sess.run(x[i], {i: -1}).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="only iterable when eager execution is enabled"):
        list(x)
    picked = x[tf.constant([True, False])]  # a bool index is boolean_mask, as in TF
    assert picked.op.name == "boolean_mask/GatherV2" and run(picked).shape == (1, 3)


def test_variables_slice_their_value_on_any_device():
    with tf.device("/gpu:0"):
        v = tf.Variable(np.arange(6.0, dtype=np.float32).reshape(3, 2), name="v")
        row = v[1]
        col = v[:, -1]
    assert row.op.inputs[0].name == "v/read:0"
    got = run([row, col])
    assert [g.tolist() for g in got] == [[2.0, 3.0], [1.0, 3.0, 5.0]]
    (grad,) = tf.gradients(tf.reduce_sum(row), v)
    assert run(grad).tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
