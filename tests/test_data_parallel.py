"""Data parallelism between graphs on a real cluster: one client process per worker
(tests/data/dp_worker.py) against a LocalCluster of ps and worker tasks.

Book section: "Data parallelism" (synchronous and asynchronous updates, stale gradients,
spare replicas) and "Sharding Variables Across Multiple Parameter Servers"
(``tf.contrib.training.GreedyLoadBalancingStrategy``).  The chief killed and resumed from its
checkpoint, and a lost ps recovered by a MonitoredTrainingSession, are in test_training.py.
"""

import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import child_pids, wait_until
from minitf.distributed import LocalCluster
from minitf.train.staleness import StalenessHook, staleness_of, staleness_probe

WORKER_SCRIPT = str(Path(__file__).parent / "data" / "dp_worker.py")
ROOT = str(Path(__file__).parent.parent)


def _process_wide(t):
    """Helper threads kept once made: minitf's step watchdog, gRPC's threads of its cached
    channels (a session to another process's master makes them)."""
    module = getattr(getattr(t, "_target", None), "__module__", "") or ""
    return t.name == "minitf-step-watchdog" or module.startswith("grpc")


@pytest.fixture(autouse=True)
def fresh_graph():
    """Each test's graph; no process or thread of it left behind."""
    before, threads = child_pids(), set(threading.enumerate())
    with tf.Graph().as_default():
        yield
    assert wait_until(lambda: child_pids() <= before, 10), child_pids() - before
    left = lambda: {t for t in set(threading.enumerate()) - threads if not _process_wide(t)}  # noqa: E731
    assert wait_until(lambda: not left(), 10), left()


def _env():
    return dict(os.environ, MINITF_EMULATED_GPUS="0", PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")


def _start(target, task, out, extra):
    cmd = [sys.executable, WORKER_SCRIPT, "--target", target, "--task", str(task)]
    cmd += ["--out", str(out)] + [str(a) for a in extra]
    return subprocess.Popen(
        cmd,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(proc, prefix, seconds=60.0):
    """Reads the process's stdout until a line starts with ``prefix``; returns that line."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith(prefix):
                return line
    raise AssertionError("no %r line; stderr: %s" % (prefix, _stop(proc)[-3000:]))


def _stop(proc):
    """Kills (if still running) and reaps one client; returns its stderr."""
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate(timeout=30)
    return err or ""


def _finish(procs, seconds=240):
    """Waits for every client to exit 0 (within ``seconds``); kills them all on failure."""
    deadline = time.monotonic() + seconds
    try:
        for p in procs:
            _, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            _stop(p)


def start_together(start, workers, seconds=60.0):
    """Replica 0 (the chief: it initialises the model) started first by ``start(0)``, the others
    once it printed "ready"; once every replica is ready, they all get "go" at once.  Returns
    the processes (all stopped if one of them fails to get ready)."""
    procs = [start(0)]
    try:
        _wait_for_line(procs[0], "ready", seconds)
        procs += [start(i) for i in range(1, workers)]
        for p in procs[1:]:
            _wait_for_line(p, "ready", seconds)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
    except BaseException:
        for p in procs:
            _stop(p)
        raise
    return procs


def start_replicas(cluster, tmp_path, workers, extra, more=None):
    """dp_worker.py's replicas on ``cluster``, started together (:func:`start_together`).
    ``more``: {task: arguments of that one only}.  Returns the client processes."""
    outs = [tmp_path / ("worker%d.npz" % i) for i in range(workers)]
    args = [list(extra) + ["--barrier"] + list((more or {}).get(i, [])) for i in range(workers)]
    return start_together(
        lambda i: _start(cluster.target("worker", i), i, outs[i], args[i]), workers
    )


def train_replicas(cluster, tmp_path, workers, extra):
    """Every replica's training (``start_replicas``); returns each worker's results (the
    .npz dp_worker.py wrote)."""
    _finish(start_replicas(cluster, tmp_path, workers, extra))
    return [np.load(tmp_path / ("worker%d.npz" % i)) for i in range(workers)]


def reference(tmp_path, extra):
    """One replica in one process, a local session (no cluster)."""
    out = tmp_path / "reference.npz"
    r = subprocess.run(
        [sys.executable, WORKER_SCRIPT, "--target", "", "--out", str(out)] + extra,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return np.load(out)


# -- synchronous: two replicas = one replica with the combined batch ---------------------------


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("ps", [1, 2])
def test_sync_replicas_match_one_replica_with_the_combined_batch(tmp_path, ps):
    """Two workers, SyncReplicasOptimizer(replicas_to_aggregate=2): every global step applies
    the mean of the two replicas' gradients on their own halves of the batch, which is the
    gradient of one replica on the whole batch: the parameters agree step for step."""
    steps, batch = 12, 32
    common = ["--model", "digits", "--steps", steps, "--lr", 0.5, "--record-params"]
    with LocalCluster({"ps": ps, "worker": 2}) as cluster:
        got = train_replicas(
            cluster,
            tmp_path,
            2,
            common + ["--mode", "sync", "--workers", 2, "--ps", ps, "--batch", batch],
        )
    ref = reference(tmp_path, [str(a) for a in common + ["--batch", 2 * batch]])
    for r in got:
        assert list(r["steps"]) == list(range(1, steps + 1)) and r["global_step"] == steps
        np.testing.assert_allclose(r["params"], ref["params"], rtol=1e-4, atol=1e-6)
    assert not np.allclose(ref["params"][0], ref["params"][-1])  # it did train
    assert list(ref["staleness"]) == [0] * steps  # one replica alone: never stale
    devices = [d.split("/device")[0] for d in got[0]["var_devices"]]
    # round robin: the global step first (ps 0), then kernel, bias, kernel, bias
    assert devices == ["/job:ps/task:%d" % ((i + 1) % ps) for i in range(4)]


@pytest.mark.cluster
@pytest.mark.slow
def test_a_spare_replica_sync_training_on_digits(tmp_path):
    """Three workers, two gradients aggregated per step (one spare, whose gradient of that
    step comes too late and is dropped): the global step advances once per aggregate, every
    replica stops at the last step, and the digits MLP learns."""
    extra = ["--mode", "sync", "--workers", 3, "--aggregate", 2, "--steps", 1000]
    extra += ["--until-step", 40, "--run-timeout-ms", 5000, "--batch", 64, "--lr", 0.5]
    with LocalCluster({"ps": 1, "worker": 3}) as cluster:
        got = train_replicas(cluster, tmp_path, 3, extra)
    assert [int(r["global_step"]) for r in got] == [40, 40, 40]
    assert got[0]["accuracy"] > 0.8


# -- asynchronous ------------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.slow
def test_async_replicas_train_the_digits_mlp_and_their_gradients_go_stale(tmp_path):
    """Two workers with a plain optimizer each: every run applies its own gradients (the
    global step counts every replica's runs), the MLP passes 90 % test accuracy, and some
    updates were computed on parameters that the other replica had changed meanwhile."""
    extra = ["--mode", "async", "--workers", 2, "--steps", 150, "--batch", 64, "--lr", 0.3]
    with LocalCluster({"ps": 2, "worker": 2}) as cluster:
        got = train_replicas(cluster, tmp_path, 2, extra + ["--ps", 2])
        with tf.Graph().as_default(), tf.Session(cluster.target("worker", 0)) as sess:
            with tf.device("/job:ps/task:0"):
                gs = tf.train.get_or_create_global_step()
            assert sess.run(tf.report_uninitialized_variables([gs])).size == 0
            assert sess.run(gs) == 300
    assert max(r["accuracy"] for r in got) > 0.9
    stale = np.concatenate([r["staleness"] for r in got])
    assert len(stale) == 300 and stale.min() >= 0 and stale.max() >= 1
    assert stale.max() < 300


def test_one_replica_has_no_stale_gradients():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(3.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w), global_step=gs)
    hook = StalenessHook(train)
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        for _ in range(4):
            sess.run(train)
        sess.run(w)  # not a training run: not recorded
    assert hook.staleness == [0, 0, 0, 0] and hook.steps == [1, 2, 3, 4]


def test_staleness_by_hand_with_another_update_in_between():
    """Another replica's update between this run's read and its own counts one."""
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(3.0)
    loss = tf.square(w)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    other = tf.assign_add(gs, 1)
    before, after = staleness_probe(train)
    assert before.op.colocation_groups() == train.colocation_groups()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        b, a = sess.run([before, after])
        assert (b, a) == (0, 1)
        assert staleness_of(b, a) == 0
        b = sess.run(before)
        sess.run(other)  # another replica's update
        assert staleness_of(b, sess.run(after)) == 1


def test_the_probe_needs_the_step_op():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(3.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w))
    with pytest.raises(ValueError, match="staleness_probe needs the train op"):
        staleness_probe(train)
    assert gs is not None


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.slow
def test_async_training_goes_on_when_a_worker_dies(tmp_path):
    """Asynchronous replicas are independent: with one worker (its client and its task)
    killed mid-training, the other still finishes its runs and the global step still rises."""
    extra = ["--mode", "async", "--workers", 2, "--steps", 200, "--batch", 32]
    with LocalCluster({"ps": 1, "worker": 2}) as cluster:
        chief, other = start_replicas(cluster, tmp_path, 2, extra, {1: ["--steps", 100000]})
        try:
            _wait_for_line(chief, "step 20")
            _stop(other)
            cluster.kill("worker", 1)
            killed_at = _global_step(cluster)
            _finish([chief])
        finally:
            _stop(chief)
            _stop(other)
        final = _global_step(cluster)
    # killed mid-training; every run of the chief's after that still counts
    assert killed_at < 150 and final > killed_at
    assert not (tmp_path / "worker1.npz").exists()
    assert final == np.load(tmp_path / "worker0.npz")["global_step"] >= 200


def _global_step(cluster):
    """The global step, read through worker 0 (its device filters leave out the others: a
    session whose cluster has a dead task fails to start, as the replicas' own do not)."""
    config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    with tf.Graph().as_default(), tf.Session(cluster.target("worker", 0), config=config) as sess:
        with tf.device("/job:ps/task:0"):
            gs = tf.train.get_or_create_global_step()
        return int(sess.run(gs))


# -- tf.contrib.training's greedy ps strategy ---------------------------------------------------


def _greedy(sizes, tasks):
    """TF's rule, by hand: each variable in turn to the least-loaded task (lowest on ties)."""
    loads, out = [0] * tasks, []
    for n in sizes:
        task = loads.index(min(loads))
        loads[task] += n
        out.append(task)
    return out


def test_greedy_load_balancing_places_variables_by_bytes():
    """The 784-300-100-10 MLP on 2 ps tasks: round robin puts both big kernels on ps 0 (with
    the step); the greedy strategy gives the 940,800-byte first kernel a task of its own."""
    strategy = tf.contrib.training.GreedyLoadBalancingStrategy(
        2, tf.contrib.training.byte_size_load_fn
    )
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 784])
        h = tf.layers.dense(x, 300, name="hidden1")
        h = tf.layers.dense(h, 100, name="hidden2")
        tf.layers.dense(h, 10, name="logits")
        scalar = tf.Variable(1.0, name="scalar")
    variables = tf.global_variables()
    sizes = [tf.contrib.training.byte_size_load_fn(v.op) for v in variables]
    assert sizes == [8, 784 * 300 * 4, 1200, 120000, 400, 4000, 40, 4]
    tasks = [int(v.device.split("task:")[1][0]) for v in variables]
    assert tasks == _greedy(sizes, 2) == [0, 1, 0, 0, 0, 0, 0, 0]
    assert gs.device == "/job:ps/task:0" and scalar.device == "/job:ps/task:0"
    three = tf.contrib.training.GreedyLoadBalancingStrategy(3, lambda op: 1)
    assert [three(None) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_byte_size_load_fn_needs_one_output_of_known_shape():
    from minitf.contrib.training import byte_size_load_fn

    text = 'Op name: "noop"\nop: "NoOp" must have a single output'
    with pytest.raises(ValueError, match=text):
        byte_size_load_fn(tf.no_op(name="noop"))
    p = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(ValueError, match=r"Shape \(\?, 3\) is not fully defined"):
        byte_size_load_fn(p.op)
    assert byte_size_load_fn(tf.Variable(tf.zeros([2, 3], tf.float64)).op) == 48
