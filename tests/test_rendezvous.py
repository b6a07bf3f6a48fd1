"""A step's rendezvous (framework/rendezvous.py): where _Send ops leave tensors for _Recv ops.

Book sections: "Placing Operations on Devices" and "The Master and Worker Services".
"""

import threading

import numpy as np
import pytest

import minitf as tf
from helpers import wait_until
from minitf.framework.rendezvous import LocalRendezvous, create_key, parse_key

KEY = create_key(
    "/job:a/replica:0/task:0/device:CPU:0", 5, "/job:a/replica:0/task:0/device:GPU:0", "x:0"
)


def _collector():
    got = []
    return got, lambda value, error: got.append((value, error))


def test_key_format_round_trips():
    assert KEY == (
        "/job:a/replica:0/task:0/device:CPU:0;0000000000000005;"
        "/job:a/replica:0/task:0/device:GPU:0;x:0;0:0"
    )
    assert parse_key(KEY) == (
        "/job:a/replica:0/task:0/device:CPU:0",
        5,
        "/job:a/replica:0/task:0/device:GPU:0",
        "x:0",
    )
    for bad in ("x", "a;zz;c;d;0:0", ";" * 10):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid rendezvous key"):
            parse_key(bad)


def test_send_before_recv_and_recv_before_send():
    r = LocalRendezvous()
    r.send(KEY, 1.0)
    got, done = _collector()
    r.recv_async(KEY, done)
    assert got == [(1.0, None)] and r.pending() == 0
    got, done = _collector()
    r.recv_async("k2", done)  # waits: no value yet, and no thread is held
    assert got == []
    r.send("k2", 2.0)  # the sender's thread calls the receiver back
    assert got == [(2.0, None)]


def test_abort_fails_waiting_and_later_receives_and_sends():
    r = LocalRendezvous()
    got, done = _collector()
    r.recv_async(KEY, done)
    err = tf.errors.CancelledError(None, None, "step cancelled")
    r.abort(err)
    assert got == [(None, err)] and r.aborted is err
    got2, done2 = _collector()
    r.recv_async("other", done2)
    assert got2 == [(None, err)]
    with pytest.raises(tf.errors.CancelledError):
        r.send("other", 3.0)
    r.abort(tf.errors.UnknownError(None, None, "second"))  # the first abort wins
    assert r.aborted is err


def test_blocking_recv_waits_for_another_thread_and_times_out():
    r = LocalRendezvous()
    got = []
    receiver = threading.Thread(target=lambda: got.append(r.recv(KEY, timeout=30)))
    receiver.start()
    assert wait_until(lambda: KEY in r._waiters, 30)  # it waits for the value ...
    r.send(KEY, 42)
    receiver.join(30)
    assert got == [42]  # ... and has it once it is sent
    with pytest.raises(tf.errors.DeadlineExceededError, match="Timed out waiting for tensor"):
        r.recv("never", timeout=0.01)
    r.send("never", 1)  # the timed-out waiter is gone: the value stays
    assert r.pending() == 1


def _key(name):
    return create_key("/job:ps/replica:0/task:0/device:CPU:0", 7, "/job:w/task:0/cpu:0", name)


def test_a_peer_answers_several_keys_as_they_are_sent():
    """RecvTensors' side of a worker (RendezvousMgr.recv_many): every key of a step in one
    call, each answered in the first batch after it was sent, then the call ends; a key's
    failure (the step aborted), the call's end and its deadline stop the wait."""
    import time

    from minitf.distributed.rendezvous_mgr import RendezvousMgr

    mgr = RendezvousMgr()
    a, b, c = _key("a:0"), _key("b:0"), _key("c:0")
    mgr.find(1).send(b, 2.0)
    answers = mgr.recv_many(1, [a, b, c], time.monotonic() + 30, lambda fn: None)
    assert next(answers) == [(b, 2.0)]  # sent before the call: at once
    mgr.find(1).send(c, 3.0)
    mgr.find(1).send(a, 1.0)
    assert next(answers) == [(c, 3.0), (a, 1.0)]  # in the order they were sent
    assert next(answers, None) is None
    mgr.finish(1)
    assert 1 not in mgr._steps  # everything sent was taken: the step's table goes

    answers = mgr.recv_many(2, [a, b], time.monotonic() + 30, lambda fn: None)
    mgr.find(2).send(a, 1.0)
    assert next(answers) == [(a, 1.0)]
    mgr.abort(2, tf.errors.AbortedError(None, None, "step 2 failed"))
    with pytest.raises(tf.errors.AbortedError, match="step 2 failed"):
        next(answers)

    ended = []
    answers = mgr.recv_many(3, [a], time.monotonic() + 30, ended.append)
    # the caller cancels the call while it waits
    cancel = threading.Timer(0.05, lambda: wait_until(lambda: ended, 30) and ended[0]())
    cancel.start()
    with pytest.raises(tf.errors.CancelledError):
        next(answers)
    cancel.join(30)
    assert not mgr.find(3)._waiters  # its wait was withdrawn
    with pytest.raises(tf.errors.DeadlineExceededError, match="Timed out waiting for tensors"):
        next(mgr.recv_many(4, [a], time.monotonic() + 0.01, lambda fn: None))
    for bad in ([a, a], ["nope"]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            next(mgr.recv_many(5, bad, time.monotonic() + 30, lambda fn: None))


def test_an_aborted_step_keeps_only_its_error_and_only_the_newest_ones():
    """Issue 24: an aborted step's table goes when the step ends on the worker (TF's worker
    cleans up its rendezvous); a peer asking late still fails at once with the step's error,
    and after many failed steps the memory held stays flat."""
    import time
    import tracemalloc

    from minitf.distributed import rendezvous_mgr
    from minitf.distributed.rendezvous_mgr import RendezvousMgr

    mgr = RendezvousMgr()
    a = _key("a:0")

    def failed_step(step_id):
        mgr.find(step_id).send(a, np.ones(4, np.float32))
        mgr.abort(step_id, tf.errors.InvalidArgumentError(None, None, "step %d failed" % step_id))
        mgr.finish(step_id)

    failed_step(1)
    assert 1 not in mgr._steps
    with pytest.raises(tf.errors.InvalidArgumentError, match="step 1 failed"):
        mgr.recv(1, a, 30)  # at once, not after 30 s
    with pytest.raises(tf.errors.InvalidArgumentError, match="step 1 failed"):
        next(mgr.recv_many(1, [a], time.monotonic() + 30, lambda fn: None))
    assert 1 not in mgr._steps  # the late callers' table went with them

    tracemalloc.start()
    try:
        for i in range(2, 2 + 2 * rendezvous_mgr._ABORTED_KEPT):
            failed_step(i)  # the kept errors are now ones made while tracing
        before = tracemalloc.get_traced_memory()[0]
        for i in range(10_000, 15_000):
            failed_step(i)
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert growth < 64 * 1024, growth  # flat: 5,000 more failed steps hold nothing more
    assert not mgr._steps and len(mgr._aborted) == rendezvous_mgr._ABORTED_KEPT
    assert 1 not in mgr._aborted and 14_999 in mgr._aborted
