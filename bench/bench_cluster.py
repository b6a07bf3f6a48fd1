"""Cluster benchmarks (prints, asserts nothing).

* latency of a tiny remote op (``c = a * 3`` pinned on a worker task, the client talking to
  that task's master), servers in separate processes: p50 / p99 over many runs;
* throughput of fetching a 64 MiB variable living on a ps task (client -> worker master ->
  ps worker -> back), in MB/s.

TF 2.21 on the reference machine: 892 us p50, 315 MB/s (shared/reference/tf_outputs/bench.txt).

    PYTHONPATH=. python3 bench/bench_cluster.py [--runs 2000]
"""

import argparse
import time


import minitf as tf
from minitf.distributed import LocalCluster


def _pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:worker/task:0"):
                a = tf.constant(3.0)
                c = a * 3
            with tf.Session(cluster.target("worker", 0)) as sess:
                for _ in range(50):
                    sess.run(c)
                times = []
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    sess.run(c)
                    times.append(time.perf_counter() - t0)
        print("tiny remote op (1 task):    p50 %7.0f us   p99 %7.0f us   (%d runs)"
              % (_pct(times, 50) * 1e6, _pct(times, 99) * 1e6, args.runs))

        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                a = tf.constant(3.0)
            with tf.device("/job:worker/task:0"):
                c = a * 3
            with tf.Session(cluster.target("worker", 0)) as sess:
                for _ in range(50):
                    sess.run(c)
                times = []
                for _ in range(args.runs // 2):
                    t0 = time.perf_counter()
                    sess.run(c)
                    times.append(time.perf_counter() - t0)
        print("tiny op with Send/Recv:     p50 %7.0f us   p99 %7.0f us   (%d runs)"
              % (_pct(times, 50) * 1e6, _pct(times, 99) * 1e6, args.runs // 2))

        g = tf.Graph()
        n = args.mib << 18   # float32 elements
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(tf.zeros([n]), name="big")
            with tf.Session(cluster.target("worker", 0)) as sess:
                sess.run(v.initializer)
                sess.run(v)
                best = None
                for _ in range(5):
                    t0 = time.perf_counter()
                    out = sess.run(v)
                    dt = time.perf_counter() - t0
                    best = dt if best is None else min(best, dt)
                assert out.nbytes == args.mib << 20
        print("fetch %d MiB variable from ps: %7.0f MB/s  (best of 5: %.3f s)"
              % (args.mib, (args.mib << 20) / best / 1e6, best))


if __name__ == "__main__":
    main()
