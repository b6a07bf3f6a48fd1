"""LocalCluster (tasks as subprocesses), the ``python -m minitf.server`` CLI, several client
processes sharing variables, and fault tests: a task killed mid-step, restarted on its port."""

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import client_env, wait_until
from minitf.distributed import LocalCluster, local_cluster
from minitf.distributed.local_cluster import free_port
from minitf.runtime.pools import schedulable_cores

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("no_child_process_left")]


def _alive(pid):
    try:
        state = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def lc():
    with LocalCluster({"ps": 2, "worker": 3}) as cluster:
        yield cluster


@pytest.mark.slow
def test_local_cluster_runs_the_blog_example(lc):
    spec = lc.cluster_spec
    assert spec.jobs == ["ps", "worker"] and spec.num_tasks("worker") == 3
    assert set(lc.targets) == {"ps/0", "ps/1", "worker/0", "worker/1", "worker/2"}
    assert lc.target("worker", 1) == "grpc://" + spec.task_address("worker", 1)
    with tf.device("/job:ps"):
        a = tf.Variable(1.0, name="a")
    with tf.device("/job:worker"):
        b = a + 2
    with tf.device("/job:worker/task:1"):
        c = a + b
    with tf.Session(lc.target("worker", 0)) as sess:
        sess.run(a.initializer)
        assert sess.run(c) == 4.0
    for t in lc.targets.values():
        with tf.Session(t) as sess:
            assert sess.run(c) == 4.0


SIMPLE_CLIENT = textwrap.dedent("""
    import sys
    import minitf as tf
    x = tf.Variable(0.0, name="x")
    increment_x = tf.assign(x, x + 1)
    with tf.Session(sys.argv[1]) as sess:
        if sys.argv[2:] == ["init"]:
            sess.run(x.initializer)
        sess.run(increment_x)
        print(sess.run(x))
""")


@pytest.mark.slow
def test_three_client_processes_share_a_variable(tmp_path):
    """The book's simple_client.py run three times against one server (ex_f: 1.0, 2.0, 3.0)."""
    script = tmp_path / "simple_client.py"
    script.write_text(SIMPLE_CLIENT)
    with LocalCluster({"ps": 1, "worker": 1}) as cluster:
        target = cluster.target("worker", 0)
        outs = []
        for args in (["init"], [], []):
            r = subprocess.run(
                [sys.executable, str(script), target] + args,
                env=client_env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert r.returncode == 0, r.stderr[-2000:]
            outs.append(float(r.stdout.split()[-1]))
        assert outs == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_worker_killed_mid_step_then_restarted():
    with LocalCluster({"ps": 2, "worker": 3}) as lc:
        _kill_mid_step(lc)


def _kill_mid_step(lc):
    with tf.device("/job:worker/task:2"):
        q = tf.placeholder(tf.float32, [1024, 1024])
        m = q
        for _ in range(300):
            m = tf.matmul(m, q)
    with tf.device("/job:worker/task:0"):
        out = tf.reduce_sum(m)
    feed = {q: np.eye(1024, dtype=np.float32)}
    errs = []

    def run():
        try:
            with tf.Session(lc.target("worker", 0)) as sess:
                sess.run(out, feed_dict=feed)
        except Exception as e:  # noqa: BLE001
            errs.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    lc.kill("worker", 2)
    t.join(30)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 15
    assert len(errs) == 1 and isinstance(errs[0], tf.errors.UnavailableError), errs
    assert "/job:worker/replica:0/task:2" in errs[0].message
    # the other servers keep serving
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:1"):
            k = tf.constant(1.0) + 2.0
        with tf.Session(
            lc.target("ps", 0),
            config=tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"]),
        ) as sess:
            assert sess.run(k) == 3.0
    lc.restart("worker", 2)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:2"):
            y = tf.constant(2.0) * 5.0
        with tf.Session(lc.target("worker", 0)) as sess:
            assert sess.run(y) == 10.0


def test_children_exit_when_the_parent_is_killed(tmp_path):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys, time
        from minitf.distributed import LocalCluster, local_cluster
        c = LocalCluster({"worker": 2})
        print(" ".join(str(c.pid("worker", i)) for i in range(2)), flush=True)
        time.sleep(120)
    """),
        ],
        stdout=subprocess.PIPE,
        env=client_env(),
        text=True,
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        parent.stdout.close()
    assert wait_until(lambda: not any(_alive(p) for p in pids), 10)


def test_cluster_started_from_a_thread_that_ends_keeps_serving():
    """Linux's death signal follows the thread that started a child: a cluster started from a
    short-lived thread (a callback, a worker thread) used to die with that thread."""
    holders = local_cluster._spawner._holders  # clusters other tests left running (lc)
    started = []
    starter = threading.Thread(target=lambda: started.append(LocalCluster({"worker": 1})))
    starter.start()
    starter.join(60)
    (cluster,) = started
    try:
        proc = cluster._procs[("worker", 0)]
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # the death signal would have come at once
        with tf.device("/job:worker/task:0"):
            y = tf.constant(2.0) * 5.0
        with tf.Session(cluster.target("worker", 0)) as sess:
            assert sess.run(y) == 10.0
    finally:
        cluster.stop()
    assert proc.poll() is not None  # stopped and reaped
    assert local_cluster._spawner._holders == holders
    if holders == 0:  # the spawner thread ends with the last cluster
        assert wait_until(
            lambda: not any(t.name == "minitf-cluster-spawner" for t in threading.enumerate())
        )


def test_children_of_a_thread_started_cluster_die_with_the_process(tmp_path):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys, threading
        from minitf.distributed import LocalCluster, local_cluster
        out = []
        t = threading.Thread(target=lambda: out.append(LocalCluster({"worker": 1})))
        t.start(); t.join()
        print(out[0].pid("worker", 0), flush=True)
        sys.stdin.read()
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=client_env(),
        text=True,
    )
    try:
        pid = int(parent.stdout.readline())
        assert _alive(pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        parent.stdout.close()
        parent.stdin.close()
    assert wait_until(lambda: not _alive(pid), 10)


@pytest.mark.slow
def test_cli_serves_until_ctrl_c(tmp_path):
    port = free_port()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"worker": ["127.0.0.1:%d" % port]}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "minitf.server",
            "--cluster",
            str(cluster),
            "--job",
            "worker",
            "--task",
            "0",
        ],
        stdout=subprocess.PIPE,
        env=client_env(),
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "minitf-server worker 0 listening on 127.0.0.1:%d" % port
        c = tf.constant(2.0) * 21.0
        with tf.Session("grpc://127.0.0.1:%d" % port) as sess:
            assert sess.run(c) == 42.0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()


@pytest.mark.parametrize("threads", [3, 0])
def test_the_server_config_sizes_the_workers_inter_op_pool(threads):
    """As TF's worker: one compute pool runs the ops of every partition, sized from the
    server's config like a session's inter-op pool (0: a thread per core the process may use)."""
    config = tf.ConfigProto(inter_op_parallelism_threads=threads)
    server = tf.train.Server({"local": ["localhost:0"]}, config=config, start=False)
    try:
        assert server.worker.pool_set.inter_threads == (threads or schedulable_cores())
    finally:
        server.stop()


@pytest.mark.parametrize("threads", [1, 2])
def test_the_cluster_config_sizes_each_workers_inter_op_pool(threads):
    """``LocalCluster(config=...)`` hands each task's server ``inter_op_parallelism_threads``:
    a traced step of eight independent matmuls runs them on that many inter-op threads at
    most (a worker's pool had 32 threads, whatever the config)."""
    config = tf.ConfigProto(inter_op_parallelism_threads=threads)
    with LocalCluster({"worker": 1}, config=config) as cluster:
        with tf.device("/job:worker/task:0"):
            a = tf.ones([256, 256])
            products = [tf.matmul(a, a * float(k), name="product%d" % k) for k in range(8)]
        md = tf.RunMetadata()
        with tf.Session(cluster.target("worker")) as sess:
            opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
            sess.run(products, options=opts, run_metadata=md)
    names = {
        n.thread_name
        for d in md.step_stats.dev_stats
        for n in d.node_stats
        if n.node_name.startswith("product")
    }
    pool = {n for n in names if n.startswith("inter-op #")}
    assert pool, names  # the matmuls are expensive: they wait for the pool's threads
    assert pool <= {"inter-op #%d" % k for k in range(threads)}, names


def test_the_cluster_config_sizes_each_workers_intra_op_pool():
    """``LocalCluster(config=...)`` hands each task's server the ConfigProto's
    ``intra_op_parallelism_threads``, like ``tf.train.Server(config=...)``: its worker splits a
    large MatMul over that many intra-op threads (the default is up to 4, one per core)."""
    config = tf.ConfigProto(intra_op_parallelism_threads=3)
    server = tf.train.Server({"local": ["localhost:0"]}, config=config, start=False)
    try:
        assert server.worker.pool_set.intra_threads == 3
    finally:
        server.stop()
    with LocalCluster({"worker": 1}, config=config) as cluster:
        with tf.device("/job:worker/task:0"):
            a = tf.ones([512, 512])
            product = tf.matmul(a, a, name="big_product")
        md = tf.RunMetadata()
        with tf.Session(cluster.target("worker")) as sess:
            opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
            assert sess.run(product, options=opts, run_metadata=md)[0, 0] == 512.0
    (node,) = [
        n for d in md.step_stats.dev_stats for n in d.node_stats if n.node_name == "big_product"
    ]
    assert len(node.chunks) == 3
