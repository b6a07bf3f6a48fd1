"""Queues across a cluster, with real processes (Figure 12-8): a queue on the ps task of a
LocalCluster, shared by name between client processes that enqueue, dequeue and close it; a
killed ps, deadlines, a session closed or reset, and a QueueRunner stopped by its Coordinator
end every blocked client with TF's error, within seconds.

What the local session already shows (tests/test_queues.py: timeouts, close, cancel;
tests/test_queue_runner.py) is not repeated here; these are the same waits made over gRPC.
"""

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import minitf as tf
from helpers import client_env, run_in_thread
from minitf.distributed import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("no_child_process_left")]

CLIENT = Path(__file__).parent / "data" / "queue_client.py"
CLOSED_EMPTY = (
    "OutOfRangeError: From /job:ps/replica:0/task:0: | FIFOQueue 'shared_q' is closed and has "
    "insufficient elements (requested 1, current size 0) | \t [[{{node q_Dequeue}}]]"
)

CLOSED = "Step was cancelled by an explicit call to `Session::Close()`."  # TF's remote text


class Client:
    """One client process of tests/data/queue_client.py; its stdout read line by line (from
    the pipe itself, so that ``select`` sees what is not read yet)."""

    def __init__(self, target, role, *args):
        self.proc = subprocess.Popen(
            [sys.executable, str(CLIENT), target, role, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=client_env(),
        )
        self._buffer = b""

    def _more(self, seconds):
        """Reads what comes within ``seconds``; False when nothing did."""
        r, _, _ = select.select([self.proc.stdout], [], [], seconds)
        chunk = os.read(self.proc.stdout.fileno(), 65536) if r else b""
        self._buffer += chunk
        return bool(chunk)

    def line(self, seconds=60.0):
        """The next line it prints; fails if none comes within ``seconds``."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self._more(remaining), "no line from the client in time"
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def quiet(self, seconds):
        """True when it prints nothing for ``seconds`` (and has no line unread): it waits."""
        return b"\n" not in self._buffer and not self._more(seconds)

    def finish(self, seconds=30.0):
        """Its remaining lines once it has exited (within ``seconds``)."""
        out, err = self.proc.communicate(timeout=seconds)
        assert self.proc.returncode == 0, err.decode()[-3000:]
        return (self._buffer + out).decode().splitlines()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def clients():
    started = []

    def start(*args):
        started.append(Client(*args))
        return started[-1]

    yield start
    for c in started:
        c.kill()


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        yield lc


def _reset(cluster):
    """A fresh shared queue for the next test (the ps's default container cleared)."""
    tf.Session.reset(cluster.target("ps", 0))


def test_loader_and_trainer_processes_share_a_queue_and_a_third_closes_it(cluster, clients):
    _reset(cluster)
    worker, ps = cluster.target("worker", 0), cluster.target("ps", 0)
    trainer = clients(worker, "drain")
    loader = clients(ps, "enqueue", 3)
    assert loader.finish() == ["enqueued 3"]
    got = [trainer.line() for _ in range(3)]
    assert got == ["dequeued [0.0, -0.0]", "dequeued [1.0, -1.0]", "dequeued [2.0, -2.0]"]
    assert trainer.quiet(1.0)  # the queue is empty: the trainer's dequeue waits
    assert clients(worker, "close").finish() == ["closed"]
    assert trainer.finish() == [CLOSED_EMPTY]


def test_killing_the_task_that_holds_the_queue_ends_blocked_clients(clients):
    """Clients blocked on a full queue and on an empty one, through the ps's own master and
    through the worker's, all end with UnavailableError within seconds of the ps dying."""
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        worker, ps = lc.target("worker", 0), lc.target("ps", 0)
        blocked = [
            clients(worker, "fill", 0, "full_q"),
            clients(worker, "wait", 0, "empty_q"),
            clients(ps, "wait", 0, "empty_q"),
        ]
        first = [c.line() for c in blocked]
        assert first == ["full; one more enqueue waits"] + ["waiting for an element"] * 2
        assert all(c.quiet(1.0) for c in blocked)
        start = time.monotonic()
        lc.kill("ps", 0)
        out = [c.finish(30) for c in blocked]
        assert time.monotonic() - start < 10
        assert [len(o) for o in out] == [1, 1, 1], out
        assert all(o[0].startswith("UnavailableError: ") for o in out), out
        assert all("/job:ps/replica:0/task:0" in o[0] for o in out[:2]), out


@pytest.mark.parametrize("role", ["timeout", "optimeout"])
def test_a_deadline_ends_a_remote_blocked_dequeue(cluster, clients, role):
    """RunOptions(timeout_in_ms) and ConfigProto(operation_timeout_in_ms) bound a dequeue
    waiting on another task, as they bound a local one."""
    client = clients(cluster.target("worker", 0), role, 300, "deadline_q")
    assert client.line().startswith("waiting")
    start = time.monotonic()
    assert client.finish() == [
        "DeadlineExceededError: From /job:ps/replica:0/task:0: | Timed out waiting for notification"
    ]
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("master", ["worker", "ps"])
def test_closing_a_session_ends_its_step_blocked_on_a_remote_queue(cluster, master):
    """The client closes its session (from another thread) while a step waits on the ps's
    queue, through the worker's master or the ps's own: the step ends with CancelledError."""
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(2, tf.float32, shapes=[[]], shared_name="close_q")
    sess = tf.Session(cluster.target(master, 0))
    t, out = run_in_thread(sess, q.dequeue())
    t.join(1.0)
    assert t.is_alive()  # waiting for an element
    sess.close()
    t.join(10)
    assert not t.is_alive()
    assert isinstance(out["error"], tf.errors.CancelledError), out
    assert out["error"].message == CLOSED


def test_resetting_the_target_ends_a_step_blocked_on_its_queue(cluster, clients):
    """``tf.Session.reset`` on the master a client process's session lives on closes that
    session: its step blocked on the ps's queue ends (CancelledError) instead of waiting on."""
    client = clients(cluster.target("worker", 0), "wait", 0, "reset_q")
    assert client.line() == "waiting for an element" and client.quiet(1.0)
    tf.Session.reset(cluster.target("worker", 0))
    assert client.finish() == ["CancelledError: " + CLOSED]


def test_a_coordinator_stops_a_queue_runner_blocked_on_a_remote_queue(cluster, clients):
    """A QueueRunner's thread blocked on the full remote queue ends at ``request_stop``: the
    runner closes the queue cancelling pending enqueues, over gRPC like any op."""
    out = clients(cluster.target("worker", 0), "runner").finish()
    assert out == [
        "queue full; runner thread blocked",
        "runner stopped; threads alive: 0",
        "queue closed: True",
    ]


@pytest.mark.parametrize("master", ["worker", "ps"])
def test_a_killed_clients_waiting_dequeue_takes_nothing_afterwards(cluster, clients, master):
    """A trainer killed while its dequeue waits leaves no attempt behind in the queue: the item
    enqueued next goes to the next trainer, not to the dead one's step (its call's end cancels
    the step on every task)."""
    name = "orphan_q_" + master
    dead = clients(cluster.target(master, 0), "wait", 0, name)
    assert dead.line() == "waiting for an element" and dead.quiet(1.0)
    dead.kill()
    assert clients(cluster.target("worker", 0), "enqueue", 1, name).finish() == ["enqueued 1"]
    out = clients(cluster.target("worker", 0), "timeout", 5000, name).finish()
    assert out == ["waiting at most 5000 ms", "dequeued [0.0, -0.0]"]


def test_closing_a_session_as_its_first_step_starts_never_leaves_the_step_waiting(cluster):
    """Closed while its first run is still creating the session on the master or starting the
    step: the run ends (with the close's error), never waits on in the queue."""
    with tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(2, tf.float32, shapes=[[]], shared_name="race_q")
    dequeue = q.dequeue()
    for _ in range(5):
        sess = tf.Session(cluster.target("worker", 0))
        t, out = run_in_thread(sess, dequeue)
        sess.close()
        t.join(10)
        assert not t.is_alive()
        assert isinstance(
            out.get("error"), (tf.errors.CancelledError, tf.errors.AbortedError, RuntimeError)
        ), out
