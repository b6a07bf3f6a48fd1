"""The gradients of ``Sum``, ``Mean``, ``Max`` and ``Min`` over some axes as TF 1.15 builds
them: the kept-dims shape computed at run time (``math_ops.reduced_shape``: ``Size``, ``add``,
``mod``, ``range``, ``Fill``, ``DynamicStitch``), so any rank and any axes tensor works; and the
two ops that needs, ``DynamicStitch`` and ``FloorMod``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.ops.dynamic_stitch import dynamic_stitch


def _ops(prefix):
    return [
        (op.name[len(prefix) :], op.type, [t.name for t in op.inputs])
        for op in tf.get_default_graph().get_operations()
        if op.name.startswith(prefix)
    ]


def test_a_partial_sum_gradient_builds_tfs_reduced_shape():
    x = tf.placeholder(tf.float32, [3, 4], name="x")
    (g,) = tf.gradients(tf.reduce_sum(x, 0), [x])
    p = "gradients/Sum_grad/"
    assert _ops(p) == [
        ("Shape", "Const", []),
        ("Size", "Const", []),
        ("add", "AddV2", ["Sum/reduction_indices:0", p + "Size:0"]),
        ("mod", "FloorMod", [p + "add:0", p + "Size:0"]),
        ("Shape_1", "Const", []),
        ("range/start", "Const", []),
        ("range/delta", "Const", []),
        ("range", "Range", [p + "range/start:0", p + "Size:0", p + "range/delta:0"]),
        ("Fill/value", "Const", []),
        ("Fill", "Fill", [p + "Shape_1:0", p + "Fill/value:0"]),
        (
            "DynamicStitch",
            "DynamicStitch",
            [p + "range:0", p + "mod:0", p + "Shape:0", p + "Fill:0"],
        ),
        ("Maximum/y", "Const", []),
        ("Maximum", "Maximum", [p + "DynamicStitch:0", p + "Maximum/y:0"]),
        ("floordiv", "FloorDiv", [p + "Shape:0", p + "Maximum:0"]),
        ("Reshape", "Reshape", ["gradients/grad_ys_0:0", p + "DynamicStitch:0"]),
        ("Tile", "Tile", [p + "Reshape:0", p + "floordiv:0"]),
    ]
    # computed next to the shape they start from
    assert tf.get_default_graph().get_operation_by_name(
        p + "DynamicStitch"
    ).colocation_groups() == [b"loc:@" + (p + "Shape").encode()]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g, {x: np.zeros((3, 4))}), np.ones((3, 4)))


@settings(max_examples=30, deadline=None)
@given(
    hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4).flatmap(
        lambda s: st.tuples(
            st.just(s),
            st.lists(st.integers(-len(s), len(s) - 1), min_size=1, max_size=len(s), unique=True),
            st.sampled_from(["sum", "mean", "max", "min"]),
            st.booleans(),
        )
    )
)
def test_reduction_gradients_of_any_axes_and_unknown_shapes(case):
    shape, axes, fn, unknown = case
    if len({a % len(shape) for a in axes}) != len(axes):
        return
    rng = np.random.RandomState(len(shape) * 7 + len(axes))
    # distinct values (no ties for max and min) of order 1 (the differences stay precise)
    xv = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape)
    xv = 1.0 + xv / xv.size
    w = rng.rand(*shape)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, None if unknown else shape)  # unknown: even the rank
        reduce = {"sum": tf.reduce_sum, "mean": tf.reduce_mean}.get(fn)
        reduce = reduce or {"max": tf.reduce_max, "min": tf.reduce_min}[fn]
        loss = tf.reduce_sum(reduce(x * w, axes) ** 2)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as sess:
            got = sess.run(g, {x: xv})
            num = np.zeros(shape)
            for i in np.ndindex(*shape):
                up, down = xv.copy(), xv.copy()
                up[i] += 1e-6
                down[i] -= 1e-6
                num[i] = (sess.run(loss, {x: up}) - sess.run(loss, {x: down})) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-4)


def test_a_reduction_over_every_axis_of_unknown_rank_differentiates():
    x = tf.placeholder(tf.float32, None, name="x")
    (g,) = tf.gradients(tf.reduce_mean(x), [x])
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(g, {x: np.ones((2, 5))}), np.full((2, 5), 0.1))


def test_dynamic_stitch_merges_in_order_and_checks_shapes():
    idx = [tf.constant([0, 2]), tf.constant([[1], [2]])]
    data = [tf.constant([[1.0, 1.5], [2.0, 2.5]]), tf.constant([[[3.0, 3.5]], [[4.0, 4.5]]])]
    out = dynamic_stitch(idx, data)
    assert out.op.name == "DynamicStitch" and out.shape.as_list() == [3, 2]
    (g,) = tf.gradients(tf.reduce_sum(out * [[1.0], [2.0], [3.0]]), [data[0]])
    with tf.Session() as sess:
        # index 2 is given twice: the later data wins
        np.testing.assert_array_equal(sess.run(out), [[1, 1.5], [3, 3.5], [4, 4.5]])
        np.testing.assert_array_equal(sess.run(g), [[1, 1], [3, 3]])  # TF's: gathered rows
        bad = dynamic_stitch([tf.constant([0, 1])], [tf.constant([1.0, 2.0, 3.0])])
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(bad)
    assert e.value.message.startswith(
        "data[0].shape = [3] does not start with indices[0].shape = [2]"
    )
    with pytest.raises(ValueError, match="must match length 1 of argument 'data'"):
        dynamic_stitch(idx, data[:1])


def test_floor_mod_is_pythons_percent_and_differentiates():
    a = tf.constant([7, -7, 7, -7])
    b = tf.constant([3, 3, -3, -3])
    x = tf.placeholder(tf.float64, [3])
    y = tf.constant([2.0, -2.0, 0.75], tf.float64)
    r = x % y
    assert (a % b).op.type == "FloorMod" and r.op.name == "mod"
    gx, gy = tf.gradients(tf.reduce_sum(r), [x, y])
    with tf.Session() as sess:
        assert sess.run(a % b).tolist() == [1, 2, -2, -1]
        xv = [5.5, 5.5, 1.0]
        np.testing.assert_allclose(sess.run(r, {x: xv}), np.mod(xv, [2.0, -2.0, 0.75]))
        np.testing.assert_allclose(sess.run(gx, {x: xv}), [1, 1, 1])
        np.testing.assert_allclose(sess.run(gy, {x: xv}), -np.floor(np.divide(xv, [2, -2, 0.75])))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Integer division by zero"):
            sess.run(a % tf.constant([1, 0, 1, 1]))
