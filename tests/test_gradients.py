"""tf.gradients: TF 1.15's names, aggregation, gating, colocation and errors
(reference/tf1_semantics_part2.md §16), and every registered gradient of the math and array ops
checked against central differences with hypothesis (random shapes, broadcasting included)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.ops.op_def import RegisterGradient, register_op

CHECK = settings(max_examples=15, deadline=None)


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def run(*fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(list(fetches), feed)


def max_error(x, x_shape, y, y_shape, x0, **kw):
    with tf.Session() as sess, sess.as_default():
        return tf.test.compute_gradient_error(x, x_shape, y, y_shape, x_init_value=x0, **kw)


# -- names and values of §16.4 ------------------------------------------------------------------


def test_linear_layer_gradients_have_tf_names_and_values():
    x = tf.constant([[1.0, 2.0]])
    w = tf.Variable([[1, 0.5], [-1, 2]], name="W")
    b = tf.Variable([0.5, -0.5], name="b")
    z = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.square(z), name="loss")
    gw, gb = tf.gradients(loss, [w, b])
    assert gw.name == "gradients/MatMul_grad/MatMul_1:0"
    assert gb.name == "gradients/add_grad/Reshape_1:0"
    got_z, got_loss, got_w, got_b = run(z, loss, gw, gb)
    np.testing.assert_allclose(got_z, [[-0.5, 4.0]])
    assert got_loss == pytest.approx(8.125)
    np.testing.assert_allclose(got_w, [[-0.5, 4.0], [-1.0, 8.0]])
    np.testing.assert_allclose(got_b, [-0.5, 4.0])
    assert gw.shape.as_list() == [2, 2] and gb.shape.as_list() == [2]


def test_seed_ops_and_scope_names():
    x = tf.constant(3.0)
    y = tf.square(x)
    tf.gradients(y, x)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert {"gradients/Shape", "gradients/grad_ys_0/Const", "gradients/grad_ys_0"} <= set(names)
    assert tf.get_default_graph().get_operation_by_name("gradients/grad_ys_0").type == "Fill"
    (g,) = tf.gradients(y, x)
    assert g.name.startswith("gradients_1/")


def test_contributions_meet_in_one_addn_in_tf_order():
    x = tf.constant(3.0)
    y = x * x + tf.square(x)
    (g,) = tf.gradients(y, x)
    assert g.op.type == "AddN" and g.name == "gradients/AddN:0"
    assert [t.name for t in g.op.inputs] == [
        "gradients/mul_grad/Mul:0",
        "gradients/mul_grad/Mul_1:0",
        "gradients/Square_grad/Mul_1:0",
    ]
    assert g.op.colocation_groups() == [b"loc:@gradients/mul_grad/Mul"]
    assert run(g) == [pytest.approx(12.0)]


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_mul_gradient_takes_tfs_shortcut_only_for_float32_and_int32(dtype):
    """TF's ``_MulGrad``: x, y and g of one known shape and g float32 (or int32): ``g*y`` and
    ``g*x`` with nothing reduced; any other dtype builds the reduction (Shape Consts,
    BroadcastGradientArgs, Sum, Reshape) with ``x*g`` second."""
    a, b = tf.placeholder(dtype, [2], name="a"), tf.placeholder(dtype, [2], name="b")
    ga, gb = tf.gradients(a * b, [a, b])
    ops = {op.name: op for op in tf.get_default_graph().get_operations()}
    mul_1 = [t.op.name for t in ops["gradients/mul_grad/Mul_1"].inputs]
    if dtype == tf.float32:
        assert mul_1 == ["gradients/grad_ys_0", "a"] and (ga.op.type, gb.op.type) == ("Mul", "Mul")
        assert "gradients/mul_grad/BroadcastGradientArgs" not in ops
    else:
        assert mul_1 == ["a", "gradients/grad_ys_0"]
        assert (ga.op.name, gb.op.name) == (
            "gradients/mul_grad/Reshape",
            "gradients/mul_grad/Reshape_1",
        )
        assert ops["gradients/mul_grad/Shape"].type == "Const"
    got = run(ga, gb, feed={a: [1.0, 2.0], b: [3.0, 5.0]})
    assert [g.tolist() for g in got] == [[3.0, 5.0], [1.0, 2.0]]


def test_broadcast_sub_and_div_gradients_are_wired_as_tf_1_15_builds_them():
    """TF 1.15's ``_SubGrad`` negates the summed gradient before reshaping it to y
    (``Reshape_1(Neg(Sum_1))``); ``_RealDivGrad`` builds y's with the ``*`` operator (``mul``)."""
    a, b = (
        tf.placeholder(tf.float32, [None, 3], name="a"),
        tf.placeholder(tf.float32, [3], name="b"),
    )
    _, gb = tf.gradients(a - b, [a, b])
    assert gb.op.name == "gradients/sub_grad/Reshape_1"
    assert [t.op.name for t in gb.op.inputs] == [
        "gradients/sub_grad/Neg",
        "gradients/sub_grad/Shape_1",
    ]
    assert gb.op.inputs[0].op.inputs[0].op.name == "gradients/sub_grad/Sum_1"
    _, qb = tf.gradients(a / b, [a, b], name="div")
    assert qb.op.inputs[0].op.inputs[0].op.name == "div/truediv_grad/mul"
    ones = np.ones((2, 3), np.float32)
    got = run(gb, qb, feed={a: ones * 4, b: [1.0, 2.0, 4.0]})
    np.testing.assert_allclose(got[0], [-2.0] * 3)
    np.testing.assert_allclose(got[1], [-8.0, -2.0, -0.5])


def test_tree_aggregation_sums_pairwise_in_its_own_scope():
    x = tf.constant(2.0)
    y = x * x + tf.square(x)
    (g,) = tf.gradients(y, x, aggregation_method=tf.AggregationMethod.EXPERIMENTAL_TREE)
    assert g.name.startswith("gradients/Const_gradient_sum/")
    assert run(g) == [pytest.approx(8.0)]
    with pytest.raises(ValueError, match="Invalid aggregation_method specified 7."):
        tf.gradients(y, x, aggregation_method=7)


def test_given_grad_ys_pass_through_an_identity():
    x = tf.constant([1.0, 2.0])
    y = tf.square(x)
    (g,) = tf.gradients(y, x, grad_ys=tf.constant([1.0, 10.0]))
    assert tf.get_default_graph().get_operation_by_name("gradients/grad_ys_0").type == "Identity"
    np.testing.assert_allclose(run(g)[0], [2.0, 40.0])
    with pytest.raises(ValueError, match="^Passed 2 grad_ys for 1 ys$"):
        tf.gradients(y, x, grad_ys=[tf.constant(1.0), tf.constant(2.0)])


def test_several_ys_are_summed():
    x = tf.constant(2.0)
    (g,) = tf.gradients([tf.square(x), x * 3.0], x)
    assert run(g) == [pytest.approx(7.0)]


# -- what gets no gradient -----------------------------------------------------------------------


def test_unconnected_and_integer_paths_give_none():
    x = tf.constant(1.5)
    other = tf.Variable(1.0, name="other")
    y = tf.cast(tf.cast(x, tf.int32) * 2, tf.float32)
    assert tf.gradients(y, [x, other]) == [None, None]
    (z,) = tf.gradients(y, other, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert (z.op.name, z.op.type) == ("zeros_like", "Const") and run(z) == [0.0]  # as TF


def test_stop_gradient_and_stop_gradients():
    x = tf.constant(2.0)
    a = tf.square(x)
    y = a + tf.stop_gradient(a) * x
    (g,) = tf.gradients(y, x)
    assert run(g) == [pytest.approx(4.0 + 4.0)]  # 2x from a, a from the product
    (g2,) = tf.gradients(y, x, stop_gradients=[a])
    assert run(g2) == [pytest.approx(4.0)]


def test_an_op_without_a_gradient_is_a_lookup_error():
    v = tf.Variable(1.0, name="v")
    x = tf.constant(2.0)
    y = tf.assign(v, x) * 2.0
    with pytest.raises(
        LookupError, match=r"No gradient defined for operation 'Assign' \(op type: Assign\)"
    ):
        tf.gradients(y, x)


def test_prevent_gradient_refuses_with_its_message():
    from minitf.ops.array_ops import prevent_gradient

    x = tf.constant(1.0)
    y = prevent_gradient(x, message="no second derivative here")
    assert run(y) == [1.0]
    with pytest.raises(LookupError, match="Reason: no second derivative here"):
        tf.gradients(y * 2.0, x)


register_op("MinitfTestBadGradient")


@RegisterGradient("MinitfTestBadGradient")
def _bad_gradient(op, grad):
    return tf.constant([1.0, 2.0, 3.0])


def test_a_gradient_of_the_wrong_shape_is_refused():
    from minitf.ops.op_def import apply_op

    x = tf.constant([1.0, 2.0])
    y = apply_op("MinitfTestBadGradient", [x], [(tf.float32, x.shape)], "bad").outputs[0]
    with pytest.raises(ValueError, match="Incompatible shapes between op input and calculated"):
        tf.gradients(y, x)


# -- gating and colocation -----------------------------------------------------------------------


def test_gate_gradients_wraps_an_ops_input_gradients_in_a_tuple():
    a = tf.constant([[1.0, 2.0]])
    b = tf.constant([[3.0], [4.0]])
    y = tf.matmul(a, b)
    ga, gb = tf.gradients(y, [a, b], gate_gradients=True)
    assert ga.name == "gradients/MatMul_grad/tuple/control_dependency:0"
    assert gb.name == "gradients/MatMul_grad/tuple/control_dependency_1:0"
    gate = tf.get_default_graph().get_operation_by_name("gradients/MatMul_grad/tuple/group_deps")
    assert gate.type == "NoOp" and ga.op.control_inputs == [gate]
    got_a, got_b = run(ga, gb)
    np.testing.assert_allclose(got_a, [[3.0, 4.0]])
    np.testing.assert_allclose(got_b, [[1.0], [2.0]])


def test_colocate_gradients_with_ops_puts_each_with_its_forward_op():
    with tf.device("/cpu:0"):
        x = tf.constant([1.0, 2.0])
        y = tf.square(x, name="sq")
    (g,) = tf.gradients(y, x, colocate_gradients_with_ops=True)
    assert g.op.colocation_groups() == [b"loc:@sq"]
    assert g.op.device == y.op.device
    (g2,) = tf.gradients(y, x)
    assert g2.op.colocation_groups() == [("loc:@" + g2.op.name).encode()]


def test_gradients_run_on_an_emulated_gpu():
    with tf.device("/gpu:0"):
        x = tf.constant([[1.0, -2.0], [3.0, 4.0]])
        y = tf.reduce_sum(tf.square(tf.matmul(x, x)))
        (g,) = tf.gradients(y, x)
    xv = np.array([[1.0, -2.0], [3.0, 4.0]])
    expected = 2 * (xv @ xv) @ xv.T + xv.T @ (2 * (xv @ xv))
    np.testing.assert_allclose(run(g)[0], expected, rtol=1e-5)


# -- every gradient against central differences --------------------------------------------------

dims = st.integers(min_value=1, max_value=3)
shapes = st.lists(dims, min_size=0, max_size=3)


def broadcastable(draw_shape):
    """A shape and another one that broadcasts with it (some axes 1 or missing)."""

    @st.composite
    def pair(draw):
        a = draw_shape(draw)
        b = [draw(st.sampled_from([d, 1])) for d in a]
        b = b[draw(st.integers(0, len(b))) :]
        return (a, b) if draw(st.booleans()) else (b, a)

    return pair()


pairs = broadcastable(lambda draw: draw(shapes))


def values(shape, seed, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


@CHECK
@given(pairs, st.sampled_from(["add", "sub", "mul", "div"]), st.integers(0, 99))
def test_binary_gradients(pair, kind, seed):
    sx, sy = pair
    yv = values(sy, seed + 1, 0.5, 2.0)  # away from 0 for the division
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, sx)
        y = tf.placeholder(tf.float64, sy)
        fn = {"add": tf.add, "sub": tf.subtract, "mul": tf.multiply, "div": tf.divide}[kind]
        out = fn(x, y)
        shape = out.shape.as_list()
        # central differences err by about delta²/6 · f''': 3e-5 for 2/y at y = 0.5
        assert max_error(x, sx, out, shape, values(sx, seed), extra_feed_dict={y: yv}) < 1e-4
        xv = values(sx, seed)
        assert max_error(y, sy, out, shape, yv, extra_feed_dict={x: xv}) < 1e-4


@CHECK
@given(shapes, st.integers(0, 99), st.data())
def test_reduction_gradients(shape, seed, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank)) if rank else []
    keep = data.draw(st.booleans())
    op = data.draw(st.sampled_from([tf.reduce_sum, tf.reduce_mean]))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, shape)
        out = op(x, axis=axes or None, keepdims=keep)
        err = max_error(x, shape, out, out.shape.as_list(), values(shape, seed))
        assert err < 1e-6


@CHECK
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans())
def test_matmul_gradients(m, k, n, ta, tb):
    sa = [k, m] if ta else [m, k]
    sb = [n, k] if tb else [k, n]
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float64, sa)
        b = tf.placeholder(tf.float64, sb)
        out = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
        av, bv = values(sa, 1), values(sb, 2)
        assert max_error(a, sa, out, [m, n], av, extra_feed_dict={b: bv}) < 1e-6
        assert max_error(b, sb, out, [m, n], bv, extra_feed_dict={a: av}) < 1e-6


@CHECK
@given(shapes, st.integers(0, 99), st.sampled_from(["neg", "square", "addn", "identity", "cast"]))
def test_unary_gradients(shape, seed, kind):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, shape)
        out = {
            "neg": lambda: -x,
            "square": lambda: tf.square(x),
            "addn": lambda: tf.add_n([x, tf.square(x), x]),
            "identity": lambda: tf.identity(x) * 3.0,
            "cast": lambda: tf.cast(tf.cast(x, tf.float32), tf.float64),
        }[kind]()
        assert max_error(x, shape, out, shape, values(shape, seed)) < 1e-3


@CHECK
@given(shapes, st.integers(0, 99), st.data())
def test_shape_op_gradients(shape, seed, data):
    rank = len(shape)
    reps = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(-rank - 1, rank))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, shape)
        outs = [
            tf.tile(x, reps),
            tf.reshape(x, [-1]),
            tf.expand_dims(x, axis),
            tf.fill([2, 2], tf.reduce_sum(x)),
        ]
        for out in outs:
            err = max_error(x, shape, out, out.shape.as_list(), values(shape, seed))
            assert err < 1e-6, out.op.type


def test_reductions_over_a_batch_of_unknown_size():
    x = tf.placeholder(tf.float32, [None, 3])
    loss = tf.reduce_mean(tf.reduce_sum(tf.square(x), axis=1))
    (g,) = tf.gradients(loss, x)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(run(g, feed={x: xv})[0], xv)  # d/dx mean_i(sum_j x²) = 2x/2
    assert g.shape.as_list() == [None, 3]


def test_compute_gradient_returns_both_jacobians():
    x = tf.placeholder(tf.float64, [2])
    y = x * tf.constant([2.0, 3.0], dtype=tf.float64)
    with tf.Session() as sess, sess.as_default():
        theoretical, numerical = tf.test.compute_gradient(x, [2], y, [2], x_init_value=[1.0, 1.0])
    np.testing.assert_allclose(theoretical, [[2, 0], [0, 3]])
    np.testing.assert_allclose(numerical, [[2, 0], [0, 3]], atol=1e-6)
    with pytest.raises(ValueError, match="default session"):
        tf.test.compute_gradient(x, [2], y, [2])


# -- the ops gradients are built from -------------------------------------------------------------


def test_shape_ops_values_and_names():
    x = tf.placeholder(tf.float32, [None, 3])
    s, n = tf.shape(x), tf.size(x)
    z, o = tf.zeros_like(x), tf.ones_like(x, dtype=tf.int32)
    t = tf.tile(tf.constant([[1, 2]]), [2, 3])
    p = tf.reduce_prod(tf.constant([2, 3, 4]))
    assert [op.op.type for op in (s, n, z, t, p)] == ["Shape", "Size", "ZerosLike", "Tile", "Prod"]
    assert (s.name, n.name, z.name, t.name) == ("Shape:0", "Size:0", "zeros_like:0", "Tile:0")
    assert s.shape.as_list() == [2] and t.shape.as_list() == [2, 6]
    got = run(s, n, z, o, t, p, feed={x: np.ones((2, 3))})
    assert got[0].tolist() == [2, 3] and got[1] == 6
    assert got[2].tolist() == [[0] * 3] * 2 and got[3].dtype == np.int32 and got[3].sum() == 6
    assert got[4].tolist() == [[1, 2, 1, 2, 1, 2]] * 2 and got[5] == 24


def test_shape_size_and_rank_known_when_the_graph_is_built_are_constants_as_in_tf():
    """TF 1.15's ``shape``, ``size`` and ``rank`` (``optimize=True``) return a ``Const`` of the
    op's name when the static shape answers; otherwise the op runs (recorded with TF 2.21's
    compat.v1, which does the same: ``input_producer/Size`` is a Const)."""
    known = tf.zeros([2, 3])
    s, n, r = tf.shape(known), tf.size(known), tf.rank(known)
    s64 = tf.shape(known, out_type=tf.int64)
    assert [t.op.type for t in (s, n, r, s64)] == ["Const"] * 4
    assert (s.op.name, n.op.name, r.op.name, s64.dtype) == ("Shape", "Size", "Rank", tf.int64)
    batch, empty = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.float32, [None, 0])
    anything = tf.placeholder(tf.float32)
    ops = [tf.shape(batch), tf.size(batch), tf.rank(batch), tf.size(empty), tf.rank(anything)]
    assert [t.op.type for t in ops] == ["Shape", "Size", "Const", "Const", "Rank"]
    assert ops[4].op.name == "Rank_2" and ops[4].dtype == tf.int32 and ops[4].shape.ndims == 0
    feed = {batch: np.ones((4, 3)), empty: np.ones((5, 0)), anything: np.ones((2, 2, 2))}
    got = run(s, n, r, *ops, feed=feed)
    assert [np.asarray(g).tolist() for g in got] == [[2, 3], 6, 2, [4, 3], 12, 2, 0, 3]


@pytest.mark.parametrize("keepdims", [False, True])
def test_reducing_a_tensor_of_unknown_rank_counts_its_axes_at_run_time(keepdims):
    """``reduce_sum`` over every axis of a placeholder with no shape: as TF's
    ``_ReductionDims``, the axes are ``range(0, Rank(x))`` (ops ``Rank``, ``range``)."""
    x = tf.placeholder(tf.float32)
    total = tf.reduce_sum(x, keepdims=keepdims)
    assert [(op.name, op.type) for op in tf.get_default_graph().get_operations()] == [
        ("Placeholder", "Placeholder"),
        ("Rank", "Rank"),
        ("range/start", "Const"),
        ("range/delta", "Const"),
        ("range", "Range"),
        ("Sum", "Sum"),
    ]
    assert total.shape.ndims is None
    with tf.device("/gpu:0"):  # TF 1.15 has GPU kernels for both (host memory): placed there
        on_card = tf.reduce_sum(x, keepdims=keepdims, name="on_card")
    (rank_op, range_op) = on_card.op.inputs[1].op.inputs[1].op, on_card.op.inputs[1].op
    assert (rank_op.type, range_op.type) == ("Rank", "Range")
    for value in (np.arange(6.0), np.ones((2, 3, 4)), np.float32(7.0)):
        with tf.Session() as sess:
            assert np.allclose(sess.run(on_card, {x: value}), np.sum(value, keepdims=keepdims))
        assert "GPU:0" in rank_op.device and "GPU:0" in range_op.device
        want = np.sum(value, keepdims=keepdims)
        (got,) = run(total, feed={x: value})
        assert np.shape(got) == np.shape(want) and np.allclose(got, want)


@pytest.mark.parametrize(
    "a, b, ra, rb",
    [  # what TF 2.21's BroadcastGradientArgs answered
        ([2, 1], [1], [1], [0, 1]),
        ([1], [1], [], []),
        ([2, 3], [3], [], [0]),
        ([1, 3], [2, 1], [0], [1]),
        ([], [2, 2], [0, 1], []),
        ([2, 1, 3], [1, 1, 1], [1], [0, 1, 2]),
        ([1, 1], [1], [0, 1], [0, 1]),
    ],
)
def test_broadcast_gradient_args_as_tf(a, b, ra, rb):
    from minitf.ops.array_ops import broadcast_gradient_args

    out = broadcast_gradient_args(tf.constant(a, tf.int32), tf.constant(b, tf.int32))
    got = run(*out)
    assert got[0].tolist() == ra and got[1].tolist() == rb


def test_tile_errors():
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1 for 'Tile'"):
        tf.tile(tf.constant([[1.0]]), [2])
    m = tf.placeholder(tf.int32, [None])
    t = tf.tile(tf.constant([[1.0]]), m)
    with pytest.raises(tf.errors.InvalidArgumentError, match="vector of length 2 but got length 3"):
        run(t, feed={m: [1, 2, 3]})


def test_tuple_and_with_dependencies():
    a, b = tf.constant(1.0), tf.constant(2.0)
    ta, tnone, tb = tf.tuple([a, None, b])
    assert tnone is None and ta.name == "tuple/control_dependency:0"
    assert tb.name == "tuple/control_dependency_1:0"
    assert ta.op.control_inputs[0].name == "tuple/group_deps"
    assert run(ta, tb) == [1.0, 2.0]
    with pytest.raises(ValueError, match="Must have at least one Tensor"):
        tf.tuple([None])
    v = tf.Variable(0.0)
    inc = tf.assign_add(v, 1.0)
    d = tf.with_dependencies([inc], tf.constant(5.0))
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(d) == 5.0 and sess.run(v) == 1.0


def test_gradient_registry_rules():
    from minitf.ops.op_def import NotDifferentiable, get_gradient_function

    with pytest.raises(KeyError, match="Registering two gradient with name 'MatMul'!"):
        RegisterGradient("MatMul")(lambda op, grad: None)
    with pytest.raises(TypeError, match="op_type must be a string"):
        NotDifferentiable(3)
    assert get_gradient_function(tf.shape(tf.constant(1.0)).op) is None


def test_placeholder_with_default_passes_its_gradient_to_the_default():
    x = tf.constant([1.0, 2.0])
    p = tf.placeholder_with_default(tf.square(x), shape=[2])
    (g,) = tf.gradients(p * 3.0, x)
    np.testing.assert_allclose(run(g)[0], [6.0, 12.0])
    # feeding p changes nothing: the gradient reads x, never p
    assert run(g, feed={p: [5.0, 5.0]})[0].tolist() == [6.0, 12.0]


def test_unary_gradients_are_tfs_fused_ops():
    """Log's gradient multiplies by a ``Reciprocal`` once the incoming gradient is there;
    Sqrt, Rsqrt and Reciprocal have one fused op each (as TF 2.21's compat.v1 and 1.15 build
    them), with TF's values."""
    x = tf.placeholder(tf.float32, [3], name="x")
    (g,) = tf.gradients([tf.log(x), tf.sqrt(x), tf.rsqrt(x), tf.reciprocal(x)], [x])
    listing = [
        (op.name, op.type, [t.name for t in op.inputs], [c.name for c in op.control_inputs])
        for op in tf.get_default_graph().get_operations()
        if op.name.startswith("gradients/")
        and "grad_ys" not in op.name
        and not op.name.startswith("gradients/Shape")
    ]
    assert listing == [
        ("gradients/Log_grad/Reciprocal", "Reciprocal", ["x:0"], ["gradients/grad_ys_0"]),
        (
            "gradients/Log_grad/mul",
            "Mul",
            ["gradients/grad_ys_0:0", "gradients/Log_grad/Reciprocal:0"],
            [],
        ),
        ("gradients/Sqrt_grad/SqrtGrad", "SqrtGrad", ["Sqrt:0", "gradients/grad_ys_1:0"], []),
        ("gradients/Rsqrt_grad/RsqrtGrad", "RsqrtGrad", ["Rsqrt:0", "gradients/grad_ys_2:0"], []),
        (
            "gradients/Reciprocal_grad/ReciprocalGrad",
            "ReciprocalGrad",
            ["Reciprocal:0", "gradients/grad_ys_3:0"],
            [],
        ),
        (
            "gradients/AddN",
            "AddN",
            [
                "gradients/Log_grad/mul:0",
                "gradients/Sqrt_grad/SqrtGrad:0",
                "gradients/Rsqrt_grad/RsqrtGrad:0",
                "gradients/Reciprocal_grad/ReciprocalGrad:0",
            ],
            [],
        ),
    ]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(g, {x: [0.5, 1.0, 4.0]}), [-2.7071066, 0.0, 0.375])


def test_deprecated_casts_log_tfs_warning_once(caplog, monkeypatch):
    """``tf.to_float`` & co. are ``cast`` with TF's op names, and log TF 1.15's deprecation
    warning once per function, naming the caller's line."""
    from minitf.lib import deprecation

    monkeypatch.setattr(deprecation, "warned", set())
    i = tf.constant([1, 2], name="i")
    with caplog.at_level("WARNING", logger="minitf"):
        f, f2 = tf.to_float(i), tf.to_float(i)
        d, i32, i64 = tf.to_double(i), tf.to_int32(f), tf.to_int64(i, name="wide")
    assert [t.op.name for t in (f, f2, d, i32, i64)] == [
        "ToFloat",
        "ToFloat_1",
        "ToDouble",
        "ToInt32",
        "wide",
    ]
    assert tf.to_int32(i) is i  # nothing to cast: no op, as TF
    texts = [r.getMessage() for r in caplog.records]
    assert len(texts) == 4 and texts[0].startswith("From %s:" % __file__)
    assert texts[0].endswith(
        ": to_float (from tensorflow.python.ops.math_ops) is deprecated and will be removed in "
        "a future version.\nInstructions for updating:\nUse `tf.cast` instead."
    )
    with tf.Session() as sess:
        assert sess.run(d).tolist() == [1.0, 2.0] and sess.run(d).dtype == np.float64


def test_zeros_like_and_ones_like_are_built_as_tf_builds_them():
    """A known shape: ``zeros_like`` is a constant of zeros, ``ones_like`` a ``Fill`` of a
    constant shape; an unknown one: the ``ZerosLike`` op, and ``Fill`` of a ``Shape``."""
    known = tf.placeholder(tf.float32, [2, 3], name="known")
    unknown = tf.placeholder(tf.float32, [None, 3], name="unknown")
    built = [
        tf.zeros_like(known),
        tf.zeros_like(unknown),
        tf.ones_like(known),
        tf.ones_like(unknown),
        tf.zeros_like(unknown, dtype=tf.int32),
    ]
    listing = [
        (t.op.name, t.op.type, [i.name for i in t.op.inputs], str(t.shape), t.dtype.name)
        for t in built
    ]
    assert listing == [
        ("zeros_like", "Const", [], "(2, 3)", "float32"),
        ("zeros_like_1", "ZerosLike", ["unknown:0"], "(?, 3)", "float32"),
        ("ones_like", "Fill", ["ones_like/Shape:0", "ones_like/Const:0"], "(2, 3)", "float32"),
        (
            "ones_like_1",
            "Fill",
            ["ones_like_1/Shape:0", "ones_like_1/Const:0"],
            "(?, 3)",
            "float32",
        ),
        (
            "zeros_like_2",
            "Fill",
            ["zeros_like_2/Shape:0", "zeros_like_2/Const:0"],
            "(?, 3)",
            "int32",
        ),
    ]
    assert tf.get_default_graph().get_operation_by_name("ones_like_1/Shape").type == "Shape"
    with tf.Session() as sess:
        out = sess.run(built, {known: np.ones((2, 3)), unknown: np.ones((4, 3))})
    assert [o.tolist() for o in out] == [
        [[0] * 3] * 2,
        [[0] * 3] * 4,
        [[1] * 3] * 2,
        [[1] * 3] * 4,
        [[0] * 3] * 4,
    ]
