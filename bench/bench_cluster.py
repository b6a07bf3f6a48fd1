"""Cluster benchmarks (prints, asserts nothing), the same measurements as TF 2.21's peer
baseline in ``shared/reference/tf_outputs/bench.txt`` ("servers separate-process"):

* round trip of a tiny op (``a * 3``) pinned on one task, the client talking to one task's
  master, p50 / p99 over many runs: on w0 via w0 (no hop), on ps0 via w0 (the "tiny remote
  op": client -> w0's master -> ps0's worker), on ps0 via ps0;
* fetching a 64 MiB variable that lives on ps0 into the client, through w0's master and
  through ps0's master, in MB/s (median and best of ``--reps`` runs);
* an op on w0 reading the whole 64 MiB variable from ps0 (``reduce_sum``), in MB/s.

Servers are ``LocalCluster`` subprocesses on 127.0.0.1; the client is this process.

    PYTHONPATH=. python3 bench/bench_cluster.py [--runs 2000] [--mib 64]
"""

import argparse
import time

import minitf as tf
from minitf.distributed import LocalCluster

#: TF 2.21, servers in separate processes, 2-core VM (bench.txt, PEER_MODE=eageroff).
TF_2_21 = {
    ("w0", "w0"): (446, 726), ("ps0", "w0"): (892, 1233), ("ps0", "ps0"): (485, 804),
    "fetch w0": 315, "fetch ps0": 471, "reduce": 1472,
}
_TASK = {"w0": ("worker", 0), "ps0": ("ps", 0)}


def _pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def _latency(cluster, on, via, runs):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:%s/task:%d" % _TASK[on]):
            c = tf.constant(3.0) * 3
        with tf.Session(cluster.target(*_TASK[via])) as sess:
            times = _run_times(sess, c, runs, warmup=100)
    p50, p99 = _pct(times, 50) * 1e6, _pct(times, 99) * 1e6
    tf50, tf99 = TF_2_21[(on, via)]
    print("tiny op on %-3s via master %-3s  p50 %6.0f us  p99 %6.0f us   (TF 2.21: %d / %d)"
          % (on, via, p50, p99, tf50, tf99))
    return p50


def _run_times(sess, fetch, runs, warmup):
    """Seconds of each of ``runs`` runs of ``fetch``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        sess.run(fetch)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(fetch)
        times.append(time.perf_counter() - t0)
    return times


def _times(sess, fetch, reps):
    """(median, best) seconds of ``reps`` runs after one warm-up."""
    times = _run_times(sess, fetch, reps, warmup=1)
    return _pct(times, 50), min(times)


def _rate(what, nbytes, times, tf_rate):
    median, best = times
    print("%-36s %6.0f MB/s median, %6.0f best (%.1f / %.1f ms; TF 2.21: %d MB/s median)"
          % (what, nbytes / median / 1e6, nbytes / best / 1e6, median * 1e3, best * 1e3,
             tf_rate))


def _throughput(cluster, mib, reps):
    g = tf.Graph()
    n = mib << 18   # float32 elements
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(tf.zeros([n]), name="big")
        with tf.device("/job:worker/task:0"):
            s = tf.reduce_sum(v)
        for via in ("w0", "ps0"):
            with tf.Session(cluster.target(*_TASK[via])) as sess:
                sess.run(v.initializer)
                _rate("fetch %d MiB from ps0 via master %s" % (mib, via), mib << 20,
                      _times(sess, v, reps), TF_2_21["fetch " + via])
        with tf.Session(cluster.target("worker", 0)) as sess:
            _rate("op on w0 reads %d MiB from ps0" % mib, mib << 20, _times(sess, s, reps),
                  TF_2_21["reduce"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        for on, via in (("w0", "w0"), ("ps0", "w0"), ("ps0", "ps0")):
            _latency(cluster, on, via, args.runs)
        _throughput(cluster, args.mib, args.reps)


if __name__ == "__main__":
    main()
