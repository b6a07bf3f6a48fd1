"""Gradients of the MLP ops: tf.nn's (nn_grad.py) and the new math ops' (math_grad.py).

Book section: "Training".  TF 1.15's names and the conformance values of
reference/tf1_semantics_part2.md §16.4, then every gradient against central differences
(``tf.test.compute_gradient_error``, float64) with hypothesis drawing shapes and values.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitf as tf
from minitf.ops import math_ops, nn_ops

CHECK = settings(max_examples=12, deadline=None)


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        yield


def run(*fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(list(fetches), feed)


# -- §16.4: names and values ----------------------------------------------------------------


def test_activation_derivatives_at_the_conformance_points():
    x0, x1, x2 = tf.constant(0.0), tf.constant(0.5), tf.constant([-1.0, 0.0, 2.0])
    (g0,) = tf.gradients(tf.sigmoid(x0), x0)
    (g1,) = tf.gradients(tf.tanh(x1), x1)
    (g2,) = tf.gradients(tf.nn.relu(x2, name="h"), x2)
    assert g0.name == "gradients/Sigmoid_grad/SigmoidGrad:0"
    assert g1.name == "gradients_1/Tanh_grad/TanhGrad:0"
    assert g2.name == "gradients_2/h_grad/ReluGrad:0"
    v0, v1, v2 = run(g0, g1, g2)
    assert v0 == pytest.approx(0.25) and v1 == pytest.approx(0.78644776)
    np.testing.assert_array_equal(v2, [0, 0, 1])


def test_sigmoid_and_tanh_grads_take_the_output_then_g_after_g():
    x = tf.constant([1.0, -2.0])
    y = tf.sigmoid(x)
    (g,) = tf.gradients(y, x)
    assert g.op.inputs[0] is y and g.op.inputs[1].name == "gradients/grad_ys_0:0"
    assert g.op.control_inputs == []  # g, already an input, needs no control edge (as in TF)
    (h,) = tf.gradients(tf.nn.relu(x, name="r"), x)
    assert h.op.inputs[1].op.name == "r"


def test_bias_add_gradient_conformance():
    """§16.4: d/dbias sum(bias_add([[1,2],[3,4]], [10,20])²) = [48, 92]."""
    b = tf.constant([10.0, 20.0])
    v = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    y = tf.reduce_sum(tf.square(tf.nn.bias_add(v, b, name="logits")))
    gv, gb = tf.gradients(y, [v, b])
    assert gb.name == "gradients/logits_grad/BiasAddGrad:0"
    vv, vb = run(gv, gb)
    np.testing.assert_array_equal(vb, [48, 92])
    np.testing.assert_array_equal(vv, 2 * (np.array([[1, 2], [3, 4]]) + [10, 20]))


def test_mlp_gradient_names():
    """§16.4: an MLP on a [None, 3] placeholder: W1's gradient is MatMul_grad/MatMul_1, the
    output bias's (bias_add named "logits") logits_grad/BiasAddGrad."""
    x = tf.placeholder(tf.float32, [None, 3], name="X")
    y = tf.placeholder(tf.int32, [None], name="y")
    w1 = tf.Variable(np.ones((3, 4), np.float32) * 0.1, name="W1")
    b1 = tf.Variable(np.zeros(4, np.float32), name="b1")
    w2 = tf.Variable(np.ones((4, 2), np.float32) * 0.2, name="W2")
    b2 = tf.Variable(np.zeros(2, np.float32), name="b2")
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2, name="logits")
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    loss = tf.reduce_mean(xent, name="loss")
    grads = tf.gradients(loss, [w1, b1, w2, b2])
    assert grads[0].name == "gradients/MatMul_grad/MatMul_1:0"
    assert grads[1].name == "gradients/add_grad/Reshape_1:0"
    assert grads[2].name == "gradients/MatMul_1_grad/MatMul_1:0"
    assert grads[3].name == "gradients/logits_grad/BiasAddGrad:0"
    values = run(*grads, feed={x: [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], y: [0, 1]})
    assert [v.shape for v in values] == [(3, 4), (4,), (4, 2), (2,)]
    assert tf.gradients(loss, [w1])[0].name.startswith("gradients_1/")


def test_five_contributions_meet_in_one_add_n():
    """§16.4: y = x*x + square(x) + sigmoid(x) + tanh(x) at 3: one AddN of five, 12.055042."""
    x = tf.constant(3.0)
    y = x * x + tf.square(x) + tf.sigmoid(x) + tf.tanh(x)
    (g,) = tf.gradients(y, x)
    assert g.op.type == "AddN" and g.op.name == "gradients/AddN" and len(g.op.inputs) == 5
    types = sorted(t.op.type for t in g.op.inputs)
    assert types == ["Mul", "Mul", "Mul", "SigmoidGrad", "TanhGrad"]
    assert run(g)[0] == pytest.approx(12.055042, rel=1e-6)


def test_sparse_xent_gradient_structure_and_values():
    """§16.4: logits [[1,2,3]], label [2]: d/dlogits = [0.090031, 0.244728, -0.334759], built
    as ExpandDims(g, -1) * PreventGradient(backprop); no gradient for the labels."""
    logits = tf.constant([[1.0, 2.0, 3.0]])
    labels = tf.constant([2])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    g, gl = tf.gradients(loss, [logits, labels])
    assert gl is None
    scope = (
        "gradients/SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits_grad/"
    )
    assert g.name == scope + "mul:0"
    assert [t.op.type for t in g.op.inputs] == ["ExpandDims", "PreventGradient"]
    np.testing.assert_allclose(run(g)[0], [[0.090031, 0.244728, -0.334759]], atol=1e-6)
    with pytest.raises(LookupError) as e:
        tf.gradients(g, logits)
    assert str(e.value) == (
        "Gradient explicitly disabled. Reason: Currently there is no way to take the second "
        "derivative of sparse_softmax_cross_entropy_with_logits due to the fused "
        "implementation's interaction with tf.gradients()"
    )


def test_xent_v2_gradients_flow_into_logits_and_labels():
    """§16.4: labels [[0,.5,.5]]: d/dlogits = [0.090031, -0.255272, 0.165241]; the labels get
    -log_softmax(logits); the deprecated function stops the labels' gradient."""
    logits = tf.constant([[1.0, 2.0, 3.0]])
    labels = tf.constant([[0.0, 0.5, 0.5]])
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    g, gl = tf.gradients(loss, [logits, labels])
    vg, vl = run(g, gl)
    np.testing.assert_allclose(vg, [[0.090031, -0.255272, 0.165241]], atol=1e-6)
    expected = -np.log(np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())[None]
    np.testing.assert_allclose(vl, expected, rtol=1e-6)
    old = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    g2, gl2 = tf.gradients(old, [logits, labels])
    assert gl2 is None
    np.testing.assert_allclose(run(g2)[0], vg, rtol=1e-6)


def test_non_differentiable_ops_give_none():
    """§16.4: gradients(argmax(a*bb, 1), bb) → [None]; comparisons and one_hot likewise."""
    a = tf.constant([[1.0, 2.0]])
    bb = tf.constant([[3.0, 1.0]])
    assert tf.gradients(tf.argmax(a * bb, 1), bb) == [None]
    assert tf.gradients(tf.cast(tf.equal(a, bb), tf.float32), bb) == [None]
    assert tf.gradients(tf.cast(tf.greater(a, bb), tf.float32), bb) == [None]
    idx = tf.cast(bb, tf.int32)
    assert tf.gradients(tf.one_hot(idx, 4), idx) == [None]
    assert tf.gradients(tf.floor(bb), bb) == [None]


def test_second_derivative_through_xent_backprop():
    """A gradient reaching the fused op's backprop output flows through its softmax."""
    logits = tf.placeholder(tf.float64, [2, 3])
    labels = tf.constant([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], tf.float64)
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    backprop = loss.op.inputs[0].op.outputs[1]
    y = tf.reduce_sum(loss) + tf.reduce_sum(tf.square(backprop))
    x0 = np.array([[0.1, -0.4, 0.3], [1.0, 0.5, -1.0]])
    with tf.Session() as sess, sess.as_default():
        err = tf.test.compute_gradient_error(logits, [2, 3], y, [], x_init_value=x0, delta=1e-6)
    assert err < 1e-6


# -- against central differences ----------------------------------------------------------------


def gradient_error(build, x0):
    """The largest difference between ``tf.gradients``' Jacobian of ``build(x)`` at ``x0`` and
    central differences, in float64."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, x0.shape)
        y = build(x)
        with tf.Session() as sess, sess.as_default():
            return tf.test.compute_gradient_error(
                x, list(x0.shape), y, y.shape.as_list(), x_init_value=x0, delta=1e-6
            )


def values(min_dims=1, max_dims=3, low=-2.0, high=2.0, shape=None):
    shapes = hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=3)
    return hnp.arrays(
        np.float64,
        shape if shape is not None else shapes,
        elements=st.floats(low, high, allow_nan=False),
    )


def away_from_zero(x):
    return np.where(np.abs(x) < 0.1, 0.5, x)


def distinct(x):
    """Values at least 0.1 apart (no ties for max and argmax-like choices)."""
    return (np.argsort(np.argsort(x.reshape(-1))).reshape(x.shape) * 0.25 + 0.01 * x).astype(
        np.float64
    )


UNARY = {
    "relu": (tf.nn.relu, away_from_zero),
    "elu": (tf.nn.elu, away_from_zero),
    "selu": (tf.nn.selu, away_from_zero),
    "leaky_relu": (lambda x: tf.nn.leaky_relu(x, alpha=0.3), away_from_zero),
    "sigmoid": (tf.sigmoid, None),
    "tanh": (tf.tanh, None),
    "exp": (tf.exp, None),
    "log": (tf.log, lambda x: np.abs(x) + 0.5),
    "sqrt": (tf.sqrt, lambda x: np.abs(x) + 0.5),
    "rsqrt": (math_ops.rsqrt, lambda x: np.abs(x) + 0.5),
    "abs": (tf.abs, away_from_zero),
    "softmax": (tf.nn.softmax, None),
    "log_softmax": (tf.nn.log_softmax, None),
    "l2_loss": (tf.nn.l2_loss, None),
    "reduce_max": (lambda x: tf.reduce_max(x, axis=-1), distinct),
    "reduce_max_all": (tf.reduce_max, distinct),
    "transpose": (tf.transpose, None),
    "reduce_min": (lambda x: tf.reduce_min(x, axis=0), distinct),
    "reduce_min_all": (tf.reduce_min, distinct),
    "clip_by_value": (lambda x: tf.clip_by_value(x, -0.6, 0.7), distinct),
    "relu_grad": (lambda x: nn_ops.relu_grad(x, tf.constant([-1.0, 2.0], tf.float64)), None),
}


@CHECK
@given(st.sampled_from(sorted(UNARY)), values(), st.data())
def test_unary_gradients_match_central_differences(name, x0, data):
    build, fix = UNARY[name]
    if name == "relu_grad":
        x0 = data.draw(values(shape=(2,)))
    x0 = fix(x0) if fix is not None else x0
    assert gradient_error(build, x0) < 1e-5


@CHECK
@given(
    st.sampled_from(["maximum", "minimum"]),
    hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    st.data(),
)
def test_maximum_minimum_gradients_with_broadcasting(name, shapes, data):
    fn = getattr(tf, name)
    a = data.draw(values(shape=shapes.input_shapes[0]))
    b = data.draw(values(shape=shapes.input_shapes[1]))
    a = np.round(a, 1) + 0.05  # never equal to b (rounded to a tenth) below
    b = np.round(b, 1)
    assert gradient_error(lambda x: fn(x, tf.constant(b)), a) < 1e-5
    assert gradient_error(lambda x: fn(tf.constant(a), x), b) < 1e-5


@CHECK
@given(values(min_dims=2), st.data())
def test_bias_add_gradients(x0, data):
    bias = data.draw(values(shape=(x0.shape[-1],)))
    assert gradient_error(lambda x: tf.nn.bias_add(x, tf.constant(bias)), x0) < 1e-5
    assert gradient_error(lambda b: tf.nn.bias_add(tf.constant(x0), b), bias) < 1e-5


@CHECK
@given(st.integers(1, 3), st.integers(2, 4), st.integers(0, 2**16))
def test_cross_entropy_gradients(batch, classes, seed):
    rng = np.random.RandomState(seed)
    logits = rng.randn(batch, classes)
    probs = rng.dirichlet(np.ones(classes), size=batch)
    labels = rng.randint(0, classes, size=batch)

    def sparse(x):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x)

    def dense_logits(x):
        return tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.constant(probs), logits=x)

    def dense_labels(p):
        return tf.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=tf.constant(logits))

    assert gradient_error(sparse, logits) < 1e-5
    assert gradient_error(dense_logits, logits) < 1e-5
    assert gradient_error(dense_labels, probs) < 1e-5


@CHECK
@given(values(min_dims=2, max_dims=2), st.data())
def test_select_gradients(x0, data):
    cond = data.draw(hnp.arrays(np.bool_, x0.shape))
    rows = data.draw(hnp.arrays(np.bool_, (x0.shape[0],)))
    zeros = np.zeros_like(x0)
    assert gradient_error(lambda x: tf.where(cond, x, zeros), x0) < 1e-5
    assert gradient_error(lambda x: tf.where(cond, zeros, x * 2.0), x0) < 1e-5
    assert gradient_error(lambda x: tf.where(rows, x, zeros), x0) < 1e-5


def _mlp_gradients(device, xs, ys):
    """An MLP's loss gradients (every op of this module on the way) computed on ``device``."""
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        with tf.device(device):
            x = tf.placeholder(tf.float32, [5, 3], name="X")
            y = tf.placeholder(tf.int64, [5], name="y")
            keep = tf.placeholder(tf.float32, [], name="keep")
            h = tf.nn.dropout(tf.layers.dense(x, 4, activation=tf.nn.relu), keep_prob=keep)
            logits = tf.layers.dense(h, 3, activation=tf.tanh)
            sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            dense = tf.nn.softmax_cross_entropy_with_logits_v2(
                labels=tf.one_hot(y, 3), logits=tf.sigmoid(logits)
            )
            extra = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.nn.softmax(logits))
            extra += tf.reduce_sum(tf.reduce_max(tf.exp(logits), 1))
            extra += tf.reduce_sum(tf.maximum(logits, 0.1)) + tf.nn.l2_loss(logits)
            loss = tf.reduce_mean(sparse) + tf.reduce_mean(dense) + extra
            grads = tf.gradients(loss, tf.trainable_variables())
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(grads, {x: xs, y: ys, keep: 1.0})


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
def test_mlp_gradients_on_a_card_equal_the_cpus():
    """The whole MLP, forward and backward, pinned to a GPU whose kernels run under Numba's
    simulator, gives the CPU's gradients."""
    xs = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    ys = np.array([0, 1, 2, 0, 1])
    on_cpu = _mlp_gradients("/cpu:0", xs, ys)
    on_gpu = _mlp_gradients("/gpu:0", xs, ys)
    assert [g.shape for g in on_gpu] == [(3, 4), (4,), (4, 3), (3,)]
    for a, b in zip(on_gpu, on_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
