"""The model bench_train.py times: its sizes, data, weights, numpy's step, and the graph and
timed loop that minitf and TensorFlow share.

Book section: "Training".  Imports neither minitf nor TensorFlow: :func:`build` takes the
module to build with (``minitf``, or ``tensorflow.compat.v1`` in another interpreter,
``bench_train.py --tf PATH`` through ``tf_train_child.py``), so both build the very same model
from the very same numbers and are timed by the same loop.
"""

import time

import numpy as np

SIZES = (784, 300, 100, 10)
BATCH, LR, BATCHES = 128, 0.02, 8


def make_data(seed=0, batch=BATCH):
    """A few batches of inputs and labels that a linear teacher made (so the loss falls)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCHES, batch, SIZES[0])).astype(np.float32)
    teacher = rng.standard_normal((SIZES[0], SIZES[-1])).astype(np.float32)
    y = np.argmax(x @ teacher, axis=-1).astype(np.int64)
    return x, y


def make_weights(seed=1):
    rng = np.random.default_rng(seed)
    weights = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        limit = np.sqrt(6.0 / (n_in + n_out))
        weights.append(rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32))
        weights.append(np.zeros(n_out, np.float32))
    return weights


def numpy_step(params, x, y):
    """One SGD step by hand; returns the loss before the update."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    logits = h2 @ w3 + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    loss = np.mean(np.log(total[:, 0]) - shifted[np.arange(len(y)), y])
    d = exp / total
    d[np.arange(len(y)), y] -= 1
    d /= np.float32(len(y))
    grads = [None] * 6
    grads[4], grads[5] = h2.T @ d, d.sum(axis=0)
    d = (d @ w3.T) * (h2 > 0)
    grads[2], grads[3] = h1.T @ d, d.sum(axis=0)
    d = (d @ w2.T) * (h1 > 0)
    grads[0], grads[1] = x.T @ d, d.sum(axis=0)
    for p, g in zip(params, grads):
        p -= np.float32(LR) * g
    return loss


def build(tf, weights):
    """The MLP from ``weights`` in ``tf``'s default graph, trained by plain SGD: (x, y, loss,
    train op, initializer); ``tf`` is minitf or ``tensorflow.compat.v1``."""
    x = tf.placeholder(tf.float32, [None, SIZES[0]], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    h = x
    for i in range(3):
        w = tf.Variable(weights[2 * i], name="w%d" % i)
        b = tf.Variable(weights[2 * i + 1], name="b%d" % i)
        h = tf.matmul(h, w) + b
        if i < 2:
            h = tf.nn.relu(h)
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h)
    loss = tf.reduce_mean(xent)
    train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
    return x, y, loss, train, tf.global_variables_initializer()


def time_steps(sess, model, data, steps, warmup):
    """``warmup`` untimed steps (a plan is made and learns its costs), the weights reset to
    their first values, then ``steps`` timed steps: (steps/s, the last loss)."""
    x, y, loss, train, init = model
    xs, ys = data
    for _ in range(warmup):
        sess.run([loss, train], {x: xs[0], y: ys[0]})
    sess.run(init)
    start = time.perf_counter()
    for s in range(steps):
        value, _ = sess.run([loss, train], {x: xs[s % BATCHES], y: ys[s % BATCHES]})
    return steps / (time.perf_counter() - start), float(value)
