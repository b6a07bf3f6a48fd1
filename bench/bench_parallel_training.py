"""Data parallelism: what two replicas buy over one, and what crosses the wire.

Book section: "Parallel training" / "Data parallelism" (in-graph towers on the GPUs of one
machine; between-graph replicas on a cluster, asynchronous and synchronous; "bandwidth
saturation").  Run::

    python bench/bench_parallel_training.py           # every figure
    python bench/bench_parallel_training.py --quick   # fewer steps (a smoke run)
    python bench/bench_parallel_training.py --tf /tmp/tfvenv/bin/python   # and TF's replicas

Every device or worker is held to one core: one BLAS thread (``OPENBLAS_NUM_THREADS=1`` and
friends, set before numpy loads, and in the cluster's processes), sessions with
``intra_op_parallelism_threads=1`` (the cluster's servers too: a task's intra-op pool is its
server's), and each worker task of the cluster pinned to a core of its own
(``os.sched_setaffinity``, every thread).  The VM the figures were first taken on has 2 cores,
so there the three tasks and two clients share them; on a machine with more, each task has a
core of its own (a 16-core host: bench/README).

1. *Towers on emulated GPUs* (one process, ``tf.config.emulate_gpus(2)``): the 784-300-100-10 MLP
   on synthetic data, batch 256 per tower, its variables on the CPU; samples/s of 2 towers (seed
   003's averaged gradients, one ``apply_gradients``) against 1 tower. Goal: >= 1.6x. Each card
   is held to one core as the cluster's workers are: ``TF_GPU_THREAD_MODE=gpu_private`` with
   ``TF_GPU_THREAD_COUNT=1`` gives each card one thread of its own, which runs its ops one at a
   time as a card's stream does (in TF's default ``global`` mode the cards' ops share the 2
   inter-op threads, so ONE tower already ran its independent gradient matmuls on both cores,
   about 1.3 cores, and 2 towers had little left to win), and the CPU, which averages and
   applies the gradients, has one inter-op thread: with every device on one thread, each
   device's partition runs as one program on its thread (``runtime/device_programs.py``; with
   two inter-op threads the step went through the general driver and cost 12-15 % more, both
   for 1 tower and for 2, 2026-11-27). Under it: the same tower's numpy work
   alone (no minitf) on 2 Python threads against 1, measured just before and after: the ceiling
   of the ratio for threads of one process on this machine now.
0. *The machine*: how much more two busy processes get done than one (2.0 on 2 idle cores):
   the ceiling of every ratio below, measured in the same run.
2. *Between-graph replicas* (LocalCluster, 1 ps; tests/data/dp_worker.py as each worker's
   client): 2 workers, asynchronous (a plain optimizer each) and synchronous
   (``SyncReplicasOptimizer``, 2 aggregated), against 1 worker; the MLP and the digits MLP
   (64-64-10), batch 256 per worker.  Samples/s: every replica's runs after its first, over the
   time they took (median of rounds that alternate the three set-ups; each ratio the median
   of the rounds' own ratios, ``bench/ratios.py``, which it prints).  Goals: >= 1.5x
   asynchronous, >= 1.3x synchronous.  Under each: the CPU milliseconds that one run costs in
   each process in the last round, read while every replica was in its timed runs (a thread
   reads the tasks' CPU every 20 ms; set-up and traced runs left out), and from them, round by
   round, the most the machine's idle cores could give: on C cores, C core-seconds a second
   over the CPU one run takes with 2 workers, or 2 over a worker task's CPU a run (each has
   one core), whichever is less, is the most runs a second 2 workers can make, which is
   divided by the runs a second of 1 worker in the same round (a ceiling pairs with its own
   round's ratio; until the fourteenth session the bench printed the last round's ceiling
   under the median ratio, and a median from a quieter round could stand above it).
   (Until 2026-11-27 the bench divided 2 x the CPU of a 1-worker run by that of a 2-worker run,
   measured over the whole training with its set-up: that assumed one worker keeps exactly one
   core busy, and it keeps more, the ps working beside it.)
   With ``--tf PATH`` (the interpreter of a throw-away venv with tensorflow-cpu, never a
   minitf dependency) each round also runs TensorFlow's own replicas in the same set-up
   (``tf_replica_child.py``: ``tf.train.Server`` tasks with one intra-op thread, the workers
   pinned as above, a client process per replica with the same model, rows, batch and
   thread settings) right after minitf's, and prints TF's samples/s and ratios: what the
   goals' ratios are on this machine for TensorFlow itself.
3. *Bytes per step per ps task*: the bytes of the ``_Recv`` transfers to and from each ps task
   in a traced step (RunMetadata step stats, ``FULL_TRACE``) against the minimum, each
   parameter once per direction (2 x the bytes of the variables on that task).

The ratios are noisy: the machine is shared with other work, and every figure is measured
while it runs; a ratio compares figures of the same run, never of different runs.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ratios import paired_ratio  # noqa: E402

import minitf as tf  # noqa: E402
from minitf.distributed import LocalCluster  # noqa: E402
from minitf.lib.cores import schedulable_cores  # noqa: E402

BATCH = 256
CORES = schedulable_cores()  # the cores this process (and the cluster it starts) may use
ONE_CORE = dict(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
# each task's server: a worker's intra-op pool is the server's (as in TF), not the session's
SERVER_CONFIG = tf.ConfigProto(intra_op_parallelism_threads=1)


# -- 0. what the machine gives two processes ---------------------------------------------------

_SPIN = """
import os, time
import numpy as np
a = np.ones((256, 784), np.float32); w = np.ones((784, 300), np.float32)
n, end = 0, time.perf_counter() + %f
while time.perf_counter() < end:
    a @ w
    n += 1
print(n)
"""


def machine_parallelism(seconds=2.0):
    """Matmuls done by 2 processes at once over those of 1 alone (2.0 on 2 idle cores): the
    ceiling of every ratio below, on this machine, now."""
    import subprocess

    def spin(n):
        code = _SPIN % seconds
        procs = [
            subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            for _ in range(n)
        ]
        return sum(int(p.communicate(timeout=60)[0]) for p in procs)

    ratio = spin(2) / spin(1)
    print("0. two busy processes do %.2fx the work of one (2.00 on 2 idle cores)" % ratio)
    return ratio


# -- 1. towers on emulated GPUs --------------------------------------------------------------


def _tower_graph(towers):
    """The MLP on ``towers`` emulated GPUs, its variables on the CPU, gradients averaged and
    applied there (seed 003's ``average_gradients`` comes from TF's multi-GPU example, which
    keeps the variables on the CPU; Figure 12-17's parameters are held apart from the replicas).
    ``replica_device_setter`` with ``ps_device="/cpu:0"`` is TF's idiom for it."""
    opt = tf.train.GradientDescentOptimizer(0.01)
    grads, feeds = [], []
    for i in range(towers):
        setter = tf.train.replica_device_setter(
            ps_tasks=1, ps_device="/cpu:0", worker_device="/gpu:%d" % i
        )
        with tf.device(setter), tf.name_scope("tower_%d" % i):
            x = tf.placeholder(tf.float32, [BATCH, 784])
            y = tf.placeholder(tf.int64, [BATCH])
            with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
                h = tf.layers.dense(x, 300, tf.nn.relu, name="hidden1")
                h = tf.layers.dense(h, 100, tf.nn.relu, name="hidden2")
                logits = tf.layers.dense(h, 10, name="logits")
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            grads.append(opt.compute_gradients(loss))
            feeds.append((x, y))
    with tf.device("/cpu:0"):
        mean = [
            (tf.reduce_mean(tf.stack([g for g, _ in pairs]), 0), pairs[0][1])
            for pairs in zip(*grads)
        ]
        train = opt.apply_gradients(mean)
    return train, feeds


def towers_samples_per_sec(towers, steps):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, BATCH)
    with tf.Graph().as_default():
        train, feeds = _tower_graph(towers)
        feed = {p: v for xy in feeds for p, v in zip(xy, (x, y))}
        with tf.Session(config=tf.ConfigProto(**ONE_CORE)) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(train, feed)
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(train, feed)
            seconds = time.perf_counter() - start
    return towers * BATCH * steps / seconds


def _numpy_tower_step(x, weights):
    """One tower's forward and backward matmuls and ReLUs in plain numpy (no minitf)."""
    h1 = np.maximum(x @ weights[0], 0)
    h2 = np.maximum(h1 @ weights[1], 0)
    g = h2 @ weights[2] - 0.1
    gh2 = (g @ weights[2].T) * (h2 > 0)
    gh1 = (gh2 @ weights[1].T) * (h1 > 0)
    return h2.T @ g, h1.T @ gh2, x.T @ gh1


def thread_parallelism(steps=100):
    """The tower's numpy work on 2 threads of this process over 1 thread (2.0 on 2 idle
    cores): the ceiling of the towers' ratio, on this machine, now."""
    import threading

    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    weights = [
        rng.standard_normal(s).astype(np.float32) for s in ((784, 300), (300, 100), (100, 10))
    ]

    def work():
        for _ in range(steps):
            _numpy_tower_step(x, weights)

    start = time.perf_counter()
    work()
    one = time.perf_counter() - start
    threads = [threading.Thread(target=work) for _ in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 2 * one / (time.perf_counter() - start)


def bench_towers(steps, rounds):
    """Rounds of (thread ceiling, 1 tower, 2 towers, thread ceiling), alternating; medians."""
    tf.config.emulate_gpus(2)
    saved = {k: os.environ.get(k) for k in ("TF_GPU_THREAD_MODE", "TF_GPU_THREAD_COUNT")}
    os.environ.update(TF_GPU_THREAD_MODE="gpu_private", TF_GPU_THREAD_COUNT="1")
    try:
        one, two, ceiling = [], [], []
        for _ in range(rounds):  # alternating, so that a slow spell hits both
            ceiling.append(thread_parallelism())
            one.append(towers_samples_per_sec(1, steps))
            two.append(towers_samples_per_sec(2, steps))
            ceiling.append(thread_parallelism())
    finally:
        tf.config.emulate_gpus(None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    a, b = float(np.median(one)), float(np.median(two))
    ratio, _ = paired_ratio(two, one)
    print(
        "1. towers on emulated GPUs (784-300-100-10, batch %d per tower, one thread a card)" % BATCH
    )
    print("   1 tower : %8.0f samples/s" % a)
    print("   2 towers: %8.0f samples/s   ratio %.2fx   goal >= 1.6x" % (b, ratio))
    rounds_text = ", ".join(
        "%.2fx (%.2f/%.2f)" % (t / o, ceiling[2 * i], ceiling[2 * i + 1])
        for i, (o, t) in enumerate(zip(one, two))
    )
    print("      per round: ratio (numpy work on 2 threads / 1 before/after) " + rounds_text)
    return ratio


# -- 2. and 3. replicas on a cluster -------------------------------------------------------


def _pin(pids):
    """Each worker task (``pids``, in task order) on a core of its own, every thread of it
    (``sched_setaffinity`` of a process id pins only its main thread; threads it already
    started keep their cores, and threads they start inherit them); the ps may use any."""
    cores = sorted(os.sched_getaffinity(0))
    for i, pid in enumerate(pids):
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                os.sched_setaffinity(int(tid), {cores[i % len(cores)]})
            except OSError:  # the thread ended meanwhile
                pass


def _cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _CpuTrace:
    """The tasks' CPU seconds, read every ``every`` seconds by a thread while the replicas
    train: ``between(task, t0, t1)`` is a task's CPU over a window of wall-clock time
    (``time.time``, as dp_worker.py's run spans), interpolated between readings."""

    def __init__(self, tasks, every=0.02):
        self.tasks, self.every, self.readings = tasks, every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self):
        while True:
            self.readings.append((time.time(), {k: _cpu_seconds(p) for k, p in self.tasks.items()}))
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def between(self, task, t0, t1):
        times = [t for t, _ in self.readings]
        values = [v[task] for _, v in self.readings]
        return float(np.interp(t1, times, values) - np.interp(t0, times, values))


def _steady_window(got):
    """The wall-clock window in which every replica was in its timed runs (after its set-up
    run, before its traced ones), and how many runs of each replica lie inside it."""
    # a replica's first span is its first run, which sets things up: not a timed one
    spans = [np.asarray(r["spans"]).reshape(-1, 2)[1:] for r in got]
    t0, t1 = max(s[0, 0] for s in spans), min(s[-1, 1] for s in spans)
    runs = [int(((s[:, 0] >= t0) & (s[:, 1] <= t1)).sum()) for s in spans]
    if min(runs) == 0:  # no run of some replica inside it (a short smoke run): all the runs
        t0, t1 = min(s[0, 0] for s in spans), max(s[-1, 1] for s in spans)
        runs = [len(s) for s in spans]
    return t0, t1, runs


def run_replicas(model, mode, workers, steps):
    """One LocalCluster (1 ps).  Returns samples/s of all replicas, the ps bytes of a traced
    step, the variables' bytes, and (CPU milliseconds per run {process: ms}, cores busy)."""
    from test_data_parallel import _finish, start_replicas

    extra = ["--mode", mode, "--workers", workers, "--model", model, "--steps", steps]
    extra += ["--batch", BATCH, "--trace-steps", 2, "--lr", 0.05]
    # the tasks compute on their CPUs: a CUDA card on the machine would take the model
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    with LocalCluster({"ps": 1, "worker": workers}, env=env, config=SERVER_CONFIG) as cluster:
        _pin([cluster.pid("worker", i) for i in range(workers)])
        tasks = {"ps": cluster.pid("ps", 0)}
        tasks.update({"worker %d" % i: cluster.pid("worker", i) for i in range(workers)})
        with tempfile.TemporaryDirectory() as d:
            procs = start_replicas(cluster, Path(d), workers, extra)
            with _CpuTrace(tasks) as trace:
                _finish(procs)
            got = [np.load(Path(d) / ("worker%d.npz" % i)) for i in range(workers)]
    # the first run (set-up) and the traced ones are not timed
    rate = sum(int(r["timed_runs"]) * BATCH / float(r["seconds"]) for r in got)
    return rate, got[0]["ps_bytes"][-1], got[0]["var_bytes"], _cpu_per_task(trace, got)


def _cpu_per_task(trace, got):
    """CPU ms per run of one replica in each process, over the window where every replica ran
    its timed runs (the ps serves every replica's runs, a worker task its own; the clients'
    own figure is their timed runs'), and the cores the tasks kept busy in that window."""
    t0, t1, runs = _steady_window(got)
    cpu = {k: 1000 * trace.between(k, t0, t1) for k in trace.tasks}
    cores = sum(cpu.values()) / 1000 / (t1 - t0)
    cpu["ps"] /= sum(runs)
    for i, n in enumerate(runs):
        cpu["worker %d" % i] /= n
    cpu["client"] = np.mean([1000 * float(r["cpu_seconds"]) / int(r["timed_runs"]) for r in got])
    return cpu, cores


def run_tf_replicas(python, model, mode, workers, steps):
    """TensorFlow's replicas in the set-up of :func:`run_replicas` (``tf_replica_child.py``
    run by ``python``: 1 ps and ``workers`` servers of ``tf.train.Server``, each worker task
    pinned to a core of its own, a client process per replica, the chief first, all starting
    together).  Returns samples/s of all replicas."""
    import json
    import subprocess

    from test_data_parallel import _wait_for_line, start_together

    from minitf.distributed.local_cluster import free_port

    child = [python, str(ROOT / "bench" / "tf_replica_child.py")]
    spec = {"ps": ["127.0.0.1:%d" % free_port()]}
    spec["worker"] = ["127.0.0.1:%d" % free_port() for _ in range(workers)]
    procs = []

    def start(*argv):
        err = tempfile.TemporaryFile("w+")  # TF's log, shown if the child fails
        p = subprocess.Popen(
            child + [str(a) for a in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        procs.append((p, err))
        return p

    try:
        servers = [start("server", json.dumps(spec), "ps", 0)]
        servers += [start("server", json.dumps(spec), "worker", i) for i in range(workers)]
        for p in servers:
            _wait_for_line(p, "ready", 120)
        _pin([p.pid for p in servers[1:]])
        clients = start_together(
            lambda i: start(
                "client", "grpc://" + spec["worker"][i], i, workers, mode, model, steps, BATCH, 0.05
            ),
            workers,
            seconds=120,
        )
        got = [json.loads(_wait_for_line(c, "{", 240)) for c in clients]
    except AssertionError as e:
        raise RuntimeError(
            "TensorFlow's %s replicas failed: %s\n%s" % (mode, e, _tails(procs))
        ) from None
    finally:
        for p, err in procs:
            p.kill()
            p.communicate(timeout=30)
            err.close()
    return sum(r["timed_runs"] * BATCH / r["seconds"] for r in got)


def _tails(procs):
    """The last lines each TF child wrote to stderr."""
    out = []
    for p, err in procs:
        err.seek(0)
        out.append("%s: %s" % (p.args[2:5], "".join(err.readlines()[-5:])))
    return "\n".join(out)


def _cpu_line(cpu):
    per_run, cores = cpu
    parts = ", ".join("%s %.1f" % kv for kv in per_run.items())
    return "CPU ms per run: %s; the tasks kept %.2f cores busy" % (parts, cores)


def _workers_ms(per_run):
    """The worker tasks' CPU ms per run, from a ``{process: ms}`` of :func:`_cpu_per_task`."""
    return [v for k, v in per_run.items() if k.startswith("worker")]


def _cpu_per_run(cpu):
    """CPU ms that one replica's run costs, over every process (the ps and client shares)."""
    per_run, _ = cpu
    return per_run["ps"] + float(np.mean(_workers_ms(per_run))) + per_run["client"]


def _print_ceiling(twos, ones):
    """The most this machine's idle cores allow, round by round: on ``CORES`` cores, ``CORES``
    core-seconds a second over a round's CPU per run with 2 workers, and (each worker task
    pinned to a core of its own) 2 core-seconds over a worker task's CPU per run, whichever is
    less, divided by the same round's runs a second of 1 worker (each ceiling pairs with its
    own round's ratio: the machine's load drifts between rounds).  On 2 cores the first
    bounds it; with a core for every task the second does."""
    rounds = []
    for two, one in zip(twos, ones, strict=True):
        per_run, runs_one = _cpu_per_run(two[3]) / 1000, one[0] / BATCH
        worker = max(_workers_ms(two[3][0])) / 1000
        most = min(CORES / per_run, 2 / worker)
        rounds.append("%.2f (%.1f ms, %.1f/s)" % (most / runs_one, 1000 * per_run, runs_one))
    print(
        "      on %d idle cores at most min(%d / CPU a run takes with 2 workers, 2 / a worker "
        "task's CPU a run) / runs a second of 1 worker, per round: %s"
        % (CORES, CORES, ", ".join(rounds))
    )


def bench_cluster(steps, model, rounds, tf_python=None):
    """Rounds of (1 worker, 2 async, 2 sync), alternating, TensorFlow's after minitf's in each
    round with ``tf_python``; medians."""
    print("2. between-graph replicas, %s MLP, 1 ps, batch %d per worker" % (model, BATCH))
    configs = [("async", 1), ("async", 2), ("sync", 2)]
    got = {c: [] for c in configs}
    tf_got = {c: [] for c in configs}
    for _ in range(rounds):
        for mode, workers in configs:
            got[(mode, workers)].append(run_replicas(model, mode, workers, steps))
        for mode, workers in configs if tf_python else ():
            tf_got[(mode, workers)].append(run_tf_replicas(tf_python, model, mode, workers, steps))
    rate = {c: float(np.median([r[0] for r in got[c]])) for c in configs}
    one = rate[("async", 1)]
    ones = [r[0] for r in got[("async", 1)]]
    print("   1 worker          : %8.0f samples/s" % one)
    print("      " + _cpu_line(got[("async", 1)][-1][3]))
    for mode, goal in (("async", 1.5), ("sync", 1.3)):
        two, cpu = rate[(mode, 2)], got[(mode, 2)][-1][3]
        ratio, each = paired_ratio([r[0] for r in got[(mode, 2)]], ones)
        print(
            "   2 workers, %-6s: %8.0f samples/s   ratio %.2fx   goal >= %.1fx   (per round %s)"
            % (mode, two, ratio, goal, each)
        )
        print("      " + _cpu_line(cpu))
        _print_ceiling(got[(mode, 2)], got[("async", 1)])
    if tf_python:
        _print_tf(tf_got, one)
    _, ps_bytes, var_bytes, _ = got[("async", 1)][-1]
    minimum = 2 * int(var_bytes.sum())  # each parameter, once each way
    print(
        "3. bytes per step to and from ps 0: %d (1 worker, async); minimum %d "
        "(each parameter once per direction); ratio %.4f"
        % (ps_bytes[0], minimum, ps_bytes[0] / minimum)
    )


def _print_tf(tf_got, minitf_one):
    """TensorFlow's figures of the same rounds, and its ratios next to minitf's."""
    rate = {c: float(np.median(v)) for c, v in tf_got.items()}
    one = rate[("async", 1)]
    print(
        "   TensorFlow, the same set-up: 1 worker %.0f samples/s (minitf / TF %.2f)"
        % (one, minitf_one / one)
    )
    for mode in ("async", "sync"):
        ratio, rounds = paired_ratio(tf_got[(mode, 2)], tf_got[("async", 1)])
        print(
            "      2 workers, %-6s: %8.0f samples/s   ratio %.2fx   (per round %s)"
            % (mode, rate[(mode, 2)], ratio, rounds)
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--tf", metavar="PATH", help="python of a venv with tensorflow-cpu: its replicas too"
    )
    args = p.parse_args()
    steps, rounds, cluster_steps = (10, 1, 12) if args.quick else (40, 3, 60)
    machine_parallelism()
    bench_towers(steps, rounds)
    for model in ("mlp784", "digits"):
        bench_cluster(cluster_steps, model, rounds, args.tf)
    print("(machine shared with other work: the ratios are noisy)")


if __name__ == "__main__":
    main()
