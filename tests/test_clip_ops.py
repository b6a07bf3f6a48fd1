"""Gradient clipping (``tf.clip_by_value``, ``clip_by_norm``, ``global_norm``,
``clip_by_global_norm``): TF 1.15's graphs, values and gradients, recorded from TensorFlow
2.21's ``compat.v1`` (which builds the same ops, but for ``ones_like``'s shape constant, which
1.15 names ``ones_like/Shape``)."""

import numpy as np
import pytest

import minitf as tf

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([1, -2, 2], np.float32)


def _listing(prefix):
    return [
        (op.name, op.type, [t.name for t in op.inputs])
        for op in tf.get_default_graph().get_operations()
        if op.name.startswith(prefix)
    ]


def test_clip_by_norm_graph_values_and_gradient():
    a = tf.placeholder(tf.float32, [2, 3], name="a")
    c1 = tf.clip_by_norm(a, 2.0)
    c2 = tf.clip_by_norm(a, 1.0, axes=[1])
    p = "clip_by_norm/"
    assert _listing("clip_by_norm/") + _listing("clip_by_norm:") == [
        (p + "mul", "Mul", ["a:0", "a:0"]),
        (p + "Const", "Const", []),
        (p + "Sum", "Sum", [p + "mul:0", p + "Const:0"]),
        (p + "Greater/y", "Const", []),
        (p + "Greater", "Greater", [p + "Sum:0", p + "Greater/y:0"]),
        (p + "ones_like/Shape", "Const", []),
        (p + "ones_like/Const", "Const", []),
        (p + "ones_like", "Fill", [p + "ones_like/Shape:0", p + "ones_like/Const:0"]),
        (p + "Select", "Select", [p + "Greater:0", p + "Sum:0", p + "ones_like:0"]),
        (p + "Sqrt", "Sqrt", [p + "Select:0"]),
        (p + "Select_1", "Select", [p + "Greater:0", p + "Sqrt:0", p + "Sum:0"]),
        (p + "mul_1/y", "Const", []),
        (p + "mul_1", "Mul", ["a:0", p + "mul_1/y:0"]),
        (p + "Maximum/y", "Const", []),
        (p + "Maximum", "Maximum", [p + "Select_1:0", p + "Maximum/y:0"]),
        (p + "truediv", "RealDiv", [p + "mul_1:0", p + "Maximum:0"]),
    ]
    assert c1.op.name == "clip_by_norm" and c1.op.type == "Identity"
    (g,) = tf.gradients(tf.reduce_sum(c1), a)
    zero = tf.placeholder(tf.float32, [3])
    (gz,) = tf.gradients(tf.reduce_sum(tf.clip_by_norm(zero, 1.0)), zero)
    with tf.Session() as sess:
        out1, out2, grad = sess.run([c1, c2, g], {a: A})
        np.testing.assert_allclose(out1, A * 2.0 / np.linalg.norm(A), rtol=1e-6)
        rows = np.linalg.norm(A, axis=1, keepdims=True)
        np.testing.assert_allclose(out2, A / np.maximum(rows, 1.0), rtol=1e-6)
        np.testing.assert_allclose(
            grad,
            [[0.26967996, 0.19613087, 0.12258181], [0.04903274, -0.02451634, -0.09806544]],
            rtol=1e-5,
        )
        assert np.isfinite(sess.run(gz, {zero: np.zeros(3)})).all()  # the two-Select trick


# inf - inf on the host: numpy says so (TF's kernels say nothing); the value is TF's NaN
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_global_norm_and_clip_by_global_norm():
    a = tf.placeholder(tf.float32, [2, 3], name="a")
    b = tf.placeholder(tf.float32, [3], name="b")
    norm = tf.global_norm([a, None, b])
    clipped, used = tf.clip_by_global_norm([a, None, b], 3.0)
    assert norm.name == "global_norm/global_norm:0" and used.name == "global_norm_1/global_norm:0"
    assert [t.name if t is not None else None for t in clipped] == [
        "clip_by_global_norm/clip_by_global_norm/_0:0",
        None,
        "clip_by_global_norm/clip_by_global_norm/_2:0",
    ]
    g = tf.get_default_graph()
    assert g.get_operation_by_name("global_norm/L2Loss").colocation_groups() == [b"loc:@a"]
    assert g.get_operation_by_name("clip_by_global_norm/mul_2").colocation_groups() == [b"loc:@b"]
    assert [n for n, _, _ in _listing("clip_by_global_norm/")][:8] == [
        "clip_by_global_norm/truediv/x",
        "clip_by_global_norm/truediv",
        "clip_by_global_norm/Const",
        "clip_by_global_norm/truediv_1/y",
        "clip_by_global_norm/truediv_1",
        "clip_by_global_norm/Minimum",
        "clip_by_global_norm/mul/x",
        "clip_by_global_norm/mul",
    ]
    with tf.Session() as sess:
        n, c0, c2, u = sess.run([norm, clipped[0], clipped[2], used], {a: A, b: B})
        assert n == u == 8.0
        np.testing.assert_allclose(c0, A * 3.0 / 8.0)
        np.testing.assert_allclose(c2, B * 3.0 / 8.0)
        small = sess.run(clipped[2], {a: A / 100, b: B / 100})
        np.testing.assert_allclose(small, B / 100)  # a norm under 3: unchanged
        inf = sess.run(clipped[0], {a: np.full((2, 3), np.inf), b: B})
        assert np.isnan(inf).all()  # TF's: an infinite norm gives NaN, not a silent 0
    with pytest.raises(TypeError, match="t_list should be a sequence"):
        tf.clip_by_global_norm(a, 1.0)


def test_clip_gradients_before_applying_them():
    """Chapter 11's pattern, with the norm: compute, clip, apply."""
    w = tf.Variable([3.0, 4.0], name="w")
    loss = tf.reduce_sum(w * w)  # gradient 2w = [6, 8], norm 10
    opt = tf.train.GradientDescentOptimizer(1.0)
    grads, variables = zip(*opt.compute_gradients(loss))
    clipped, _ = tf.clip_by_global_norm(list(grads), 5.0)
    train = opt.apply_gradients(zip(clipped, variables))
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.0, 0.0], atol=1e-6)  # [3,4] - [3,4]


def _clipped_gradients(device):
    """Log, Sqrt, Rsqrt and Reciprocal (their fused gradient ops), a partial sum (whose gradient
    computes its kept-dims shape with DynamicStitch) and ``clip_by_global_norm``, all on one
    device."""
    xv = np.random.RandomState(4).rand(3, 4).astype(np.float32) + 0.5
    with tf.Graph().as_default(), tf.device(device):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(np.full((4,), 0.5, np.float32))
        y = tf.sqrt(x) * w + tf.rsqrt(x + w) - tf.log(x * w) + tf.reciprocal(x)
        loss = tf.reduce_sum(tf.reduce_sum(y * y, axis=1) * tf.clip_by_value(w[0], 0.1, 1.0))
        grads = tf.gradients(loss, [x, w])
        clipped, norm = tf.clip_by_global_norm(grads, 1.0)
        with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(clipped + [norm], {x: xv}), sess


@pytest.mark.cudasim
@pytest.mark.usefixtures("cuda_kernels", "fast_thread_switching")
def test_math_gradients_and_clipping_on_a_card_equal_the_cpus():
    on_cpu, _ = _clipped_gradients("/cpu:0")
    on_gpu, sess = _clipped_gradients("/gpu:0")
    assert sess._impl.devices[1].backend.name == "cuda"
    assert on_cpu[2] > 1.0  # the clip did clip
    for a, b in zip(on_gpu, on_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
