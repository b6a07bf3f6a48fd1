"""``tf.layers.batch_normalization``, ``tf.nn.moments``, ``tf.nn.batch_normalization`` and the
ops they need (``SquaredDifference``, ``Squeeze``'s and ``Pow``'s gradients): chapter 11's
layer, built op for op as TF builds it (tests/data/tf_batch_normalization_graph.txt), its
values, and its moving averages updated only through ``UPDATE_OPS`` while training."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf as tf

RECORDED = Path(__file__).parent / "data" / "tf_batch_normalization_graph.txt"


def _three_layers():
    x = tf.placeholder(tf.float32, [None, 4], name="X")
    training = tf.placeholder_with_default(False, shape=(), name="training")
    bn = tf.layers.batch_normalization(x, training=training, momentum=0.9)
    bn2 = tf.layers.batch_normalization(x, training=True, name="bn_true")
    bn3 = tf.layers.batch_normalization(x, training=False, name="bn_false")
    return x, training, bn, bn2, bn3


def _listing(op):
    cls = [c.decode() for c in op.colocation_groups() if c != ("loc:@" + op.name).encode()]
    return "%s %s %s %s %s" % (
        op.name,
        op.type,
        [t.name for t in op.inputs],
        ["^" + c.name for c in op.control_inputs],
        cls,
    )


def test_the_layer_builds_tfs_graph():
    x, training, bn, bn2, bn3 = _three_layers()
    lines = [
        "%s %s %s %s"
        % (bn, bn2, bn3, [o.name for o in tf.get_collection(tf.GraphKeys.UPDATE_OPS)]),
        "%s %s"
        % ([v.name for v in tf.global_variables()], [v.name for v in tf.trainable_variables()]),
    ]
    lines += [_listing(op) for op in tf.get_default_graph().get_operations()]
    assert lines == RECORDED.read_text().splitlines()


def test_values_updates_and_gradients_as_tf_computed_them():
    x, training, bn, _, _ = _three_layers()
    w = tf.get_variable("w", [4, 1], initializer=tf.ones_initializer())
    loss = tf.reduce_sum(tf.matmul(bn, w) ** 2)
    gamma, beta = tf.trainable_variables()[:2]
    gx, gg, gb = tf.gradients(loss, [x, gamma, beta])
    xv = np.arange(12, dtype=np.float32).reshape(3, 4) ** 1.5
    update = tf.get_collection(tf.GraphKeys.UPDATE_OPS)[:2]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # not training: the moving averages (0 and 1) normalize, nothing is updated
        np.testing.assert_allclose(sess.run(bn, {x: xv}), xv / np.sqrt(1.001), rtol=1e-6)
        out = sess.run(bn, {x: xv, training: True})
        np.testing.assert_allclose(
            out, (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-3), rtol=1e-5, atol=1e-6
        )
        assert [v.tolist() for v in sess.run(tf.global_variables()[2:4])] == [[0] * 4, [1] * 4]
        sess.run(update, {x: xv, training: True})
        mean, var = sess.run(tf.global_variables()[2:4])
        np.testing.assert_allclose(mean, [1.020914, 1.3060113, 1.6382713, 2.0066428], rtol=1e-6)
        np.testing.assert_allclose(var, [9.677348, 12.343345, 14.860667, 17.333845], rtol=1e-6)
        grads = sess.run([gx, gg, gb], {x: xv, training: True})
    np.testing.assert_allclose(
        grads[0][0], [-0.0368363, -0.00316301, 0.01039002, 0.01727167], atol=2e-6
    )
    np.testing.assert_allclose(grads[1], [23.960762, 23.987999, 23.984169, 23.974258], rtol=1e-5)
    np.testing.assert_allclose(grads[2], np.zeros(4), atol=1e-5)


def test_training_with_update_ops_learns_the_moving_averages():
    """Chapter 11's recipe: the training op runs after ``UPDATE_OPS``; after training, the
    moving averages approach the data's mean and variance, and inference uses them."""
    rng = np.random.RandomState(0)
    data = rng.normal(5.0, 2.0, size=(512, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3])
    training = tf.placeholder_with_default(False, shape=())
    out = tf.layers.batch_normalization(x, training=training, momentum=0.8)
    loss = tf.reduce_mean(tf.square(out - 1.0))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(60):
            sess.run(train, {x: data[(i % 8) * 64 : (i % 8 + 1) * 64], training: True})
        mean, var = sess.run(tf.global_variables()[2:4])
        np.testing.assert_allclose(mean, data.mean(0), atol=0.5)
        np.testing.assert_allclose(var, data.var(0), rtol=0.3)
        np.testing.assert_allclose(sess.run(out, {x: data}).mean(0), 1.0, atol=0.3)


def test_the_layer_refuses_what_it_does_not_do():
    x = tf.placeholder(tf.float32, [None, 4, 2])
    with pytest.raises(ValueError, match="last axis only"):
        tf.layers.batch_normalization(x, axis=1)
    for arg in ({"renorm": True}, {"fused": True}, {"virtual_batch_size": 2}):
        with pytest.raises(ValueError, match="does not support %s" % list(arg)[0]):
            tf.layers.batch_normalization(x, **arg)
    # TF 1.15's argument order: training after the regularizers and constraints
    out = tf.layers.batch_normalization(
        x,
        -1,
        0.9,
        1e-3,
        True,
        True,
        *[tf.zeros_initializer()] * 2,
        None,
        None,
        None,
        None,
        None,
        None,
        False,
        fused=False,
        name="positional",
    )
    assert out.name == "positional/batchnorm/add_1:0"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(0.1, 3), min_size=6, max_size=6),
    st.lists(st.floats(0.1, 3), min_size=3, max_size=3),
    st.sampled_from(["SquaredDifference", "Pow"]),
)
def test_broadcast_gradients_match_central_differences(xv, yv, op):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [2, 3])
        y = tf.placeholder(tf.float64, [3])
        f = tf.squared_difference(x, y) if op == "SquaredDifference" else x**y
        loss = tf.reduce_sum(tf.squeeze(tf.expand_dims(f, 0)) * [[1.0, 2.0, 3.0]])
        gx, gy = tf.gradients(loss, [x, y])
        xa, ya = np.array(xv).reshape(2, 3), np.array(yv)
        with tf.Session() as sess:
            got = sess.run([gx, gy], {x: xa, y: ya})
            for k, (t, base) in enumerate(((x, xa), (y, ya))):
                num = np.zeros(base.shape)
                for i in np.ndindex(base.shape):
                    up, down = base.copy(), base.copy()
                    up[i] += 1e-6
                    down[i] -= 1e-6
                    feed = {x: xa, y: ya}
                    lu = sess.run(loss, {**feed, t: up})
                    ld = sess.run(loss, {**feed, t: down})
                    num[i] = (lu - ld) / 2e-6
                np.testing.assert_allclose(got[k], num, rtol=1e-5, atol=1e-6)
    assert f.op.type == op and f.op.name == ("SquaredDifference" if op != "Pow" else "pow")


def _train_step_on_gpu():
    """A batch-normalized layer trained on /gpu:0 with ``training`` a tensor (so its conds,
    Switches of every dtype and Merges run on the card), checked against numpy."""
    xv = np.random.RandomState(3).rand(8, 5).astype(np.float32) * 4
    with tf.device("/gpu:0"):
        x = tf.placeholder(tf.float32, [None, 5])
        training = tf.placeholder_with_default(False, shape=())
        out = tf.layers.batch_normalization(x, training=training)
        loss = tf.reduce_sum(out * out * x)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
    sess.run(tf.global_variables_initializer())
    before = sess.run(out, {x: xv})
    np.testing.assert_allclose(before, xv / np.sqrt(1.001), rtol=1e-5)
    sess.run(train, {x: xv, training: True})
    mean = sess.run(tf.global_variables()[2])
    np.testing.assert_allclose(mean, 0.01 * xv.mean(0), rtol=1e-5)
    gamma = sess.run(tf.global_variables()[0])
    norm = (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-3)
    np.testing.assert_allclose(gamma, 1 - 0.01 * (2 * norm * norm * xv).sum(0), rtol=1e-4)
    return sess


def test_the_layer_trains_on_an_emulated_gpu():
    assert _train_step_on_gpu()._impl.devices[1].backend.name == "numpy"


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
def test_the_layer_trains_with_cuda_kernels_under_the_simulator():
    assert _train_step_on_gpu()._impl.devices[1].backend.name == "cuda"


def test_an_input_of_any_rank_is_normalized_over_all_but_its_last_axis():
    x = tf.placeholder(tf.float32, [None, 4, 2])
    out = tf.layers.batch_normalization(x, training=True)
    xv = np.random.RandomState(5).rand(3, 4, 2).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(out, {x: xv})
    want = (xv - xv.mean((0, 1))) / np.sqrt(xv.var((0, 1)) + 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Input has undefined `axis` dimension"):
        tf.layers.batch_normalization(tf.placeholder(tf.float32, [2, None]))
