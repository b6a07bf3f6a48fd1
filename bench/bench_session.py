"""Session.run floor, per-op cost of the inline (serial) path, floor of the threaded path.

Book section: "Parallel Execution" (what one step of the executor costs before any kernel work).
Run: ``python bench/bench_session.py``.  Prints medians over repeated runs in this one process,
next to the TF 2.21 TF1-executor figures measured on a 2-core machine
(``bench/tf_2_21_reference.txt``) and the project's goals.
"""

import os
import statistics
import time

os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

import minitf as tf  # noqa: E402


def _median_us(fn, reps, inner):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(samples), min(samples)


def floor():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0, name="c")
        noop = tf.no_op()
        p = tf.placeholder(tf.float32, [], name="p")
        add = p + c
    sess = tf.Session(graph=g)
    sess.run(c)
    sess.run(noop)
    sess.run(add, {p: 1.0})
    feed = {p: 2.0}
    return {
        "noop_target": _median_us(lambda: sess.run(noop), 30, 200),
        "fetch_const": _median_us(lambda: sess.run(c), 30, 200),
        "add_with_feed": _median_us(lambda: sess.run(add, feed), 30, 200),
    }


def threaded_floor():
    """One small matmul: an expensive op, so the step runs over the pools (threaded path)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.ones([4, 4])
        m = tf.matmul(a, a)
    sess = tf.Session(graph=g)
    sess.run(m)
    return _median_us(lambda: sess.run(m), 30, 100)


def chain(n):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        for _ in range(n):
            x = x + 1.0
    sess = tf.Session(graph=g)
    sess.run(x)
    return _median_us(lambda: sess.run(x), 15, 5)


def main():
    print(
        "minitf %s   Session.run floor and inline per-op cost (median of reps, us)" % tf.__version__
    )
    for name, (med, best) in floor().items():
        print(
            "Session.run floor: %-14s %8.2f us/run [best %.2f]   TF 2.21: 44-58 us, goal <= 40"
            % (name, med, best)
        )
    med, best = threaded_floor()
    print("Session.run of one 4x4 matmul (over the pools): %8.2f us/run [best %.2f]" % (med, best))
    t1000, b1000 = chain(1000)
    t1, _ = chain(1)
    print(
        "chain of 1000 scalar adds: %8.3f us/op [best %.3f]  (2002 nodes executed)"
        % (t1000 / 1000, b1000 / 1000)
    )
    print(
        "  same, minus a 1-add run, /(N-1): %8.3f us/op   TF 2.21: 0.45 us/op, goal <= 2"
        % ((t1000 - t1) / 999)
    )


if __name__ == "__main__":
    main()
