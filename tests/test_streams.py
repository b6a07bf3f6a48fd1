"""Steps on open gRPC calls (minitf/distributed/streams.py): the StepEnd framing, in-band
failures, deadlines, callers that give up, idle and broken calls, and a real session's calls
being reused."""

import os
import signal
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

import minitf as tf
from helpers import wait_until
from minitf.distributed import master_interface, services, streams, wire
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.local_cluster import free_port
from minitf.framework import errors
from minitf.runtime import step_run

pytestmark = pytest.mark.cluster

METHOD = "/minitf.WorkerService/RunGraphs"


class _Peer:
    """A gRPC server answering RunGraphs with ``streams.serve_steps``; what a step does is
    named by its request's graph_handle: "ok", "fail" or "hang" (until the caller cancels)."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.active = 0  # handlers running (one per open call)
        self.cancelled = threading.Event()
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(16))
        self.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "minitf.WorkerService",
                    {
                        "RunGraphs": grpc.stream_stream_rpc_method_handler(
                            self.handler, response_serializer=wire.serialize
                        )
                    },
                ),
            )
        )
        self.server.add_insecure_port("127.0.0.1:%d" % self.port)
        self.server.start()

    def handler(self, requests, context):
        with self.lock:
            self.active += 1
        try:
            yield from streams.serve_steps(requests, context, self.run_one)
        finally:
            with self.lock:
                self.active -= 1

    def run_one(self, requests, on_cancel):
        req = pb.RunGraphRequest.FromString(next(requests))
        what = req.graph_handle
        if what == "fail":
            err = errors.NotFoundError(None, None, "No such thing: %d" % req.step_id)
            err.derived = True
            raise err
        if what == "hang":
            release = threading.Event()
            on_cancel(lambda: (self.cancelled.set(), release.set()))
            release.wait(10)
        yield pb.RunGraphResponse(
            recv=[pb.NamedTensor(name="x:0", tensor=wire.tensor_to_proto(float(req.step_id)))]
        )
        yield pb.RunGraphResponse(step_stats=pb.StepStatsProto())

    def stop(self):
        self.server.stop(None).wait(5)


@pytest.fixture
def peer():
    p = _Peer()
    ch = grpc.insecure_channel("127.0.0.1:%d" % p.port)
    start = ch.stream_stream(METHOD, request_serializer=wire.serialize)
    pool = streams.StreamPool(lambda requests: start(requests))
    yield p, pool
    pool.close()
    ch.close()
    p.stop()


def _request(what, step_id=1):
    return pb.RunGraphRequest(graph_handle=what, step_id=step_id)


def _values(call, what, step_id=1, timeout=10):
    receiver = wire.NamedTensorReceiver()
    for raw in call.step(_request(what, step_id), timeout):
        msg = receiver.add_message(raw, pb.RunGraphResponse, "recv", "recv_part")
        assert not msg.HasField("end")  # taken off by step()
    return receiver.finish()


def test_answer_puts_the_end_in_the_last_message_and_split_end_takes_it_off():
    msgs = [
        pb.RunGraphResponse(recv=[pb.NamedTensor(name="a:0")]),
        pb.RunGraphResponse(step_stats=pb.StepStatsProto()),
    ]
    out = list(streams.answer(iter(msgs)))
    assert len(out) == 2 and out[0] == msgs[0].SerializeToString()
    rest, end = streams.split_end(out[1])
    assert rest == msgs[1].SerializeToString() and end is not None and end.code == 0
    assert streams.split_end(out[0]) == (out[0], None)

    def failing():
        yield msgs[0]
        raise errors.AbortedError(None, None, "gone")

    out = list(streams.answer(failing()))
    assert len(out) == 1  # what was held back is dropped
    rest, end = streams.split_end(out[0])
    assert rest is None and end.code == errors.ABORTED and end.message == "gone"
    assert list(streams.answer(iter(()))) == [streams.end_message()]
    # an end anywhere among the fields is found; the other fields are kept in order
    raw = (
        pb.RunStepResponse(step_id=7).SerializeToString()
        + streams.end_message()
        + pb.RunStepResponse(tensor=[pb.NamedTensor(name="b:0")]).SerializeToString()
    )
    rest, end = streams.split_end(raw)
    assert pb.RunStepResponse.FromString(rest) == pb.RunStepResponse(
        step_id=7, tensor=[pb.NamedTensor(name="b:0")]
    )
    with pytest.raises(errors.InvalidArgumentError, match="Malformed StepEnd"):
        streams.split_end(b"\x2a\x02\x08\xff")
    with pytest.raises(errors.InvalidArgumentError, match="Malformed RunStepResponse"):
        streams.split_end(b"\x2a\x05ab")


def test_an_answer_that_does_not_hold_sends_each_message_as_it_is_made():
    """RecvTensorsSteps' answers (hold=False): a tensor goes before the next one is ready (a
    peer may need it first), the end comes with the message marked Last, else alone."""
    msgs = [pb.RecvTensorsResponse(tensor=[pb.NamedTensor(name="k%d" % i)]) for i in range(2)]
    made = []

    def making(last):
        for i, m in enumerate(msgs):
            made.append(i)
            yield streams.Last(m) if last and i == 1 else m

    out = streams.answer(making(False), hold=False)
    assert next(out) == msgs[0].SerializeToString() and made == [0]
    assert next(out) == msgs[1].SerializeToString() and made == [0, 1]
    assert list(out) == [streams.end_message()]
    made.clear()
    out = list(streams.answer(making(True), hold=False))
    assert out[0] == msgs[0].SerializeToString() and len(out) == 2
    assert streams.split_end(out[1]) == (msgs[1].SerializeToString(), pb.StepEnd())


def test_steps_reuse_one_call_and_failures_come_in_band(peer):
    p, pool = peer
    call = pool.acquire()
    assert _values(call, "ok", 3) == {"x:0": 3.0}
    assert pool.acquire() is call  # back in the pool, still open
    with pytest.raises(streams.StepError) as ei:
        _values(call, "fail", 4)
    e = ei.value
    assert e.code() == grpc.StatusCode.NOT_FOUND and e.details() == "No such thing: 4"
    assert streams.is_derived(e) and streams.is_reported(e)  # as the peer marked it
    assert isinstance(e, grpc.RpcError)
    again = pool.acquire()
    assert again is call and _values(again, "ok", 5) == {"x:0": 5.0}
    assert p.active == 1


def test_a_step_past_its_deadline_cancels_its_call(peer):
    p, pool = peer
    call = pool.acquire()
    t0 = time.monotonic()
    with pytest.raises(streams.StepError) as ei:
        _values(call, "hang", timeout=0.3)
    assert ei.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - t0 < 3
    assert p.cancelled.wait(5)  # the peer's step heard of it
    assert wait_until(lambda: p.active == 0)
    fresh = pool.acquire()
    assert fresh is not call and _values(fresh, "ok", 6) == {"x:0": 6.0}


def test_a_caller_that_gives_up_mid_step_cancels_the_call(peer):
    p, pool = peer
    call = pool.acquire()
    steps = call.step(_request("ok", 1), 10)
    next(steps)  # the first of the step's two messages
    steps.close()
    assert call.broken() or wait_until(call.broken)
    assert pool.acquire() is not call
    # and a hanging step is cancelled from another thread (what a failing step does to the
    # other partitions)
    call = pool.acquire()
    threading.Timer(0.2, call.cancel).start()
    with pytest.raises(grpc.RpcError) as ei:
        _values(call, "hang")
    assert ei.value.code() == grpc.StatusCode.CANCELLED
    assert p.cancelled.wait(5)


def test_idle_calls_are_capped_and_closed_and_broken_ones_replaced(peer, monkeypatch):
    p, pool = peer
    calls = [pool.acquire() for _ in range(streams.MAX_IDLE + 2)]
    running = [c.step(_request("ok", i), 10) for i, c in enumerate(calls)]
    for s in running:  # four steps at once, each on its own call
        assert next(s)
    assert wait_until(lambda: p.active == len(calls))
    for s in running:
        s.close()  # given up mid-step: cancelled
    calls = [pool.acquire() for _ in range(streams.MAX_IDLE + 2)]
    for i, c in enumerate(calls):  # given back one after another: MAX_IDLE stay open
        assert _values(c, "ok", i) == {"x:0": float(i)}
    assert wait_until(lambda: p.active == streams.MAX_IDLE)
    monkeypatch.setattr(streams, "IDLE_SECONDS", 0.2)
    assert wait_until(lambda: p.active == 0)  # the watchdog closed them
    c = pool.acquire()
    assert c not in calls and _values(c, "ok", 9) == {"x:0": 9.0}
    # the peer goes away while the call is idle, and comes back on the same port
    port = p.port
    p.stop()
    assert wait_until(c.broken)
    q = _Peer(port)
    try:
        fresh = pool.acquire()
        assert fresh is not c and _values(fresh, "ok", 10) == {"x:0": 10.0}
    finally:
        pool.close()
        q.stop()


def _rpc():
    config = tf.ConfigProto()
    config.rpc_options.use_rpc_for_inprocess_master = True  # not the direct calls
    return config


def test_a_step_cancelled_after_it_ended_leaves_its_call_alone(peer):
    """Late cancels (a failing partition's, the deadline watchdog's, gRPC telling a master
    that a RunStep ended) come after the call went back to its pool, maybe to another step."""
    p, pool = peer
    call = pool.acquire()
    step = call.step(_request("ok", 1), 10)
    assert len(list(step)) == 2
    step.cancel()
    assert not call.broken()
    assert pool.acquire() is call and _values(call, "ok", 2) == {"x:0": 2.0}


def test_a_master_leaves_its_open_calls_alone_when_a_large_step_ends():
    """A step with large feeds runs on a RunStep call of its own; when it ends, gRPC calls the
    master's "client went away" callback.  The open RunGraphs call the step used to reach
    another task is back in its pool by then: it must stay open (before, the callback
    cancelled it, or the step of another session that had taken it meanwhile)."""
    spec = {"worker": ["127.0.0.1:%d" % free_port() for _ in range(2)]}
    servers = [tf.train.Server(spec, "worker", i) for i in range(2)]
    try:
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [None])
            total = tf.reduce_sum(x)
        with tf.device("/job:worker/task:1"):
            remote = tf.constant(2.0) * 3
        pool = servers[0].master.channels.steps(spec["worker"][1], "RunGraphs")
        with tf.Session("grpc://" + spec["worker"][0]) as sess:
            big = np.ones(wire.INLINE_TENSOR_BYTES // 4 + 1, np.float32)
            assert sess.run([total, remote], {x: big}) == [big.size, 6.0]
            call = pool.acquire()
            pool.release(call)
            time.sleep(0.2)  # gRPC runs the callback as the RunStep call ends
            assert not call.broken()
            assert sess.run(remote) == 6.0
            assert pool.acquire() is call
            pool.release(call)
    finally:
        for s in servers:
            s.stop()


def test_sessions_run_their_steps_on_open_calls():
    server = tf.train.Server({"local": ["127.0.0.1:0"]})
    try:
        with tf.device("/job:local/task:0"):
            x = tf.Variable(1.0, name="x")
            y = x * 2
        target = server.target
        pool = master_interface._channels.steps(target[len("grpc://") :], "RunSteps")
        with tf.Session(target, config=_rpc()) as sess:
            with pytest.raises(
                tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value x"
            ):
                sess.run(y)
            [call] = pool._idle  # the step ran on an open call, now back in the pool
            sess.run(x.initializer)
            assert sess.run(y) == 2.0
            assert pool._idle == [call]  # the same call carried every step
        with tf.Session(target, config=_rpc()) as other:  # another session shares them
            assert other.run(y) == 2.0
    finally:
        server.stop()


@pytest.mark.parametrize("rpc", [True, False], ids=["rpc", "direct"])
def test_a_master_bug_is_the_same_internal_error_on_either_kind_of_call(monkeypatch, rpc):
    """An unexpected exception in the master (a bug, not a failed step) reaches the client as
    InternalError "<Type>: <text>", whether the step ran on an open RunSteps call (small feeds)
    or on a RunStep call of its own (feeds too large for one message), or the client called
    the master of its own process directly."""
    from minitf.distributed import master

    server = tf.train.Server({"local": ["127.0.0.1:0"]})

    def broken(self, fetches, targets, feeds):
        raise ValueError("planted bug")

    try:
        with tf.device("/job:local/task:0"):
            x = tf.placeholder(tf.float32, [None], name="x")
            y = x * 2
        with tf.Session(server.target, config=_rpc() if rpc else None) as sess:
            monkeypatch.setattr(master.MasterSession, "signature", broken)
            for n in (4, wire.INLINE_TENSOR_BYTES):  # on RunSteps, on RunStep
                with pytest.raises(tf.errors.InternalError, match="^ValueError: planted bug$"):
                    sess.run(y, feed_dict={x: np.ones(n, np.float32)})
    finally:
        server.stop()


@pytest.fixture
def long_remote_step():
    """Two in-process workers and ``(spec, servers, q, m)``: ``m``, on worker 1, is a minute
    of matmuls (a step that stops between two of them when cancelled)."""
    spec = {"worker": ["127.0.0.1:%d" % free_port() for _ in range(2)]}
    servers = [tf.train.Server(spec, "worker", i) for i in range(2)]
    try:
        with tf.device("/job:worker/task:1"):
            q = tf.zeros([512, 512])
            m = q
            for _ in range(3000):
                m = tf.matmul(m, q)
        yield spec, servers, q, m
    finally:
        for s in servers:
            s.stop()


def _partition_failures(monkeypatch, worker):
    """``(when, error)`` of each partition step of ``worker`` that fails from now on."""
    failures = []
    run_graph = worker.run_graph

    def noted(*args):
        try:
            return run_graph(*args)
        except tf.errors.OpError as e:
            failures.append((time.monotonic(), e))
            raise

    monkeypatch.setattr(worker, "run_graph", noted)
    return failures


def test_a_client_that_goes_away_mid_step_stops_the_remote_partition(long_remote_step, monkeypatch):
    spec, servers, q, m = long_remote_step
    ended = _partition_failures(monkeypatch, servers[1].worker)
    with tf.Session("grpc://" + spec["worker"][0]) as sess:
        sess.run(q)  # the session exists on the master
        started, _ = _executor_runs(monkeypatch)
        pool = master_interface._channels.steps(spec["worker"][0], "RunSteps")
        call = pool.acquire()
        steps = call.step(pb.RunStepRequest(session_handle=sess._impl._handle, fetch=[m.name]), 60)
        failed = []

        def read():
            try:
                list(steps)
            except grpc.RpcError as e:
                failed.append(e.code())

        t = threading.Thread(target=read)
        t.start()
        # (placing and registering the 3000 matmuls takes a while on a busy machine)
        assert wait_until(lambda: started, 30)  # the remote partition runs
        cancelled_at = time.monotonic()
        call.cancel()  # what an interrupted sess.run does (its finally)
        t.join(10)
        assert failed == [grpc.StatusCode.CANCELLED]
        assert wait_until(lambda: ended, 10)
        when, err = ended[0]
        assert isinstance(err, tf.errors.CancelledError)
        assert when - cancelled_at < 5
        assert sess.run(q)[0, 0] == 0.0  # the session carries on


def _interrupt_when(predicate):
    """What a notebook's "interrupt the kernel" does, once ``predicate()`` holds: SIGINT to
    this process, which raises KeyboardInterrupt in its main thread (the test's)."""
    assert threading.current_thread() is threading.main_thread()

    def fire():
        if wait_until(predicate, 10):
            time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=fire)
    thread.start()
    return thread


def _executor_runs(monkeypatch):
    """``(started, cancelled)``: the executor runs started from now on with the thread each
    started on, and the runs cancelled with the error each was cancelled with."""
    started, cancelled = [], []
    run, cancel = step_run.StepRun.run, step_run.StepRun.cancel

    def noted_run(r, timeout_ms=0, on_start=None):
        started.append((r, threading.current_thread()))
        return run(r, timeout_ms, on_start)

    def noted_cancel(r, error):
        cancelled.append((r, error))
        cancel(r, error)

    monkeypatch.setattr(step_run.StepRun, "run", noted_run)
    monkeypatch.setattr(step_run.StepRun, "cancel", noted_cancel)
    return started, cancelled


def test_an_interrupted_local_step_stops(monkeypatch):
    q = tf.zeros([512, 512])
    m = q
    for _ in range(3000):
        m = tf.matmul(m, q)
    started, cancelled = _executor_runs(monkeypatch)
    with tf.Session() as sess:
        interrupter = _interrupt_when(lambda: started)
        with pytest.raises(KeyboardInterrupt):
            sess.run(m)
        interrupter.join()
        [(run, error)] = cancelled
        assert started == [(run, threading.main_thread())]
        assert isinstance(error, tf.errors.CancelledError)
        assert wait_until(lambda: run.outstanding == 0)  # nothing left running ...
        assert not run.step.done  # ... long before the end
        assert sess.run(q)[0, 0] == 0.0


@pytest.mark.slow
def test_an_interrupted_direct_step_stops_every_partition(long_remote_step, monkeypatch):
    """Interrupting a step that calls the master of this process directly: the client's
    thread was running the master's own partition, which stops, and the master cancels the
    partitions of the other tasks, as when a gRPC client goes away."""
    spec, servers, q, m = long_remote_step  # m: on worker 1
    with tf.device("/job:worker/task:0"):
        m0 = q
        for _ in range(3000):
            m0 = tf.matmul(m0, q)
    ended = _partition_failures(monkeypatch, servers[1].worker)
    started, cancelled = _executor_runs(monkeypatch)
    with tf.Session(servers[0].target) as sess:  # the master of worker 0, called directly
        sess.run(q)
        before = len(started)
        interrupter = _interrupt_when(lambda: len(started) == before + 2)  # both partitions
        with pytest.raises(KeyboardInterrupt):
            sess.run([m0, m])
        interrupted_at = time.monotonic()
        interrupter.join()
        [run0] = [r for r, thread in started[before:] if thread is threading.main_thread()]
        [error] = [e for r, e in cancelled if r is run0]  # worker 0's partition stopped ...
        assert isinstance(error, tf.errors.CancelledError)
        assert wait_until(lambda: run0.outstanding == 0) and not run0.step.done
        assert wait_until(lambda: ended, 10)  # ... and worker 1's was cancelled
        when, err = ended[0]
        assert isinstance(err, tf.errors.CancelledError)
        assert when - interrupted_at < 5
        assert sess.run(q)[0, 0] == 0.0


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_task_stopped_mid_step_fails_the_step_cleanly(long_remote_step):
    spec, servers, _, m = long_remote_step
    with tf.Session("grpc://" + spec["worker"][0]) as sess:
        threading.Timer(0.5, servers[1].stop).start()
        t0 = time.monotonic()
        with pytest.raises((tf.errors.UnavailableError, tf.errors.CancelledError)) as ei:
            sess.run(m)
        assert time.monotonic() - t0 < 10
        assert "/job:worker/replica:0/task:1" in ei.value.message


def test_a_pool_whose_channel_was_closed_reports_unavailable():
    """The stubs' methods raise ChannelClosed (UNAVAILABLE) on a closed channel, so a pool
    whose channel another call closed reports that, not gRPC's ValueError."""
    ch = grpc.insecure_channel("127.0.0.1:%d" % free_port())
    start = services.Stub(ch, "WorkerService").RunGraphs
    pool = streams.StreamPool(lambda requests: start(requests))
    ch.close()
    with pytest.raises(streams.ChannelClosed) as ei:
        pool.acquire()
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
