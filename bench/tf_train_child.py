"""bench_train.py's model in TensorFlow's TF1 graph mode: run by ``bench_train.py --tf PATH``
under that interpreter (a throw-away venv with tensorflow-cpu; never a minitf dependency).

Book section: "Training".  Builds the MLP of ``train_model.py`` from the same weights with
``tf.compat.v1``, trains it with ``GradientDescentOptimizer(LR).minimize`` in a session of
``inter_op_parallelism_threads = intra_op_parallelism_threads = THREADS`` (0: TF's defaults)
and Grappler as TF runs it by default, warms up, starts again from the same weights, times
STEPS steps as bench_train times minitf's, and prints one JSON line: TF's version, steps/s and
the last loss.  Usage: ``python tf_train_child.py THREADS STEPS WARMUP``.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow.compat.v1 as tf  # noqa: E402
from train_model import BATCHES, LR, SIZES, make_data, make_weights  # noqa: E402


def model(weights):
    """(graph, x, y, loss, train op, initializer) of the MLP from ``weights``."""
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
    return graph, x, y, loss, train, init


def main(threads, steps, warmup):
    tf.disable_eager_execution()
    graph, x, y, loss, train, init = model(make_weights())
    config = tf.ConfigProto(
        inter_op_parallelism_threads=threads, intra_op_parallelism_threads=threads
    )
    xs, ys = make_data()
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for _ in range(warmup):
            sess.run([loss, train], {x: xs[0], y: ys[0]})
        sess.run(init)
        start = time.perf_counter()
        for s in range(steps):
            value, _ = sess.run([loss, train], {x: xs[s % BATCHES], y: ys[s % BATCHES]})
        rate = steps / (time.perf_counter() - start)
    print(json.dumps({"version": tf.__version__, "rate": rate, "loss": float(value)}))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
