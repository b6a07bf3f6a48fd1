"""Parallel execution: inter-op speedup, intra-op speedup vs numpy, 10k-node graphs.

Book section: "Parallel Execution".  Run: ``python bench/bench_executor.py``.  Everything runs
in this one process; thread counts are set per session (``use_per_session_threads``) and BLAS
is held to one thread by minitf during steps, so the speedups come from minitf's own pools.
Figures print next to TF 2.21 (TF1 executor, 2-core machine, bench/tf_2_21_reference.txt)
and this project's goals.
"""

import os
import statistics
import time

os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import minitf as tf  # noqa: E402


def _median_s(fn, reps):
    fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _session(g, inter, intra):
    return tf.Session(
        graph=g,
        config=tf.ConfigProto(
            inter_op_parallelism_threads=inter,
            intra_op_parallelism_threads=intra,
            use_per_session_threads=True,
        ),
    )


def inter_op(branches=4, depth=30, n=512):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.random.RandomState(0).rand(n, n).astype(np.float32) / n)
        ends = []
        for _ in range(branches):
            y = x
            for _ in range(depth):
                y = tf.matmul(y, x)
            ends.append(y)
    out = {}
    for inter in (1, 2):
        with _session(g, inter, 1) as sess:
            out[inter] = _median_s(lambda: sess.run(ends), 7)
    return out


def intra_op(n=2048):
    g = tf.Graph()
    rs = np.random.RandomState(0)
    a_np = rs.rand(n, n).astype(np.float32)
    with g.as_default():
        a = tf.constant(a_np)
        m = tf.matmul(a, a)
    out = {}
    for intra in (1, 2):
        with _session(g, 1, intra) as sess:
            out[intra] = _median_s(lambda: sess.run(m), 5)
    flops = 2.0 * n**3
    numpy = {}
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            numpy[threads] = _median_s(lambda: np.matmul(a_np, a_np), 5)
    return {k: flops / v / 1e9 for k, v in out.items()}, {
        k: flops / v / 1e9 for k, v in numpy.items()
    }


def big_graph(adds=5000):
    t0 = time.perf_counter()
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        for _ in range(adds):
            x = x + 1.0
    build = time.perf_counter() - t0
    sess = tf.Session(graph=g)
    t0 = time.perf_counter()
    sess.run(x)
    first = time.perf_counter() - t0
    steady = _median_s(lambda: sess.run(x), 15)
    return len(g.get_operations()), build, first, steady


def main():
    print(
        "minitf %s   parallel execution (medians; one process; %d cores)"
        % (tf.__version__, os.cpu_count())
    )
    t = inter_op()
    print(
        "inter-op: 4 branches x 30 matmul 512^2, inter=1: %7.1f ms   inter=2: %7.1f ms   "
        "speedup %.2fx   (TF 2.21: 1.53x, goal >= 1.8x)" % (t[1] * 1e3, t[2] * 1e3, t[1] / t[2])
    )
    ours, numpy = intra_op()
    print(
        "intra-op: one 2048^2 matmul, intra=1: %6.1f GFLOP/s   intra=2: %6.1f GFLOP/s   "
        "speedup %.2fx   (TF 2.21: 1.84x, goal >= 1.8x)" % (ours[1], ours[2], ours[2] / ours[1])
    )
    print(
        "          numpy at the same BLAS threads: 1: %6.1f GFLOP/s   2: %6.1f GFLOP/s   "
        "minitf/numpy at 2 threads: %.2f (goal >= 0.90)" % (numpy[1], numpy[2], ours[2] / numpy[2])
    )
    nodes, build, first, steady = big_graph()
    print(
        "%d-node graph (chain of 5000 adds): build %.3f s (goal < 0.5)   first run %.3f s "
        "(goal < 0.2; TF 0.23)   steady run %.2f ms (goal < 20; TF 1.65)"
        % (nodes, build, first, steady * 1e3)
    )


if __name__ == "__main__":
    main()
