"""Cluster benchmarks (prints, asserts nothing), the same measurements as TF 2.21's peer
baseline in ``bench/tf_2_21_reference.txt`` ("servers separate-process"):

* round trip of a tiny op (``a * 3``) pinned on one task, the client talking to one task's
  master, p50 / p99 over many runs: on w0 via w0 (no hop), on ps0 via w0 (the "tiny remote
  op": client -> w0's master -> ps0's worker), on ps0 via ps0;
* fetching a 64 MiB variable that lives on ps0 into the client, through w0's master and
  through ps0's master, in MB/s (median and best of ``--reps`` runs);
* an op on w0 reading the whole 64 MiB variable from ps0 (``reduce_sum``), in MB/s.

Servers are ``LocalCluster`` subprocesses on 127.0.0.1; the client is this process.  Then the
same with w0's server started in this process (the layout of between-graph replication: each
worker process is a client with its own server, the ps tasks elsewhere): sessions on its
``target`` call its master directly (TF's LocalMaster), so a step crosses one gRPC hop less.
TF 2.21 has no row for that layout; its nearest (every server in the client's process,
LocalMaster) is printed next to it.

Last, the floor under those latencies: bare grpcio echo servers in their own processes (no
minitf code), reached through one open stream-stream call, as minitf's steps are (see
``minitf/distributed/streams.py``): one hop (client -> server) and two hops (client ->
server -> server, the path of the tiny op on ps0 via w0).  The VM's speed drifts by tens of
percent between runs, so the rows minitf adds above these two are the figures to compare:
the last line is the tiny remote op's p50 as a ratio to the two-hop floor of the same run (the
goal: at or below TF 2.21's 892 us).

Every task is CPU-only (``MINITF_EMULATED_GPUS=0``, inherited by the LocalCluster children),
as on the machine that measured TF's figures.

    PYTHONPATH=. python3 bench/bench_cluster.py [--runs 2000] [--mib 64]
"""

import argparse
import os
import queue
import subprocess
import sys
import time

os.environ.setdefault("MINITF_EMULATED_GPUS", "0")  # CPU-only tasks, as TF's figures

import grpc  # noqa: E402

import minitf as tf  # noqa: E402
from minitf.distributed import LocalCluster  # noqa: E402
from minitf.distributed.local_cluster import die_with_parent, free_port  # noqa: E402
from minitf.teaching import ProgramLab  # noqa: E402

#: TF 2.21, servers in separate processes, 2-core VM (tf_2_21_reference.txt, eageroff).
TF_2_21 = {
    ("w0", "w0"): (446, 726),
    ("ps0", "w0"): (892, 1233),
    ("ps0", "ps0"): (485, 804),
    "fetch w0": 315,
    "fetch ps0": 471,
    "reduce": 1472,
}
#: TF 2.21, every server in the client's process, client -> master LocalMaster.
TF_2_21_IN_PROCESS = {
    ("w0", "w0"): (106, 300),
    ("ps0", "w0"): (491, 870),
    "fetch w0": 1542,
    "reduce": 1511,
}
_TASK = {"w0": ("worker", 0), "ps0": ("ps", 0)}


def _pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def _latency(target, on, via, runs, tf_figures=TF_2_21):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:%s/task:%d" % _TASK[on]):
            c = tf.constant(3.0) * 3
        with tf.Session(target) as sess:
            times = _run_times(lambda: sess.run(c), runs, warmup=100)
    p50, p99 = _pct(times, 50) * 1e6, _pct(times, 99) * 1e6
    tf50, tf99 = tf_figures[(on, via)]
    print(
        "tiny op on %-3s via master %-3s  p50 %6.0f us  p99 %6.0f us   (TF 2.21: %d / %d)"
        % (on, via, p50, p99, tf50, tf99)
    )
    return p50


def _run_times(run, runs, warmup):
    """Seconds of each of ``runs`` calls of ``run()``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


def _times(sess, fetch, reps):
    """(median, best) seconds of ``reps`` runs after one warm-up."""
    times = _run_times(lambda: sess.run(fetch), reps, warmup=1)
    return _pct(times, 50), min(times)


def _rate(what, nbytes, times, tf_rate):
    median, best = times
    print(
        "%-36s %6.0f MB/s median, %6.0f best (%.1f / %.1f ms; TF 2.21: %d MB/s median)"
        % (what, nbytes / median / 1e6, nbytes / best / 1e6, median * 1e3, best * 1e3, tf_rate)
    )


def _throughput(targets, mib, reps, tf_figures=TF_2_21):
    """``targets``: {"w0": target, "ps0": target or None (skipped)}."""
    g = tf.Graph()
    n = mib << 18  # float32 elements
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(tf.zeros([n]), name="big")
        with tf.device("/job:worker/task:0"):
            s = tf.reduce_sum(v)
        for via in ("w0", "ps0"):
            if targets.get(via) is None:
                continue
            with tf.Session(targets[via]) as sess:
                sess.run(v.initializer)
                _rate(
                    "fetch %d MiB from ps0 via master %s" % (mib, via),
                    mib << 20,
                    _times(sess, v, reps),
                    tf_figures["fetch " + via],
                )
        with tf.Session(targets["w0"]) as sess:
            _rate(
                "op on w0 reads %d MiB from ps0" % mib,
                mib << 20,
                _times(sess, s, reps),
                tf_figures["reduce"],
            )


# -- the grpcio floor -----------------------------------------------------------------------------

_ECHO = "/bench.Echo/Steps"


def _same(b):
    return b


class _OpenCall:
    """One open stream-stream call; ``call(request)`` sends one message and waits for one."""

    def __init__(self, channel):
        self._requests = queue.SimpleQueue()
        start = channel.stream_stream(_ECHO, request_serializer=_same, response_deserializer=_same)
        self._responses = start(iter(self._requests.get, None))

    def __call__(self, request):
        self._requests.put(request)
        return next(self._responses)

    def close(self):
        self._requests.put(None)
        self._responses.cancel()


def _echo_server(port, forward):
    """Child process: answers each message of a call with the same bytes, or with the answer
    of the echo server at ``forward`` (over an open call of its own); exits when stdin closes."""
    from concurrent import futures

    die_with_parent()
    ahead = None if forward is None else grpc.insecure_channel("127.0.0.1:%d" % forward)

    def steps(requests, context):
        call = None if ahead is None else _OpenCall(ahead)
        try:
            for r in requests:
                yield r if call is None else call(r)
        finally:
            if call is not None:
                call.close()

    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "bench.Echo", {"Steps": grpc.stream_stream_rpc_method_handler(steps, _same, _same)}
            ),
        )
    )
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    sys.stdin.buffer.read()
    server.stop(None)


def _floor(runs):
    """p50 / p99 (us) of a 100-byte message there and back through one and two echo servers."""
    ports = [free_port(), free_port()]
    procs = []
    try:
        for port, forward in ((ports[0], None), (ports[1], ports[0])):
            p = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--echo", str(port)]
                + ([] if forward is None else ["--forward", str(forward)]),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            procs.append(p)
            if p.stdout.readline().strip() != b"ready":
                raise RuntimeError("an echo server did not start")
        for hops, port in ((1, ports[0]), (2, ports[1])):
            with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
                call = _OpenCall(channel)
                times = _run_times(lambda call=call: call(b"x" * 100), runs, warmup=100)
                call.close()
            print(
                "grpcio alone, %d hop%s            p50 %6.0f us  p99 %6.0f us"
                % (hops, "s" if hops > 1 else " ", _pct(times, 50) * 1e6, _pct(times, 99) * 1e6)
            )
        return _pct(times, 50) * 1e6  # the two-hop floor
    finally:
        ProgramLab.stop(procs)  # closes their input (they exit), kills any that lingers


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--echo", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--forward", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    if args.echo is not None:
        return _echo_server(args.echo, args.forward)
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        print("-- every server in its own process")
        p50 = {}
        for on, via in (("w0", "w0"), ("ps0", "w0"), ("ps0", "ps0")):
            p50[on, via] = _latency(cluster.target(*_TASK[via]), on, via, args.runs)
        _throughput({via: cluster.target(*_TASK[via]) for via in _TASK}, args.mib, args.reps)
        print(
            "-- w0's server in this process (sessions call its master directly), ps0 in "
            "its own;\n   TF 2.21 figures: every server in the client's process"
        )
        cluster.kill("worker", 0)
        with tf.train.Server(cluster.cluster_spec, "worker", 0) as w0:  # same port
            for on in ("w0", "ps0"):
                _latency(w0.target, on, "w0", args.runs, TF_2_21_IN_PROCESS)
            _throughput({"w0": w0.target}, args.mib, args.reps, TF_2_21_IN_PROCESS)
    print("-- the floor: bare grpcio echo servers in their own processes, one open call")
    floor = _floor(args.runs)
    remote = p50["ps0", "w0"]
    print(
        "tiny op on ps0 via w0 / grpcio 2-hop floor: %.2fx  (p50 %.0f us; goal: <= %d us, "
        "TF 2.21's; TF 2.21 / this floor: %.2fx)"
        % (remote / floor, remote, TF_2_21[("ps0", "w0")][0], TF_2_21[("ps0", "w0")][0] / floor)
    )


if __name__ == "__main__":
    main()
