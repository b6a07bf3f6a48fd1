"""The forward ops of a small MLP: tf.exp ... tf.argmax, tf.nn, initializers, tf.layers.dense.

Book section: "Training" (the chapter's replicas train an MLP).  Values are checked against
numpy, names, op types, static shapes and error texts against TF 1.15
(reference/tf1_semantics_part2.md §16.2 and §16.4); the CUDA path runs under Numba's simulator.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.framework import errors
from minitf.ops import init_ops, nn_ops

FEW = settings(max_examples=15, deadline=None)


def run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def floats(shape=None, low=-5.0, high=5.0):
    shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
    return hnp.arrays(
        np.float32,
        shape if shape is not None else shapes,
        elements=st.floats(low, high, width=32, allow_nan=False),
    )


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------
# Math ops
# ---------------------------------------------------------------------------------------

UNARY = {
    "exp": (tf.exp, "Exp", np.exp),
    "log": (tf.log, "Log", np.log),
    "sqrt": (tf.sqrt, "Sqrt", np.sqrt),
    "rsqrt": (tf.rsqrt, "Rsqrt", lambda v: 1 / np.sqrt(v)),
    "abs": (tf.abs, "Abs", np.abs),
    "floor": (tf.floor, "Floor", np.floor),
    "relu": (tf.nn.relu, "Relu", lambda v: np.maximum(v, 0)),
    "sigmoid": (tf.sigmoid, "Sigmoid", np_sigmoid),
    "tanh": (tf.tanh, "Tanh", np.tanh),
}


@FEW
@given(st.sampled_from(sorted(UNARY)), floats())
def test_unary_ops_match_numpy(name, x):
    tf.reset_default_graph()
    fn, op_type, ref = UNARY[name]
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.5
    y = fn(tf.constant(x))
    assert y.op.type == op_type and y.op.name == op_type
    assert y.shape.as_list() == list(x.shape) and y.dtype == tf.float32
    np.testing.assert_allclose(run(y), ref(x), rtol=1e-5, atol=1e-6)


def test_unary_ops_names_and_dtype_errors():
    x = tf.constant([1.0])
    assert tf.exp(x, name="e").name == "e:0"
    assert tf.abs(x).name == "Abs:0" and tf.sigmoid(x).name == "Sigmoid:0"
    assert tf.nn.sigmoid is tf.sigmoid and tf.nn.tanh is tf.tanh
    inputs = [f([1.0]).op.inputs[0].name for f in (tf.exp, tf.nn.relu, tf.nn.l2_loss, tf.sigmoid)]
    assert inputs == ["Exp/x:0", "Relu/features:0", "L2Loss/t:0", "Sigmoid_1/x:0"]
    with pytest.raises(TypeError, match="complex128 not in list of allowed values: bfloat16, "):
        tf.floor(tf.constant([1j]))
    with pytest.raises(TypeError) as e:
        tf.exp(tf.constant([1, 2]))
    assert str(e.value) == (
        "Value passed to parameter 'x' has DataType int32 not in list of allowed values: "
        "bfloat16, float16, float32, float64, complex64, complex128"
    )
    np.testing.assert_array_equal(run(tf.abs(tf.constant([-3, 2]))), [3, 2])
    np.testing.assert_array_equal(run(tf.nn.relu(tf.constant([-3, 2]))), [0, 2])


def test_log_and_sqrt_edges_are_tfs_inf_and_nan():
    v = run([tf.log(tf.constant([0.0, -1.0])), tf.sqrt(tf.constant([-1.0]))])
    assert v[0][0] == -np.inf and np.isnan(v[0][1]) and np.isnan(v[1][0])


COMPARE = {
    "equal": (tf.equal, "Equal", np.equal),
    "not_equal": (tf.not_equal, "NotEqual", np.not_equal),
    "less": (tf.less, "Less", np.less),
    "less_equal": (tf.less_equal, "LessEqual", np.less_equal),
    "greater": (tf.greater, "Greater", np.greater),
    "greater_equal": (tf.greater_equal, "GreaterEqual", np.greater_equal),
    "maximum": (tf.maximum, "Maximum", np.maximum),
    "minimum": (tf.minimum, "Minimum", np.minimum),
}


@FEW
@given(
    st.sampled_from(sorted(COMPARE)),
    hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    st.data(),
)
def test_binary_ops_broadcast_like_numpy(name, shapes, data):
    tf.reset_default_graph()
    fn, op_type, ref = COMPARE[name]
    a = data.draw(floats(shapes.input_shapes[0], -2, 2).map(np.round))
    b = data.draw(floats(shapes.input_shapes[1], -2, 2).map(np.round))
    out = fn(tf.constant(a), tf.constant(b))
    assert out.op.type == op_type and out.op.name == op_type
    assert out.shape.as_list() == list(shapes.result_shape)
    assert out.dtype == (tf.float32 if name in ("maximum", "minimum") else tf.bool)
    value = run(out)
    np.testing.assert_array_equal(value, ref(a, b))


def test_comparison_operators_and_shape_errors():
    x = tf.constant([1.0, 2.0, 3.0])
    assert (x >= 2.0).op.type == "GreaterEqual" and (x < 2.0).op.type == "Less"
    np.testing.assert_array_equal(run([x > 2.0, x <= 2.0])[0], [False, False, True])
    v = tf.Variable([1.0, 3.0])
    assert (v > 2.0).op.type == "Greater" and (v <= 2.0).op.type == "LessEqual"
    with pytest.raises(ValueError) as e:
        tf.equal(tf.constant([1.0, 2.0]), x)
    assert str(e.value) == (
        "Dimensions must be equal, but are 2 and 3 for 'Equal' (op: 'Equal') with input "
        "shapes: [2], [3]."
    )
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        run(tf.less(p, x), {p: [1.0, 2.0]})


def test_argmax_names_shapes_and_errors():
    a = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], np.float32)
    x = tf.constant(a)
    m0, m1 = tf.argmax(x), tf.argmax(x, axis=1)
    m2 = tf.argmax(x, dimension=-1, output_type=tf.int32, name="best")
    assert (m0.name, m1.name, m2.name) == ("ArgMax:0", "ArgMax_1:0", "best:0")
    assert m0.shape.as_list() == [3] and m1.shape.as_list() == [2]
    assert m0.dtype == tf.int64 and m2.dtype == tf.int32
    assert m1.op.inputs[1].op.name == "ArgMax_1/dimension"
    v0, v1, v2 = run([m0, m1, m2])
    np.testing.assert_array_equal(v0, a.argmax(0))
    np.testing.assert_array_equal(v1, a.argmax(1))
    assert v2.dtype == np.int32
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'dimension'"):
        tf.argmax(x, axis=0, dimension=0)
    with pytest.raises(ValueError) as e:
        tf.argmax(x, 2)
    assert str(e.value) == (
        "Expected dimension in the range [-2, 2), but got 2 for 'ArgMax_2' (op: 'ArgMax') "
        "with input shapes: [2,3], []."
    )


@FEW
@given(floats(), st.data())
def test_reduce_max_min_and_arg_max_min_match_numpy(x, data):
    tf.reset_default_graph()
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    keep = data.draw(st.booleans())
    for reduce, arg, np_reduce, np_arg, op_type in (
        (tf.reduce_max, tf.argmax, np.max, np.argmax, "Max"),
        (tf.reduce_min, tf.argmin, np.min, np.argmin, "Min"),
    ):
        out = reduce(tf.constant(x), axis=axis, keepdims=keep)
        expected = np_reduce(x, axis=axis, keepdims=keep)
        assert out.op.type == op_type and out.shape.as_list() == list(expected.shape)
        where = arg(tf.constant(x), axis=axis or 0, output_type=tf.int32)
        assert where.op.type == "Arg" + op_type and where.dtype == tf.int32
        got, at = run([out, where])
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(at, np_arg(x, axis=axis or 0))


def test_reductions_name_their_axes_as_tf_does():
    """An axis given is converted in the op's scope (``Sum/reduction_indices``, as given: a
    scalar stays a scalar); every axis, when none is given, is a ``Const`` built before it."""
    x = tf.zeros([2, 3])
    tf.reduce_sum(x, 1)
    tf.reduce_mean(x, axis=[0, 1])
    tf.reduce_min(x)
    tf.reduce_sum(x, 1, name="s")
    empty = tf.reduce_min(tf.zeros([0, 2]), 0)
    assert [(op.name, op.type) for op in tf.get_default_graph().get_operations()][1:11] == [
        ("Sum/reduction_indices", "Const"),
        ("Sum", "Sum"),
        ("Mean/reduction_indices", "Const"),
        ("Mean", "Mean"),
        ("Const", "Const"),
        ("Min", "Min"),
        ("s/reduction_indices", "Const"),
        ("s", "Sum"),
        ("zeros_1", "Const"),
        ("Min_1/reduction_indices", "Const"),
    ]
    indices = tf.get_default_graph().get_operation_by_name("Sum/reduction_indices")
    assert indices.get_attr("value").shape == ()
    assert run(empty).tolist() == [np.inf, np.inf]  # Min's identity over no element


def test_in_top_k_names_values_and_errors():
    """The book's accuracy op: ``in_top_k/InTopKV2`` (k a Const in the op's scope); ties at
    the boundary count as in; a non-finite row or a target out of range is False (TF's
    functor, the same in TF 2.21)."""
    logits, y = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.int32, [None])
    top1, top2 = tf.nn.in_top_k(logits, y, 1), tf.nn.in_top_k(logits, y, 2, name="top2")
    assert (top1.name, top2.name, top1.dtype) == ("in_top_k/InTopKV2:0", "top2/top2:0", tf.bool)
    assert top1.op.inputs[2].op.name == "in_top_k/InTopKV2/k" and top1.shape.as_list() == [None]
    scores = np.array([[1, 2, 2], [np.nan, 1, 0], [3, 1, 0], [0, 5, 1]], np.float32)
    got = run([top1, top2], {logits: scores, y: [1, 1, 0, 2]})
    assert [g.tolist() for g in got] == [[True, False, True, False], [True, False, True, True]]
    assert run(top1, {logits: scores, y: [5, -1, 0, 1]}).tolist() == [False, False, True, True]
    with pytest.raises(ValueError) as e:
        tf.nn.in_top_k(tf.zeros([2, 3]), [1, 2, 0], 1)
    assert str(e.value) == (
        "Dimensions must be equal, but are 2 and 3 for 'in_top_k_1/InTopKV2' (op: 'InTopKV2') "
        "with input shapes: [2,3], [3], []."
    )
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        tf.nn.in_top_k(tf.zeros([3]), [1, 2, 0], 1)
    with pytest.raises(TypeError, match="'predictions' has DataType float64"):
        tf.nn.in_top_k(tf.zeros([2, 3], tf.float64), [1, 2], 1)
    p, t = tf.placeholder(tf.float32), tf.placeholder(tf.int32)
    with pytest.raises(errors.InvalidArgumentError, match="First dimension of predictions 2"):
        run(tf.nn.in_top_k(p, t, 1), {p: np.zeros((2, 3)), t: [0, 1, 2]})
    assert tf.gradients(tf.cast(top1, tf.float32), logits) == [None]


def test_chapter_11_activations_as_tf_names_and_computes_them():
    """``Elu``, ``Selu`` and ``LeakyRelu`` (alpha an attribute, integer features cast to
    float32); the values TF 2.21 printed for [-1, 0, 2], and their gradients' op names."""
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    ys = [tf.nn.elu(x), tf.nn.leaky_relu(x), tf.nn.leaky_relu(x, alpha=0.1, name="lr")]
    ys.append(tf.nn.selu(x))
    assert [y.name for y in ys] == ["Elu:0", "LeakyRelu:0", "lr:0", "Selu:0"]
    assert ys[2].op.get_attr("alpha") == pytest.approx(0.1) and ys[2].shape.as_list() == [None, 3]
    (g,) = tf.gradients([tf.reduce_sum(y) for y in ys], x)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    for grad_op in ("Elu_grad/EluGrad", "LeakyRelu_grad/LeakyReluGrad", "Selu_grad/SeluGrad"):
        assert "gradients/" + grad_op in names
    got = run(ys + [g], {x: [[-1.0, 0.0, 2.0]]})
    want = [
        [-0.63212055, 0.0, 2.0],
        [-0.2, 0.0, 2.0],
        [-0.1, 0.0, 2.0],
        [-1.1113307, 0.0, 2.101402],
        [1.314648, 2.3507009, 4.050701],  # TF's gradients at -1, 0 (EluGrad: 1) and 2
    ]
    for got_row, want_row in zip(got, want):
        np.testing.assert_allclose(got_row[0], want_row, rtol=1e-6)
    assert tf.nn.leaky_relu(tf.constant([1, 2])).dtype == tf.float32
    with pytest.raises(TypeError, match="has DataType int32 not in list of allowed values"):
        tf.nn.elu(tf.constant([1, 2]))


def test_logical_and_or_and_any_all_as_tf():
    """``LogicalAnd``/``LogicalOr`` broadcast bool tensors; ``Any``/``All`` reduce them (the
    graph and values recorded from TF 2.21 compat.v1); non-bool inputs get TF's TypeError."""
    a = tf.placeholder(tf.bool, [None, 3], name="a")
    b = tf.constant([True, False, True])
    ys = [tf.logical_and(a, b), tf.logical_or(a, b, name="o"), tf.reduce_any(a)]
    ys += [tf.reduce_all(a, axis=1), tf.reduce_any(a, 0, keepdims=True)]
    assert [y.name for y in ys] == ["LogicalAnd:0", "o:0", "Any:0", "All:0", "Any_1:0"]
    assert [y.shape.as_list() for y in ys] == [[None, 3], [None, 3], [], [None], [1, 3]]
    assert ys[3].op.inputs[1].op.name == "All/reduction_indices"
    got = run(ys, {a: [[True, True, False], [False, False, False]]})
    assert [np.asarray(g).tolist() for g in got] == [
        [[True, False, False], [False, False, False]],
        [[True, True, True], [True, False, True]],
        True,
        [False, False],
        [[True, True, False]],
    ]
    with pytest.raises(TypeError, match="Input 'x' of 'LogicalAnd' Op has type float32"):
        tf.logical_and(tf.constant(1.0), b)
    with pytest.raises(TypeError, match="Input 'input' of 'Any' Op has type float32"):
        tf.reduce_any(tf.constant([1.0]))


def test_clip_by_value_names_values_and_shapes():
    """``Minimum`` then the ``Maximum`` named after the scope; bounds may not grow t."""
    t = tf.constant([[-3.0, 0.5], [2.0, 9.0]])
    c = tf.clip_by_value(t, -1.0, 1.0)
    assert (c.op.name, c.op.type, c.op.inputs[0].op.name) == (
        "clip_by_value",
        "Maximum",
        "clip_by_value/Minimum",
    )
    assert run(c).tolist() == [[-1.0, 0.5], [1.0, 1.0]]
    with pytest.raises(ValueError, match=r"Shapes \(2,\) and \(2, 2\) are not compatible"):
        tf.clip_by_value(tf.zeros([2]), tf.zeros([2, 2]), 1.0)


def test_where_selects_and_finds():
    c = tf.constant([[True, False], [False, True]])
    x, y = tf.constant([[1, 2], [3, 4]]), tf.constant([[10, 20], [30, 40]])
    s = tf.where(c, x, y)
    rows = tf.where(tf.constant([True, False]), x, y)
    coords = tf.where(c)
    assert s.op.type == "Select" and s.name == "Select:0" and s.shape.as_list() == [2, 2]
    assert coords.op.type == "Where" and coords.shape.as_list() == [None, 2]
    vs, vr, vc = run([s, rows, coords])
    np.testing.assert_array_equal(vs, [[1, 20], [30, 4]])
    np.testing.assert_array_equal(vr, [[1, 2], [30, 40]])
    np.testing.assert_array_equal(vc, [[0, 0], [1, 1]])
    assert vc.dtype == np.int64
    with pytest.raises(ValueError, match="x and y must both be non-None or both be None."):
        tf.where(c, x)
    with pytest.raises(ValueError, match="'Select_2' \\(op: 'Select'\\)"):
        tf.where(c, x, tf.constant([1, 2, 3]))


# ---------------------------------------------------------------------------------------
# tf.nn
# ---------------------------------------------------------------------------------------


def test_softmax_and_log_softmax_are_stable():
    logits = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]], np.float32)
    s = tf.nn.softmax(tf.constant(logits))
    ls = tf.nn.log_softmax(tf.constant(logits), name="ls")
    assert (s.name, ls.name) == ("Softmax:0", "ls:0") and s.shape.as_list() == [2, 3]
    vs, vls = run([s, ls])
    np.testing.assert_allclose(vs, np_softmax(logits.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(vls[0], np.log(np_softmax(logits[:1]))[0], rtol=1e-6)
    np.testing.assert_allclose(vls[1], [0.0, -1000.0, -2000.0])
    with pytest.raises(ValueError) as e:
        tf.nn.softmax(tf.constant(1.0))
    assert str(e.value) == (
        "Shape must be at least rank 1 but is rank 0 for 'Softmax_1' (op: 'Softmax') with "
        "input shapes: []."
    )
    assert tf.nn.softmax(tf.constant(logits), axis=1, name="sm").name == "sm:0"
    with pytest.raises(ValueError, match="last axis only"):
        tf.nn.softmax(tf.constant(logits), axis=0)


@FEW
@given(floats(), floats(low=-20, high=20))
def test_softmax_rows_sum_to_one(x, y):
    tf.reset_default_graph()
    s, ls = run([tf.nn.softmax(tf.constant(x)), tf.nn.log_softmax(tf.constant(y))])
    np.testing.assert_allclose(s.sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(s, np_softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.exp(ls).sum(axis=-1), 1.0, rtol=1e-5)


def test_bias_add_values_names_and_errors():
    b = tf.nn.bias_add([[1.0, 2.0], [3.0, 4.0]], [10.0, 20.0])
    assert b.name == "BiasAdd:0" and b.op.get_attr("data_format") == "NHWC"
    assert [t.op.name for t in b.op.inputs] == ["BiasAdd/input", "BiasAdd/bias"]
    np.testing.assert_array_equal(run(b), [[11, 22], [13, 24]])
    with pytest.raises(ValueError) as e:
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([2]))
    assert str(e.value) == (
        "Dimensions must be equal, but are 3 and 2 for 'BiasAdd_1' (op: 'BiasAdd') with "
        "input shapes: [2,3], [2]."
    )
    with pytest.raises(ValueError, match="Shape must be at least rank 2 but is rank 1"):
        tf.nn.bias_add(tf.zeros([3]), tf.zeros([3]))
    with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 2"):
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([1, 3]))
    p = tf.placeholder(tf.float32, [2, None])
    with pytest.raises(errors.InvalidArgumentError) as e:
        run(tf.nn.bias_add(p, [1.0, 2.0]), {p: np.zeros((2, 3))})
    assert (
        "Must provide as many biases as the last dimension of the input tensor: [2] vs. [2,3]"
        in (e.value.message)
    )


def test_gradient_helper_ops():
    g = tf.constant([1.0, 2.0, 3.0])
    r = nn_ops.relu_grad(g, tf.constant([-1.0, 0.0, 2.0]))
    y = tf.constant([0.5, 0.25, 0.0])
    sg, tg = nn_ops.sigmoid_grad(y, g), nn_ops.tanh_grad(y, g)
    bg = nn_ops.bias_add_grad(tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert [t.op.type for t in (r, sg, tg, bg)] == [
        "ReluGrad",
        "SigmoidGrad",
        "TanhGrad",
        "BiasAddGrad",
    ]
    assert bg.shape.as_list() == [2]
    vr, vs, vt, vb = run([r, sg, tg, bg])
    np.testing.assert_array_equal(vr, [0, 0, 3])
    np.testing.assert_allclose(vs, [0.25, 2 * 0.1875, 0])
    np.testing.assert_allclose(vt, [0.75, 2 * 0.9375, 3])
    np.testing.assert_array_equal(vb, [9, 12])
    with pytest.raises(ValueError, match="Shape must be at least rank 2 but is rank 1"):
        nn_ops.bias_add_grad(g)


def test_l2_loss():
    x = tf.constant([[1.0, 2.0], [3.0, -4.0]])
    loss = tf.nn.l2_loss(x)
    assert loss.name == "L2Loss:0" and loss.shape.ndims == 0
    assert run(loss) == pytest.approx(15.0)
    with pytest.raises(TypeError, match="parameter 't' has DataType int32"):
        tf.nn.l2_loss(tf.constant([1, 2]))


def test_sparse_xent_conformance_values_and_names():
    """§16.4: logits [[1,2,3]], label [2] -> 0.40760595; backprop softmax - one_hot."""
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([2]), logits=tf.constant([[1.0, 2.0, 3.0]])
    )
    assert loss.name == "SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits:0"
    assert loss.shape.as_list() == [1]
    value, backprop = run([loss, loss.op.outputs[1]])
    np.testing.assert_allclose(value, [0.40760595], rtol=1e-6)
    np.testing.assert_allclose(backprop, [[0.090031, 0.244728, -0.334759]], atol=1e-6)
    named = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=[0], logits=[[1.0, 2.0]], name="xent"
    )
    assert named.name == "xent/xent:0"


def test_sparse_xent_errors_are_tfs():
    logits = tf.constant([[1.0, 2.0, 3.0]])
    f = tf.nn.sparse_softmax_cross_entropy_with_logits
    with pytest.raises(ValueError) as e:
        f(tf.constant([2]), logits)
    assert str(e.value) == (
        "Only call `sparse_softmax_cross_entropy_with_logits` with named arguments "
        "(labels=..., logits=..., ...)"
    )
    with pytest.raises(ValueError, match="^Both labels and logits must be provided.$"):
        f(logits=logits)
    with pytest.raises(ValueError) as e:
        f(labels=tf.constant([[2]]), logits=logits)
    assert str(e.value) == (
        "Rank mismatch: Rank of labels (received 2) should equal rank of logits minus 1 "
        "(received 2)."
    )
    with pytest.raises(ValueError, match=r"^Logits cannot be scalars - received shape \(\).$"):
        f(labels=tf.constant(1), logits=tf.constant(1.0))
    labels = tf.placeholder(tf.int32, [1])
    with pytest.raises(errors.InvalidArgumentError) as e:
        run(f(labels=labels, logits=logits), {labels: [5]})
    assert e.value.message.startswith(
        "Received a label value of 5 which is outside the valid range of [0, 3).  Label values: 5"
    )


def test_sparse_xent_of_higher_rank_logits_and_half():
    logits = np.random.RandomState(0).randn(2, 3, 4).astype(np.float32)
    labels = np.array([[0, 1, 3], [2, 2, 0]])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    assert loss.shape.as_list() == [2, 3]
    expected = -np.log(np.take_along_axis(np_softmax(logits), labels[..., None], -1))[..., 0]
    np.testing.assert_allclose(run(loss), expected, rtol=1e-5)
    half = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=[2], logits=tf.constant([[1.0, 2.0, 3.0]], tf.float16)
    )
    assert half.dtype == tf.float16
    np.testing.assert_allclose(run(half), [0.4076], rtol=1e-3)


def test_xent_v2_conformance_values_and_names():
    """§16.4: labels [[0,.5,.5]], logits [[1,2,3]] -> 0.9076059; backprop softmax - labels."""
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(
        labels=tf.constant([[0.0, 0.5, 0.5]]), logits=tf.constant([[1.0, 2.0, 3.0]])
    )
    assert loss.name == "softmax_cross_entropy_with_logits/Reshape_2:0"
    fused = loss.op.inputs[0].op
    assert fused.name == "softmax_cross_entropy_with_logits"
    assert fused.type == "SoftmaxCrossEntropyWithLogits"
    assert [t.op.name for t in fused.inputs] == [
        "softmax_cross_entropy_with_logits/Reshape",
        "softmax_cross_entropy_with_logits/Reshape_1",
    ]
    value, backprop = run([loss, fused.outputs[1]])
    np.testing.assert_allclose(value, [0.9076059], rtol=1e-6)
    np.testing.assert_allclose(backprop, [[0.090031, -0.255272, 0.165241]], atol=1e-6)


@FEW
@given(st.integers(1, 4), st.integers(2, 5), st.integers(0, 2**16))
def test_xent_losses_match_numpy(batch, classes, seed):
    tf.reset_default_graph()
    rng = np.random.RandomState(seed)
    logits = (rng.randn(batch, classes) * 3).astype(np.float32)
    probs = rng.dirichlet(np.ones(classes), size=batch).astype(np.float32)
    labels = rng.randint(0, classes, size=batch)
    x = tf.placeholder(tf.float32, [None, classes])
    dense = tf.nn.softmax_cross_entropy_with_logits_v2(labels=probs, logits=x)
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x)
    assert dense.shape.is_compatible_with([batch]) and sparse.shape.as_list() == [batch]
    vd, vs = run([dense, sparse], {x: logits})
    logp = np.log(np_softmax(logits.astype(np.float64)))
    np.testing.assert_allclose(vd, -(probs * logp).sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vs, -logp[np.arange(batch), labels], rtol=1e-5, atol=1e-6)


def test_one_hot():
    oh = tf.one_hot([0, 2, 5], 3)
    assert oh.name == "one_hot:0" and oh.op.type == "OneHot" and oh.dtype == tf.float32
    assert oh.shape.as_list() == [3, 3]
    assert [t.op.name for t in oh.op.inputs] == [
        "one_hot/indices",
        "one_hot/depth",
        "one_hot/on_value",
        "one_hot/off_value",
    ]
    cols = tf.one_hot([[1, 0]], 2, on_value=5, off_value=-1, axis=0)
    assert cols.dtype == tf.int32 and cols.shape.as_list() == [2, 1, 2]
    v, c = run([oh, cols])
    np.testing.assert_array_equal(v, [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(c, np.moveaxis(np.array([[[-1, 5], [5, -1]]]), -1, 0))
    with pytest.raises(TypeError, match="dtype <dtype: 'int32'> of on_value does not match"):
        tf.one_hot([0], 2, on_value=1, dtype=tf.float32)
    with pytest.raises(ValueError, match="Expected axis to be -1 or between \\[0, 2\\)"):
        tf.one_hot([0], 2, axis=-2)


def test_dropout_keeps_and_scales():
    x = tf.ones([50, 40])
    d = tf.nn.dropout(x, keep_prob=0.5, seed=3)
    assert d.name == "dropout/mul_1:0" and d.shape.as_list() == [50, 40]
    types = {op.type for op in tf.get_default_graph().get_operations()}
    assert {"RandomUniform", "GreaterEqual", "Cast"} <= types
    with tf.Session() as sess:
        a, b = sess.run(d), sess.run(d)
    assert set(np.unique(a)) <= {0.0, 2.0} and not np.array_equal(a, b)
    assert 0.35 < (a == 2.0).mean() < 0.65
    same = tf.nn.dropout(x, rate=0.5, seed=3, noise_shape=[50, 1])
    v = run(same)
    assert all(len(set(row)) == 1 for row in v)
    assert tf.nn.dropout(x, rate=0.0) is x
    with pytest.raises(ValueError, match="^You must provide a rate to dropout.$"):
        tf.nn.dropout(x)
    with pytest.raises(ValueError, match=r"range \[0, 1\), got 1"):
        tf.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="x has to be a floating point tensor"):
        tf.nn.dropout(tf.constant([1, 2]), rate=0.5)


def test_dropout_is_deterministic_with_a_graph_seed():
    def sample():
        with tf.Graph().as_default():
            tf.set_random_seed(7)
            return run(tf.nn.dropout(tf.ones([4, 5]), rate=0.3))

    np.testing.assert_array_equal(sample(), sample())


# ---------------------------------------------------------------------------------------
# Initializers and tf.layers.dense
# ---------------------------------------------------------------------------------------


def test_variance_scaling_initializer_statistics():
    tf.set_random_seed(1)
    shape = [200, 300]
    uni = tf.variance_scaling_initializer(2.0, "fan_in", "uniform")(shape)
    tn = tf.variance_scaling_initializer(1.0, "fan_avg")(shape)
    un = tf.variance_scaling_initializer(1.0, "fan_out", "untruncated_normal")(shape)
    gn = tf.glorot_normal_initializer()(shape)
    vu, vt, vn, vg = run([uni, tn, un, gn])
    limit = np.sqrt(3 * 2.0 / 200)
    assert np.abs(vu).max() <= limit and np.abs(vu).max() > 0.95 * limit
    np.testing.assert_allclose(vt.std(), np.sqrt(1 / 250), rtol=0.05)
    assert np.abs(vt).max() <= 2 * np.sqrt(1 / 250) / 0.87962566103423978 + 1e-6
    np.testing.assert_allclose(vn.std(), np.sqrt(1 / 300), rtol=0.05)
    np.testing.assert_allclose(vg.std(), np.sqrt(2 / 500), rtol=0.05)
    vh = run(init_ops.he_uniform()([100, 10]))
    assert np.abs(vh).max() <= np.sqrt(6 / 100)
    np.testing.assert_allclose(run(init_ops.he_normal()([400, 50])).std(), np.sqrt(2 / 400), 0.05)
    with pytest.raises(ValueError, match="`scale` must be positive float."):
        tf.variance_scaling_initializer(0.0)
    with pytest.raises(ValueError, match="Invalid `mode` argument:"):
        tf.variance_scaling_initializer(mode="fan")
    with pytest.raises(ValueError, match="Invalid `distribution` argument:"):
        tf.variance_scaling_initializer(distribution="cauchy")


def test_truncated_normal_stays_within_two_stddevs():
    v = run(tf.truncated_normal([1000], mean=1.0, stddev=0.5, seed=1))
    assert v.min() >= 0.0 and v.max() <= 2.0 and abs(v.mean() - 1.0) < 0.05


def test_dense_variables_and_op_names():
    x = tf.placeholder(tf.float32, [None, 3], name="X")
    h = tf.layers.dense(x, 4, activation=tf.nn.relu)
    out = tf.layers.dense(h, 2)
    assert h.name == "dense/Relu:0" and out.name == "dense_1/BiasAdd:0"
    assert h.shape.as_list() == [None, 4] and out.shape.as_list() == [None, 2]
    names = [v.name for v in tf.trainable_variables()]
    assert names == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    ops = {op.name for op in tf.get_default_graph().get_operations()}
    assert {"dense/MatMul", "dense/BiasAdd", "dense/Relu", "dense/kernel/read"} <= ops
    assert "dense/kernel/Initializer/random_uniform" in ops
    no_bias = tf.layers.dense(x, 2, use_bias=False, name="nb", trainable=False)
    assert no_bias.name == "nb/MatMul:0"
    assert "nb/kernel:0" not in [v.name for v in tf.trainable_variables()]
    again = tf.layers.dense(x, 4, name="dense", reuse=True)
    assert len(tf.global_variables()) == 5 and again.op.type == "BiasAdd"
    with pytest.raises(ValueError, match="Variable dense/kernel already exists"):
        tf.layers.dense(x, 4, name="dense")
    with pytest.raises(ValueError, match="last dimension of the inputs to `Dense` should be"):
        tf.layers.dense(tf.placeholder(tf.float32, [2, None]), 3)


def test_mlp_forward_pass_matches_numpy():
    """dense + relu + dense + softmax on a placeholder, against numpy with the variables'
    values; the loss of the chapter's training examples on top."""
    x = tf.placeholder(tf.float32, [None, 3], name="X")
    y = tf.placeholder(tf.int64, [None], name="y")
    hidden = tf.layers.dense(x, 5, activation=tf.nn.relu, name="hidden1")
    logits = tf.layers.dense(
        hidden, 4, kernel_initializer=tf.variance_scaling_initializer(), name="logits"
    )
    proba = tf.nn.softmax(logits)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    correct = tf.equal(tf.argmax(logits, 1), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    xs = np.random.RandomState(0).randn(6, 3).astype(np.float32)
    ys = np.array([0, 1, 2, 3, 0, 1])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w1, b1, w2, b2 = sess.run(tf.trainable_variables())
        p, lv, acc = sess.run([proba, loss, accuracy], {x: xs, y: ys})
    b1, b2 = b1 + 0.0, b2 + 0.0
    h = np.maximum(xs @ w1 + b1, 0)
    z = h @ w2 + b2
    np.testing.assert_allclose(p, np_softmax(z), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(lv, -np.log(np_softmax(z))[np.arange(6), ys].mean(), rtol=1e-5)
    assert acc == pytest.approx((z.argmax(1) == ys).mean())


# ---------------------------------------------------------------------------------------
# On a GPU: emulated cards (numpy), and CUDA kernels under Numba's simulator
# ---------------------------------------------------------------------------------------


def _gpu_graph():
    xs = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]], np.float32)
    with tf.device("/gpu:0"):
        x = tf.constant(xs)
        outs = {
            "relu": tf.nn.relu(x),
            "sigmoid": tf.sigmoid(x),
            "tanh": tf.tanh(x),
            "exp": tf.exp(x),
            "maximum": tf.maximum(x, 0.3),
            "bias": tf.nn.bias_add(x, [1.0, 2.0, 3.0]),
            "bias_grad": nn_ops.bias_add_grad(x),
            "relu_grad": nn_ops.relu_grad(x, x),
            "softmax": tf.nn.softmax(x),
            "xent": tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[2, 0], logits=x),
            "argmax": tf.argmax(x, 1),
            "onehot": tf.one_hot([1, 0], 3),
            "sigmoid_grad": nn_ops.sigmoid_grad(x, x),
            "tanh_grad": nn_ops.tanh_grad(x, x),
            "log_softmax": tf.nn.log_softmax(x),
            "l2": tf.nn.l2_loss(x),
            "less": tf.less(x, 0.5),
            "max": tf.reduce_max(x, 0),
            "min": tf.reduce_min(x, 1),
            "argmin": tf.argmin(x, 0),
            "in_top_k": tf.nn.in_top_k(x, [2, 1], 2),
            "clip": tf.clip_by_value(x, -0.75, 1.0),
            "elu": tf.nn.elu(x),
            "leaky_relu": tf.nn.leaky_relu(x),
            "select": tf.where(tf.greater(x, 0.0), x, -x),
            "log": tf.log(tf.abs(x)),
            "sqrt": tf.sqrt(tf.abs(x)),
        }
    expected = {
        "relu": np.maximum(xs, 0),
        "sigmoid": np_sigmoid(xs),
        "tanh": np.tanh(xs),
        "exp": np.exp(xs),
        "maximum": np.maximum(xs, 0.3),
        "bias": xs + [1, 2, 3],
        "bias_grad": xs.sum(0),
        "relu_grad": np.where(xs > 0, xs, 0),
        "softmax": np_softmax(xs),
        "xent": -np.log(np_softmax(xs))[[0, 1], [2, 0]],
        "argmax": xs.argmax(1),
        "onehot": np.eye(3)[[1, 0]],
        "sigmoid_grad": xs * xs * (1 - xs),
        "tanh_grad": xs * (1 - xs * xs),
        "log_softmax": np.log(np_softmax(xs)),
        "l2": (xs**2).sum() / 2,
        "less": xs < 0.5,
        "max": xs.max(0),
        "min": xs.min(1),
        "argmin": xs.argmin(0),
        "in_top_k": [True, True],
        "clip": np.clip(xs, -0.75, 1.0),
        "elu": np.where(xs > 0, xs, np.expm1(xs)),
        "leaky_relu": np.where(xs > 0, xs, 0.2 * xs),
        "select": np.abs(xs),
        "log": np.log(np.abs(xs)),
        "sqrt": np.sqrt(np.abs(xs)),
    }
    return outs, expected


def _check_on_gpu():
    outs, expected = _gpu_graph()
    with tf.Session(config=tf.ConfigProto(log_device_placement=False)) as sess:
        values = sess.run(outs)
    for key, t in outs.items():
        assert t.op.device.endswith("device:GPU:0") or t.op.device == "/device:GPU:0", key
        np.testing.assert_allclose(values[key], expected[key], rtol=1e-5, atol=1e-6, err_msg=key)
    return sess


def test_ops_run_on_an_emulated_gpu():
    sess = _check_on_gpu()
    assert sess._impl.devices[1].backend.name == "numpy"


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
def test_ops_run_cuda_kernels_under_the_simulator():
    sess = _check_on_gpu()
    assert sess._impl.devices[1].backend.name == "cuda"


def test_dense_input_checks():
    x = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(ValueError, match="expected a positive integer, got 0"):
        tf.layers.dense(x, 0)
    with pytest.raises(ValueError, match="does not support activity_regularizer"):
        tf.layers.dense(x, 2, activity_regularizer=tf.nn.l2_loss)
    with pytest.raises(TypeError, match="non-floating point dtype"):
        tf.layers.dense(tf.constant([[1, 2]]), 2)
    with pytest.raises(ValueError, match="expected min_ndim=2, found ndim=1"):
        tf.layers.dense(tf.constant([1.0, 2.0]), 2)
    with pytest.raises(ValueError, match="takes 2-D inputs"):
        tf.layers.dense(tf.zeros([2, 2, 2]), 2)
    assert tf.get_default_graph().get_operations()[-1].type != "MatMul"


def test_deprecated_xent_stops_the_labels_gradient_in_its_own_scope():
    loss = tf.nn.softmax_cross_entropy_with_logits(
        labels=[[0.0, 0.5, 0.5]], logits=[[1.0, 2.0, 3.0]]
    )
    assert loss.name == "softmax_cross_entropy_with_logits_sg/Reshape_2:0"
    ops = {op.name: op.type for op in tf.get_default_graph().get_operations()}
    assert ops["softmax_cross_entropy_with_logits_sg/labels_stop_gradient"] == "StopGradient"
    assert ops["softmax_cross_entropy_with_logits_sg"] == "SoftmaxCrossEntropyWithLogits"
    np.testing.assert_allclose(run(loss), [0.9076059], rtol=1e-6)
    with pytest.raises(ValueError, match="Only call `softmax_cross_entropy_with_logits` with"):
        tf.nn.softmax_cross_entropy_with_logits([[1.0]], [[1.0]])


def test_dropout_and_sparse_xent_of_unknown_shapes():
    x = tf.placeholder(tf.float32, [None, 4])
    d = tf.nn.dropout(x, rate=0.25, seed=1)
    assert d.shape.as_list() == [None, 4]
    assert tf.get_default_graph().get_operation_by_name("dropout/Shape").type == "Shape"
    logits = tf.placeholder(tf.float32, [None, None, 3])
    labels = tf.placeholder(tf.int32, [None, None])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    assert loss.shape.as_list() == [None, None]
    lv = np.random.RandomState(1).randn(2, 2, 3).astype(np.float32)
    yv = np.array([[0, 2], [1, 1]])
    vd, vl = run([d, loss], {x: np.ones((3, 4)), logits: lv, labels: yv})
    assert vd.shape == (3, 4) and set(np.unique(vd)) <= {0.0, np.float32(4.0 / 3.0)}
    expected = -np.log(np.take_along_axis(np_softmax(lv), yv[..., None], -1))[..., 0]
    np.testing.assert_allclose(vl, expected, rtol=1e-5)


def test_argument_errors():
    x = tf.constant([[1.0, 2.0]])
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'dim'"):
        tf.nn.softmax(x, axis=-1, dim=-1)
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'dim'"):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=x, logits=x, axis=-1, dim=-1)
    with pytest.raises(ValueError, match="supports data_format 'NHWC' only"):
        tf.nn.bias_add(x, [1.0, 2.0], data_format="NCHW")
    with pytest.raises(ValueError, match="Cannot specify both 'rate' and 'keep_prob'"):
        tf.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError, match="keep_prob must be a floating point number or Tensor"):
        tf.nn.dropout(x, keep_prob="half")
    with pytest.raises(TypeError, match="dtype <dtype: 'float32'> of on_value does not match "):
        tf.one_hot([0], 2, on_value=1.0, off_value=0)
    with pytest.raises(TypeError, match="parameter 'labels' has DataType float32"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[1.0], logits=x)
    with pytest.raises(
        ValueError, match="Shape mismatch: The shape of labels \\(received \\(2,\\)"
    ):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 1], logits=x)
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=[[1.0, 0.0, 0.0]], logits=x)
    p = tf.placeholder(tf.float32, [None, None])
    with pytest.raises(errors.InvalidArgumentError, match="Reduction axis 1 is empty"):
        run(tf.argmax(p, 1), {p: np.zeros((2, 0))})
