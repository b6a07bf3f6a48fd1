"""A step that fails on a server frees what it held: its feeds are not kept alive by the
failure's traceback (a 64 MiB feed per timed-out step used to stay on the task for good)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest

import minitf as tf
from minitf.distributed import LocalCluster

pytestmark = pytest.mark.cluster

MIB = 1 << 20


def blocked_step_graph():
    """``(graph, x, y)``: y sums feed x and then waits on an empty queue (a step that only ends
    at its timeout)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        q = tf.FIFOQueue(1, [tf.float32], shapes=[[]], name="never_filled")
        y = tf.add(tf.reduce_sum(x), q.dequeue(), name="y")
    return g, x, y


def timed_out_steps_growth(target, pid, steps, feed_mib=64):
    """Bytes the task ``pid`` grew by over ``steps`` timed-out steps with a ``feed_mib`` feed
    (measured after one such step, which sizes the task's buffers and pools)."""
    g, x, y = blocked_step_graph()
    feed = np.ones(feed_mib * MIB // 4, np.float32)
    proc = psutil.Process(pid)
    config = tf.ConfigProto(operation_timeout_in_ms=200)
    with tf.Session(target, graph=g, config=config) as sess:
        for i in range(steps + 1):
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(y, {x: feed})
            if i == 0:
                before = proc.memory_info().rss
    return proc.memory_info().rss - before


def test_timed_out_steps_with_a_large_feed_leave_no_memory_behind():
    with LocalCluster({"worker": 1}) as lc:
        growth = timed_out_steps_growth(lc.target("worker"), lc.pid("worker"), 5)
    assert growth < 64 * MIB, "worker grew by %d MiB over 5 timed-out steps" % (growth // MIB)


def test_failed_steps_leave_no_grpc_call_behind():
    """Issue 24: a step failing on the ps while the worker waits for its tensor.  The worker's
    RecvTensorsSteps call to the ps is cancelled; gRPC must not keep such a call's C state (its
    ``_CallState``, about 10 KB of the process: it did, for good, for the single-threaded
    one-step RecvTensors calls steps used before, until their last events were read).  Counted
    in a process of its own: calls of other tests' servers and sessions must not count."""
    script = Path(__file__).parent / "data" / "failed_steps_calls.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = map(int, out.stdout.split())
    assert after - before < 10  # it was about one a failed step in three
