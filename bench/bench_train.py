"""Training speed: minitf's SGD step next to a hand-written numpy forward/backward.

Book section: "Training" (what the chapter distributes).  Run::

    python bench/bench_train.py            # 3 rounds of 300 steps each side
    python bench/bench_train.py --quick    # smoke run

The model is an MLP 784-300-100-10 (ReLU, softmax cross entropy), batch 128, plain SGD,
float32, on synthetic data (a fixed seed).  Both sides start from the same weights and see the
same batches, in one process, rounds alternating; the figure is steps per second (median over
rounds) and the ratio minitf/numpy (goal: at least 0.85).  The losses after the last step must
agree to 1e-4 relative: the two sides compute the same thing.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

SIZES = (784, 300, 100, 10)
BATCH, LR, BATCHES = 128, 0.02, 8


def make_data(seed=0):
    """A few batches of inputs and labels that a linear teacher made (so the loss falls)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCHES, BATCH, SIZES[0])).astype(np.float32)
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


def minitf_model(weights):
    import minitf as tf

    graph = tf.Graph()
    with graph.as_default():
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
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=graph)
    sess.run(init)
    return sess, x, y, loss, train, init


def run_numpy(steps, data):
    params = [w.copy() for w in make_weights()]
    xs, ys = data
    start = time.perf_counter()
    for s in range(steps):
        loss = numpy_step(params, xs[s % BATCHES], ys[s % BATCHES])
    return steps / (time.perf_counter() - start), float(loss)


def run_minitf(steps, data):
    sess, x, y, loss, train, init = minitf_model(make_weights())
    xs, ys = data
    sess.run([loss, train], {x: xs[0], y: ys[0]})  # the step's plan is made outside the timing
    sess.run(init)  # and the weights start again from the same values as numpy's
    start = time.perf_counter()
    for s in range(steps):
        value, _ = sess.run([loss, train], {x: xs[s % BATCHES], y: ys[s % BATCHES]})
    rate = steps / (time.perf_counter() - start)
    sess.close()
    return rate, float(value)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="1 round of 30 steps")
    args = parser.parse_args(argv)
    rounds, steps = (1, 30) if args.quick else (args.rounds, args.steps)
    data = make_data()
    rates = {"numpy": [], "minitf": []}
    losses = {}
    for _ in range(rounds):
        for side, fn in (("numpy", run_numpy), ("minitf", run_minitf)):
            rate, losses[side] = fn(steps, data)
            rates[side].append(rate)
    np_rate, tf_rate = statistics.median(rates["numpy"]), statistics.median(rates["minitf"])
    rel = abs(losses["minitf"] - losses["numpy"]) / abs(losses["numpy"])
    print(
        "MLP 784-300-100-10, batch %d, SGD lr %g, float32, %d steps x %d rounds"
        % (BATCH, LR, steps, rounds)
    )
    print("  numpy  %8.1f steps/s" % np_rate)
    print(
        "  minitf %8.1f steps/s   ratio minitf/numpy %.2f (goal >= 0.85)"
        % (tf_rate, tf_rate / np_rate)
    )
    print(
        "  loss after %d steps: numpy %.6f, minitf %.6f, relative difference %.1e (goal <= 1e-4)"
        % (steps, losses["numpy"], losses["minitf"], rel)
    )
    return 0 if rel <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
