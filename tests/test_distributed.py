"""tf.train.Server, grpc:// sessions, placement over a cluster, Send/Recv, containers, reset,
errors and robustness, with real in-process gRPC servers on 127.0.0.1."""

import re
import socket
import threading
import time
import weakref
from pathlib import Path

import grpc
import numpy as np
import pytest

import minitf as tf
from helpers import child_pids, freed, no_cycle_collector, wait_until
from minitf.distributed import master_interface, services
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.local_cluster import free_port
from minitf.distributed.master_interface import LocalMaster, RemoteMaster

pytestmark = pytest.mark.cluster

REF = Path(__file__).parent / "data" / "tf_outputs"


@pytest.fixture(autouse=True)
def no_child_processes_left():
    before = child_pids()
    yield
    assert wait_until(lambda: not (child_pids() - before), 5)


def _spec(ps=2, worker=3, host="127.0.0.1"):
    return {
        "ps": ["%s:%d" % (host, free_port()) for _ in range(ps)],
        "worker": ["%s:%d" % (host, free_port()) for _ in range(worker)],
    }


def _rpc(**kw):
    """A session config that reaches even a master of this process over gRPC."""
    config = tf.ConfigProto(**kw)
    config.rpc_options.use_rpc_for_inprocess_master = True
    return config


def _start(spec, **kw):
    tf.config.emulate_gpus(0)  # CPU-only tasks, like the machine of the reference outputs
    try:
        return [
            tf.train.Server(spec, job_name=j, task_index=i, **kw)
            for j in spec
            for i in range(len(spec[j]))
        ]
    finally:
        tf.config.emulate_gpus(2)


@pytest.fixture(scope="module", params=["rpc", "local"])
def cluster(request):
    """Five in-process servers, ``(spec, servers)``; every test using it runs twice: with
    tasks named "127.0.0.1:port", whose targets this process reaches over gRPC, and with
    tasks named "localhost:port", whose targets are their servers' ``target``: sessions call
    those masters directly (master_interface.LocalMaster, TF's LocalMaster)."""
    spec = _spec(host="127.0.0.1" if request.param == "rpc" else "localhost")
    servers = _start(spec)
    kind = RemoteMaster if request.param == "rpc" else LocalMaster
    assert all(
        isinstance(master_interface.for_target(_target(spec, j, i)), kind)
        for j in spec
        for i in range(len(spec[j]))
    )
    try:
        yield spec, servers
    finally:
        for s in servers:
            s.stop()


def _target(spec, job, i):
    return "grpc://" + spec[job][i]


def _reset_all(spec):
    tf.Session.reset(_target(spec, "worker", 0))
    tf.Session.reset(_target(spec, "worker", 0), ["my-problem-1"])


# -- (1) server lifecycle -----------------------------------------------------------------------


def test_local_server_target_start_join_stop_frees_port():
    server = tf.train.Server.create_local_server()
    try:
        assert re.fullmatch(r"grpc://localhost:\d+", server.target)
        port = int(server.target.rsplit(":", 1)[1])
        assert server.bound_address == "localhost:%d" % port
        assert server.server_def.job_name == "local" and server.server_def.task_index == 0
        server.start()  # idempotent
        t0 = time.monotonic()
        server.join(timeout=0.05)
        assert time.monotonic() - t0 >= 0.04
        a = tf.constant(3.0)
        c = a * 3
        with tf.Session(server.target) as sess:  # the book's "Opening a Session"
            assert sess.run(c) == 9.0
            assert isinstance(sess, tf.Session)
    finally:
        server.stop()
    again = tf.train.Server({"local": ["127.0.0.1:%d" % port]})  # stop() freed the port
    again.stop()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
    finally:
        s.close()


def test_server_argument_errors():
    spec = {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    with pytest.raises(ValueError, match="Must specify an explicit `job_name`."):
        tf.train.Server(spec, start=False)
    with pytest.raises(ValueError, match="Must specify an explicit `task_index`."):
        tf.train.Server(spec, job_name="worker", start=False)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r'Could not parse port for local server from "127.0.0.1"',
    ):
        tf.train.Server({"local": ["127.0.0.1"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Task 5 was not defined in job"):
        tf.train.Server(spec, job_name="worker", task_index=5)


def test_port_in_use_is_unknown_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        port = s.getsockname()[1]
        with pytest.raises(tf.errors.UnknownError, match="Could not start gRPC server"):
            tf.train.Server({"local": ["127.0.0.1:%d" % port]})
    finally:
        s.close()


def test_port_zero_is_reported_and_get_status(cluster):
    server = tf.train.Server({"local": ["127.0.0.1:0"]})
    try:
        host, port = server.bound_address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        ch = grpc.insecure_channel(server.bound_address)
        try:
            r = services.Stub(ch, "WorkerService").GetStatus(pb.GetStatusRequest(), timeout=5)
            names = [d.name for d in r.device_attributes]
            assert names[0] == "/job:local/replica:0/task:0/device:CPU:0"
        finally:
            ch.close()
    finally:
        server.stop()


def test_list_devices_of_the_cluster(cluster):
    spec, _ = cluster
    with tf.Session(_target(spec, "worker", 0), graph=tf.Graph()) as sess:
        names = sorted(d.name for d in sess.list_devices())
    assert names == sorted(
        "/job:%s/replica:0/task:%d/device:CPU:0" % (j, i) for j in spec for i in range(len(spec[j]))
    )


# -- (2) runs over the cluster ---------------------------------------------------------------


def _g1():
    with tf.device("/job:ps"):
        a = tf.Variable(1.0, name="a")
    with tf.device("/job:worker"):
        b = tf.add(a, 2.0, name="b")
    with tf.device("/job:worker/task:1"):
        c = tf.add(a, b, name="c")
    d = tf.multiply(c, 10.0, name="d_unpinned")
    with tf.device("/job:ps/task:1/device:CPU:0"):
        e = tf.constant(5.0, name="e_ps1_cpu0")
    with tf.device("/job:worker/task:2/device:CPU:0"):
        f = tf.add(d, e, name="f_w2")
    return a, b, c, d, f


def _ref_section(name, start, end):
    lines = (REF / name).read_text().splitlines()
    i = lines.index(start)
    j = lines.index(end, i)
    return lines[i + 1 : j]


def test_blog_pinning_across_tasks_through_every_master(cluster, capsys):
    spec, _ = cluster
    _reset_all(spec)
    a, b, c, d, f = _g1()
    cfg = tf.ConfigProto(log_device_placement=True)
    with tf.Session(_target(spec, "worker", 0), config=cfg) as sess:
        sess.run(a.initializer)
        log = capsys.readouterr().out.splitlines()
        assert sess.run([c, d, f]) == [4.0, 40.0, 45.0]
    expected = _ref_section(
        "ex_e_cluster.v1.stdout.txt",
        "### g1: sess.run(a.initializer)",
        "### g1: sess.run([c, d, f])",
    )
    # TF 1.15's rule (tf1_semantics §6.3): unpinned ops go to the best device of the whole
    # cluster, /job:ps/replica:0/task:0; TF 2.21 (the reference) prefers the master's task.
    unpinned = "/job:ps/replica:0/task:0/device:CPU:0"
    expected = [
        re.sub(r"^(d_unpinned(/y)?: \(\w+\)): .*$", r"\1: " + unpinned, line) for line in expected
    ]
    assert log == expected
    for job, i in [("worker", 1), ("worker", 2), ("ps", 0), ("ps", 1)]:
        with tf.Session(_target(spec, job, i)) as sess:
            assert sess.run([c, d, f]) == [4.0, 40.0, 45.0]


def test_book_replica_device_setter_graph_with_soft_placement(cluster, book_setter_graph):
    spec, _ = cluster
    _reset_all(spec)
    fetches, init = book_setter_graph(tf.train.replica_device_setter(ps_tasks=2))
    with tf.Session(_target(spec, "worker", 0)) as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="Cannot assign a device for operation p1"
        ):
            sess.run(init)
    cfg = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(_target(spec, "worker", 0), config=cfg) as sess:
        sess.run(init)
        assert sess.run(fetches) == [3.0, 6.0, 9.0, 15.0, 12.0]


def test_feeds_fetches_and_large_tensors(cluster):
    spec, _ = cluster
    with tf.device("/job:worker/task:2"):
        x = tf.placeholder(tf.float32, shape=[None], name="x")
        y = x * 2.0
    with tf.device("/job:ps/task:1"):
        z = tf.reduce_sum(y)
    big = np.arange(3 << 20, dtype=np.float32)  # 12 MiB: streamed in chunks both ways
    with tf.Session(_target(spec, "worker", 1)) as sess:
        yv, zv, xv = sess.run([y, z, x], feed_dict={x: big})
        np.testing.assert_array_equal(yv, big * 2)
        np.testing.assert_array_equal(xv, big)
        assert zv == np.float32(big * 2).sum(dtype=np.float32) or abs(
            zv - (big * 2).sum()
        ) < 1e-3 * abs(zv)
        assert sess.run(y, feed_dict={x: [1.0, 2.0]}).tolist() == [2.0, 4.0]


def test_fetching_only_fed_values_runs_no_partition(cluster):
    spec, _ = cluster
    with tf.device("/job:worker/task:1"):
        x = tf.placeholder(tf.float32, shape=[2], name="x_only")
    with tf.Session(_target(spec, "worker", 0)) as sess:
        assert sess.run(x, feed_dict={x: [1.0, 2.0]}).tolist() == [1.0, 2.0]


def test_large_fetches_from_several_tasks_at_once_with_traces(cluster):
    """The master forwards each remote task's stream as it comes, so the parts of two large
    fetched tensors interleave; its own partition's values and every task's step stats join
    them."""
    spec, _ = cluster
    n = 5 << 18  # 5 MiB of float32 each: several chunks
    with tf.device("/job:ps/task:0"):
        a = tf.ones([n]) * 2
    with tf.device("/job:ps/task:1"):
        b = tf.ones([n]) * 3
    with tf.device("/job:worker/task:0"):
        c = tf.zeros([n]) + 1
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    meta = tf.RunMetadata()
    with tf.Session(_target(spec, "worker", 0)) as sess:
        av, bv, cv = sess.run([a, b, c], options=opts, run_metadata=meta)
    ref = np.ones(n, np.float32)
    np.testing.assert_array_equal(av, ref * 2)
    np.testing.assert_array_equal(bv, ref * 3)
    np.testing.assert_array_equal(cv, ref)
    tasks = {d.device.split("/device:")[0] for d in meta.step_stats.dev_stats}
    assert {
        "/job:ps/replica:0/task:0",
        "/job:ps/replica:0/task:1",
        "/job:worker/replica:0/task:0",
    } <= tasks


def test_sessions_through_different_masters_share_variables(cluster):
    spec, _ = cluster
    _reset_all(spec)
    with tf.device("/job:ps/task:1"):
        v = tf.Variable(10.0, name="shared_v")
    inc = v.assign_add(1.0)
    with tf.Session(_target(spec, "worker", 2)) as s1:
        s1.run(v.initializer)
        s1.run(inc)
    g2 = tf.Graph()
    with g2.as_default():
        with tf.device("/job:ps/task:1"):
            v2 = tf.Variable(0.0, name="shared_v")  # same (device, container, name)
        with tf.Session(_target(spec, "ps", 0)) as s2:
            assert s2.run(v2) == 11.0  # no initialisation: the storage is shared


def test_a_session_with_isolated_state_has_its_own_variables(cluster):
    """``isolate_session_state=True``: the session's variables are its own on every task (TF's
    worker sessions), whatever the master; they outlive re-placements of a growing graph and
    go when the session closes."""
    spec, servers = cluster
    _reset_all(spec)
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(1.0, name="iso_v")
    inc = v.assign_add(1.0)
    with tf.Session(_target(spec, "worker", 0)) as shared:
        shared.run(v.initializer)
        assert shared.run(inc) == 2.0
    isolated = tf.ConfigProto(isolate_session_state=True)
    with (
        tf.Session(_target(spec, "worker", 1), config=isolated) as a,
        tf.Session(_target(spec, "worker", 1), config=isolated) as b,
    ):
        for sess in (a, b):
            with pytest.raises(
                tf.errors.FailedPreconditionError, match="uninitialized value iso_v"
            ):
                sess.run(v)  # not the shared one, not each other's
        a.run(v.initializer)
        assert [a.run(inc) for _ in range(3)] == [2.0, 3.0, 4.0]
        with pytest.raises(tf.errors.FailedPreconditionError):
            b.run(v)
        doubled = v * 2  # the graph grows: placed and split again
        assert a.run(doubled) == 8.0
        assert any(servers[i].worker.graph_mgr.isolated_sessions() for i in range(len(servers)))
    with tf.Session(_target(spec, "ps", 0)) as shared:
        assert shared.run(v) == 2.0  # the shared variable was never touched
    assert wait_until(lambda: not any(s.worker.graph_mgr.isolated_sessions() for s in servers))


def test_send_recv_trace(cluster):
    spec, _ = cluster
    with tf.device("/job:ps/task:0"):
        a = tf.constant(np.ones(1000, np.float32), name="a_ps0")
    with tf.device("/job:worker/task:1"):
        b = tf.reduce_sum(a, name="b_w1")
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    md = tf.RunMetadata()
    with tf.Session(_target(spec, "worker", 0)) as sess:
        assert sess.run(b, options=opts, run_metadata=md) == 1000.0
    tr = [t for t in md.step_stats.transfers if t.tensor_name == "a_ps0:0"]
    assert len(tr) == 1
    assert tr[0].bytes == 4000
    assert tr[0].src_device == "/job:ps/replica:0/task:0/device:CPU:0"
    assert tr[0].dst_device == "/job:worker/replica:0/task:1/device:CPU:0"
    devs = {d.device for d in md.step_stats.dev_stats}
    assert "/job:worker/replica:0/task:1/device:CPU:0" in devs
    recv_nodes = [n for d in md.step_stats.dev_stats for n in d.node_stats if n.op_type == "_Recv"]
    assert recv_nodes


def test_repeated_runs_reuse_request_heads_and_still_see_every_change(cluster, monkeypatch):
    """A session keeps the serialized head of each kind of run (fetches, targets, trace
    level, timeout) and a master that of each remote partition: the same fetch alternately
    traced and untraced gets step stats only when traced, feeds still reach the step, ops
    added between runs are sent, and a session keeps a bounded number of heads."""
    from minitf.distributed.wire import limits

    monkeypatch.setattr(limits, "MAX_REQUEST_HEADS", 3)
    spec, _ = cluster
    with tf.device("/job:ps/task:1"):
        x = tf.placeholder(tf.float32, [], name="x_ps1")
        y = tf.multiply(x, 2.0, name="y_ps1")
    traced = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    with tf.Session(_target(spec, "worker", 0)) as sess:
        for i in range(3):
            md = tf.RunMetadata()
            assert sess.run(y, {x: i}, options=traced, run_metadata=md) == 2.0 * i
            assert any(d.node_stats for d in md.step_stats.dev_stats)
            md = tf.RunMetadata()
            assert sess.run(y, {x: i + 0.5}, run_metadata=md) == 2.0 * i + 1
            assert not md.step_stats.dev_stats
        assert sess.run(y, {x: 4.0}, options=tf.RunOptions(timeout_in_ms=60000)) == 8.0
        with tf.device("/job:ps/task:1"):
            z = tf.add(y, 1.0, name="z_ps1")  # made after the session ran: sent before its run
        assert sess.run(z, {x: 1.0}) == 3.0
        assert sess.run([y, z], {x: 2.0}) == [4.0, 5.0]
        assert len(sess._impl._heads) <= 3


def test_remote_partitions_are_sent_before_the_masters_own_runs(cluster, monkeypatch):
    """A step's RunGraph requests to other tasks go out from the master's step thread before
    its own partition runs (TF's master issues its RunGraph calls first): handed to a pool
    thread, they waited for the GIL while the local partition ran."""
    from minitf.distributed import partition_run

    spec, _ = cluster
    events = []
    send, local = partition_run.PartitionRun._send, partition_run.PartitionRun._local

    def logged_send(self, task, address):
        events.append(("send", task))
        return send(self, task, address)

    def logged_local(self, task):
        events.append(("local", task))
        return local(self, task)

    monkeypatch.setattr(partition_run.PartitionRun, "_send", logged_send)
    monkeypatch.setattr(partition_run.PartitionRun, "_local", logged_local)
    with tf.device("/job:ps/task:0"):
        a = tf.constant(3.0, name="a_ps0_early")
    with tf.device("/job:worker/task:0"):
        b = tf.multiply(a, 2.0, name="b_w0_early")
    with tf.device("/job:ps/task:1"):
        c = tf.add(b, 1.0, name="c_ps1_early")
    with tf.Session(_target(spec, "worker", 0)) as sess:
        assert sess.run(c) == 7.0
    kinds = [kind for kind, _ in events[-3:]]  # the step's: two remote tasks, then its own
    assert kinds == ["send", "send", "local"], events


def test_a_signature_keeps_a_bounded_number_of_request_heads():
    """A step with a client deadline has options of its own (the time left): the heads a
    signature keeps for its partitions stay bounded, and each is the request it stands for."""
    from minitf.distributed import master_session, wire
    from minitf.distributed import protocol_pb2 as pb

    sig = master_session.Signature({"/job:ps/replica:0/task:0": "g1"}, {}, {})
    for ms in range(1, 200):
        options = pb.RunStepOptions(trace_level=0, timeout_in_ms=ms)
        head = sig.run_graph_head("/job:ps/replica:0/task:0", "s1", options)
        parsed = pb.RunGraphRequest.FromString(
            head + pb.RunGraphRequest(step_id=7).SerializeToString()
        )
        assert (parsed.session_handle, parsed.graph_handle, parsed.step_id) == ("s1", "g1", 7)
        assert parsed.options.timeout_in_ms == ms
        assert len(sig._heads) <= wire.MAX_REQUEST_HEADS


def test_received_tensors_are_freed_when_the_step_ends(cluster, monkeypatch):
    """A tensor a worker received for a step (RecvTensor) is freed as the step ends, by
    reference counting alone: nothing of the step (its executor run, its values) stays alive
    through a reference cycle or an idle pool thread.  (Before, every step kept its 4 MiB here,
    until the cycle collector happened to run: a worker's memory grew step after step.)"""
    from minitf.distributed import wire

    spec, _ = cluster
    received = []
    finish = wire.chunks._ChunkAssembler.finish

    def recording_finish(self):
        value = finish(self)
        if value.nbytes >= 1 << 20:
            received.append(weakref.ref(value))
        return value

    monkeypatch.setattr(wire.chunks._ChunkAssembler, "finish", recording_finish)
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.ones([1 << 20]), name="big_ps0")
    with tf.device("/job:worker/task:1"):
        total = tf.reduce_sum(v)
    with tf.Session(_target(spec, "worker", 0)) as sess:
        sess.run(v.initializer)
        with no_cycle_collector():
            for _ in range(3):
                assert sess.run(total) == float(1 << 20)
            assert len(received) == 3
            assert all(freed(r) for r in received)


def test_a_step_takes_the_tensors_of_each_peer_in_one_call(monkeypatch):
    """A partition asks each peer, at the start of its step, for every tensor its _Recv ops
    take from it: one RecvTensors request per peer and step, each tensor answered as it is
    ready (the worker's reads of the ps variables, the ps's of the worker's gradients), on a
    RecvTensorsSteps call that stays open from step to step (no call set-up per step)."""
    from minitf.distributed.worker import Worker

    requests, opened = [], []
    answer, serve = Worker._recv_answer, Worker.RecvTensorsSteps

    def counting_answer(self, request, deadline, on_cancel):
        requests.append((self.task_name, request.step_id, request.rendezvous_key))
        return answer(self, request, deadline, on_cancel)

    def counting_calls(self, request_iterator, context):
        opened.append(self.task_name)
        return serve(self, request_iterator, context)

    monkeypatch.setattr(Worker, "_recv_answer", counting_answer)
    monkeypatch.setattr(Worker, "RecvTensorsSteps", counting_calls)
    for name in ("RecvTensor", "RecvTensors"):  # the one-step calls: not used by steps
        monkeypatch.setattr(Worker, name, lambda *a: pytest.fail("a one-step call"))
    spec = _spec(ps=1, worker=1)
    servers = _start(spec)
    try:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.ones([4, 3], np.float32), name="w1c")
            b = tf.Variable(np.zeros([3], np.float32), name="b1c")
        with tf.device("/job:worker/task:0"):
            x = tf.constant(np.arange(8, dtype=np.float32).reshape(2, 4))
            loss = tf.reduce_sum(tf.matmul(x, w) + b)
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        with tf.Session(_target(spec, "worker", 0)) as sess:
            sess.run(tf.global_variables_initializer())
            del requests[:]
            for _ in range(3):  # the loss too: the step then reads both variables
                sess.run([train, loss])
            np.testing.assert_allclose(sess.run(b), [-3.0, -3.0, -3.0])
            np.testing.assert_allclose(sess.run(w)[:, 0], 1 - 3 * 0.5 * np.array([4, 6, 8, 10]))
        # the worker's call to the ps waits open for the next step; stopping the server ends it
        pool = servers[1].worker.channels.steps(spec["ps"][0], "RecvTensorsSteps")
        assert len(pool._idle) == 1
        call = pool.acquire()
        assert not call.broken()
        pool.release(call)
    finally:
        for s in servers:
            s.stop()
    assert call.broken() and not pool._idle
    train_steps = {c[1] for c in requests[:2]}
    train_requests = [c for c in requests if c[1] in train_steps]
    assert sorted(c[0] for c in train_requests) == [
        "/job:ps/replica:0/task:0",  # the worker takes the variables ...
        "/job:worker/replica:0/task:0",  # ... the ps the gradients
    ]
    assert all(len(c[2]) >= 2 for c in train_requests)
    # 3 training steps, 2 requests each, on one call kept open each way
    assert len(requests) == 6 and sorted(opened) == sorted({c[0] for c in requests})


def test_a_key_not_asked_ahead_is_fetched_when_its_recv_runs(monkeypatch):
    """A remote key that the step's start did not ask for (none does: the plan lists them
    all) is fetched when its _Recv asks, with a RecvTensors call of its own."""
    from minitf.distributed import worker

    monkeypatch.setattr(worker, "remote_keys", lambda eplan, task: {})
    spec = _spec(ps=1, worker=1)
    servers = _start(spec)
    try:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.arange(6, dtype=np.float32), name="late_v")
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(v * 2) + tf.reduce_max(v)
        with tf.Session(_target(spec, "worker", 0)) as sess:
            sess.run(v.initializer)
            assert sess.run(total) == 35.0
    finally:
        for s in servers:
            s.stop()


def test_control_edges_cross_tasks(cluster):
    spec, _ = cluster
    _reset_all(spec)
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(0.0, name="ctl_v")
        bump = v.assign_add(5.0)
    with tf.device("/job:worker/task:1"):
        with tf.control_dependencies([bump]):
            out = tf.constant(1.0) + 1.0
    with tf.Session(_target(spec, "worker", 0)) as sess:
        sess.run(v.initializer)
        assert sess.run(out) == 2.0
        assert sess.run(v) == 5.0


# -- (3) errors --------------------------------------------------------------------------------


def test_uninitialized_variable_error_via_grpc(cluster):
    spec, _ = cluster
    _reset_all(spec)
    with tf.device("/job:ps/task:1"):
        x = tf.Variable(3.0, name="x")
    y = x * 2
    with tf.Session(_target(spec, "worker", 0)) as sess:
        for fetch in (x, y):
            with pytest.raises(tf.errors.FailedPreconditionError) as ei:
                sess.run(fetch)
            assert "Attempting to use uninitialized value x" in ei.value.message
            assert ei.value.message.startswith("From /job:ps/replica:0/task:1:\n")
        sess.run(x.initializer)
        assert sess.run(y) == 6.0


def test_bad_target_and_unreachable_master():
    with pytest.raises(tf.errors.NotFoundError, match="No session factory registered"):
        tf.Session("grpcx://localhost:1")
    port = free_port()
    c = tf.constant(1.0)
    t0 = time.monotonic()
    with pytest.raises(tf.errors.UnavailableError):
        with tf.Session("grpc://127.0.0.1:%d" % port) as sess:
            sess.run(c)
    cfg = tf.ConfigProto(operation_timeout_in_ms=500)
    with pytest.raises((tf.errors.DeadlineExceededError, tf.errors.UnavailableError)):
        tf.Session.reset("grpc://127.0.0.1:%d" % port, config=cfg)
    assert time.monotonic() - t0 < 10


def test_dead_task_gives_unavailable_and_others_keep_serving():
    spec = _spec(ps=1, worker=2)
    servers = _start(spec)
    try:
        with tf.device("/job:worker/task:1"):
            a = tf.constant(2.0)
        with tf.device("/job:worker/task:0"):
            b = a * 3
        with tf.Session(_target(spec, "worker", 0)) as sess:
            assert sess.run(b) == 6.0
            servers[2].stop()  # worker/1
            t0 = time.monotonic()
            with pytest.raises(tf.errors.UnavailableError) as ei:
                sess.run(b)
            assert time.monotonic() - t0 < 10
            assert "/job:worker/replica:0/task:1" in ei.value.message
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                c = tf.constant(1.0) + 1.0
            with tf.Session(
                _target(spec, "ps", 0), config=tf.ConfigProto(device_filters=["/job:ps"])
            ) as sess:
                assert sess.run(c) == 2.0
    finally:
        for s in servers:
            s.stop()


def test_step_deadline(cluster):
    spec, _ = cluster
    with tf.device("/job:worker/task:2"):
        q = tf.placeholder(tf.float32, [1024, 1024])
        m = q
        for _ in range(200):
            m = tf.matmul(m, q)
    opts = tf.RunOptions(timeout_in_ms=200)
    t0 = time.monotonic()
    with tf.Session(_target(spec, "worker", 0)) as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(m, feed_dict={q: np.eye(1024, dtype=np.float32)}, options=opts)
    assert time.monotonic() - t0 < 10


_METHODS = [
    "/minitf.%s/%s" % (service, m[0])
    for service in ("MasterService", "WorkerService")
    for m in services.methods(service)
]


@pytest.mark.slow
def test_malformed_and_oversized_messages_do_not_kill_the_server():
    server = tf.train.Server({"local": ["127.0.0.1:0"]})
    ch = grpc.insecure_channel(server.bound_address)
    try:
        rng = np.random.default_rng(0)
        garbage = [
            b"\xff" * 7,
            b"\x0a\xff\xff\xff\xff\x0f",
            bytes(rng.integers(0, 256, 64, dtype=np.uint8)),
        ]
        garbage.append(
            pb.RunGraphRequest(graph_handle="nope", recv_key=["x:0"] * 3).SerializeToString()
        )
        garbage.append(pb.CreateSessionRequest(graph_def_chunk=b"\x0a\x03abc").SerializeToString())
        refused = 0
        for n in range(1000):
            method = _METHODS[n % len(_METHODS)]
            body = garbage[n % len(garbage)]
            if n % 250 == 0:
                body = b"\x00" * (5 << 20)  # over the 4 MiB message cap
            call = ch.unary_unary(method, request_serializer=None, response_deserializer=None)
            try:
                call(body, timeout=2)
            except grpc.RpcError as e:
                assert e.code() != grpc.StatusCode.DEADLINE_EXCEEDED
                refused += 1
        assert refused >= 500  # garbage that happens to parse is answered
        r = services.Stub(ch, "WorkerService").GetStatus(pb.GetStatusRequest(), timeout=5)
        assert r.device_attributes
        c = tf.constant(2.0) * 4
        with tf.Session("grpc://" + server.bound_address) as sess:
            assert sess.run(c) == 8.0
    finally:
        ch.close()
        server.stop()


# -- (4) containers and reset --------------------------------------------------------------


def _counter(graph, init_value=0.0):
    with graph.as_default():
        x = tf.Variable(init_value, name="x")
        inc = x.assign_add(1.0)
        with tf.container("my-problem-1"):
            y = tf.Variable(100.0, name="y")
        inc_y = y.assign_add(1.0)
    return x, inc, y, inc_y


def test_containers_and_session_reset():
    spec = {"ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()]}
    servers = _start(spec)
    target = _target(spec, "worker", 0)
    try:
        g1 = tf.Graph()
        x, inc, y, inc_y = _counter(g1)
        assert y.op.get_attr("container") in (b"my-problem-1", "my-problem-1")
        with tf.Session(target, graph=g1) as a:
            a.run([x.initializer, y.initializer])
            assert a.run(inc) == 1.0
            assert a.run(inc_y) == 101.0
        g2 = tf.Graph()
        x2, inc2, y2, inc_y2 = _counter(g2)
        sess_b = tf.Session(target, graph=g2)
        assert sess_b.run(inc2) == 2.0  # no init: shared with session A's graph
        assert sess_b.run(inc_y2) == 102.0
        with tf.Session(graph=g2) as local:  # local sessions never share
            with pytest.raises(
                tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value x"
            ):
                local.run(x2)
        tf.Session.reset(target, ["my-problem-1"])
        with pytest.raises(tf.errors.AbortedError, match=r"Session \w+ is not found\."):
            sess_b.run(x2)
        with tf.Session(target, graph=g2) as c:
            with pytest.raises(
                tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value y"
            ):
                c.run(y2)
            assert c.run(x2) == 2.0
        tf.Session.reset(target)  # only the default (job-named) containers
        with tf.Session(target, graph=g2) as c:
            with pytest.raises(
                tf.errors.FailedPreconditionError, match="Attempting to use uninitialized value x"
            ):
                c.run(x2)
            c.run(y2.initializer)
            assert c.run(y2) == 100.0
        tf.Session.reset(target, ["my-problem-1"])
        tf.Session.reset("")
        sess_b.close()
    finally:
        for s in servers:
            s.stop()


def test_two_sessions_open_at_once_on_one_server(cluster):
    spec, _ = cluster
    _reset_all(spec)
    ga, gb = tf.Graph(), tf.Graph()
    xa, inca, _, _ = _counter(ga)
    xb, incb, _, _ = _counter(gb)
    with (
        tf.Session(_target(spec, "worker", 0), graph=ga) as a,
        tf.Session(_target(spec, "worker", 0), graph=gb) as b,
    ):
        a.run(xa.initializer)
        for _ in range(3):
            a.run(inca)
            b.run(incb)
        assert a.run(xa) == 6.0 and b.run(xb) == 6.0


# -- (6) token ---------------------------------------------------------------------------------


def test_cluster_token(monkeypatch):
    monkeypatch.delenv("MINITF_CLUSTER_TOKEN", raising=False)
    spec = {"ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()]}
    servers = _start(spec, token="s3cret")
    try:
        with tf.device("/job:ps/task:0"):
            a = tf.constant(2.0)
        with tf.device("/job:worker/task:0"):
            b = a + 1.0
        with pytest.raises(tf.errors.UnauthenticatedError, match="missing or wrong cluster token"):
            with tf.Session(_target(spec, "worker", 0)) as sess:
                sess.run(b)
        monkeypatch.setenv("MINITF_CLUSTER_TOKEN", "wrong")
        with pytest.raises(tf.errors.UnauthenticatedError):
            with tf.Session(_target(spec, "worker", 0)) as sess:
                sess.run(b)
        monkeypatch.setenv("MINITF_CLUSTER_TOKEN", "s3cret")
        with tf.Session(_target(spec, "worker", 0)) as sess:
            assert sess.run(b) == 3.0
    finally:
        for s in servers:
            s.stop()


# -- (7) how a client reaches its master -------------------------------------------------------


def test_a_server_of_this_process_is_called_directly(monkeypatch):
    """A session on a server's own ``target`` calls that master without RPC (TF's
    LocalMaster): so even a server that wants a token serves this process's sessions.  Asking
    for RPC (``rpc_options.use_rpc_for_inprocess_master``), or naming the task otherwise,
    goes through gRPC, where the token is checked."""
    monkeypatch.delenv("MINITF_CLUSTER_TOKEN", raising=False)
    server = tf.train.Server({"local": ["localhost:0"]}, token="s3cret")
    try:
        c = tf.constant(3.0) * 3
        with tf.Session(server.target) as sess:
            assert sess.run(c) == 9.0
            assert [d.name for d in sess.list_devices()][
                0
            ] == "/job:local/replica:0/task:0/device:CPU:0"
        for target, config in (
            (server.target, _rpc()),
            ("grpc://" + server.bound_address.replace("localhost", "127.0.0.1"), None),
        ):
            with pytest.raises(tf.errors.UnauthenticatedError, match="cluster token"):
                with tf.Session(target, config=config) as sess:
                    sess.run(c)
    finally:
        server.stop()


def test_a_call_whose_channel_was_closed_meanwhile_is_made_on_a_fresh_one(monkeypatch):
    """Another session of the process may drop the channel to a master (its peer failed)
    between this call's lookup of its stub and the call: the call is made again."""
    server = tf.train.Server.create_local_server()
    try:
        address = server.bound_address
        closed = grpc.insecure_channel(address)
        stubs = [services.Stub(closed, "MasterService")]
        closed.close()
        lookup = master_interface._channels.master
        monkeypatch.setattr(
            master_interface._channels, "master", lambda a: stubs.pop() if stubs else lookup(a)
        )
        answer = RemoteMaster(address).call("ListDevices", pb.ListDevicesRequest(), 10)
        assert (
            not stubs and answer.local_device[0].name == "/job:local/replica:0/task:0/device:CPU:0"
        )
    finally:
        server.stop()


def test_a_stopped_server_of_this_process_is_unavailable_to_its_sessions():
    server = tf.train.Server.create_local_server()
    c = tf.constant(3.0) * 3
    sess = tf.Session(server.target)
    assert sess.run(c) == 9.0
    server.stop()
    t0 = time.monotonic()
    with pytest.raises(tf.errors.UnavailableError, match="has stopped"):
        sess.run(c)  # the open session's direct calls
    with pytest.raises(tf.errors.UnavailableError):
        with tf.Session(server.target) as again:  # a new one: over gRPC, to nobody
            again.run(c)
    assert time.monotonic() - t0 < 10
    sess.close()


def test_a_master_reporting_a_dead_task_keeps_the_other_sessions_calls(monkeypatch):
    """A master that answers "task X is unavailable" is itself up: the client keeps its
    channel to it (before, it dropped the channel, and with it the calls of every other
    session of the process: a step in flight failed with "Channel closed!")."""
    spec = _spec(ps=1, worker=1)
    servers = _start(spec)
    try:
        with tf.device("/job:worker/task:0"):
            on_w0 = tf.constant(1.0) * 3
        with tf.device("/job:ps/task:0"):
            on_ps = tf.constant(1.0) + 1
        target = _target(spec, "worker", 0)
        a, b = (tf.Session(target, config=_rpc()) for _ in range(2))
        assert a.run(on_ps) == 2.0 and b.run(on_ps) == 2.0
        worker, running, release = servers[1].worker, threading.Event(), threading.Event()
        run_graph = worker.run_graph

        def held(*args):  # a's next step stays in flight until the test lets it go
            running.set()
            assert release.wait(30)
            return run_graph(*args)

        monkeypatch.setattr(worker, "run_graph", held)
        got = []
        t = threading.Thread(target=lambda: got.append(a.run(on_w0)))
        t.start()
        assert running.wait(10)
        servers[0].stop()
        with pytest.raises(tf.errors.UnavailableError, match="/job:ps/replica:0/task:0"):
            b.run(on_ps)  # reported by the master, in its step's StepEnd ...
        with pytest.raises(tf.errors.UnavailableError, match="/job:ps/replica:0/task:0"):
            tf.Session(target, config=_rpc()).run(on_ps)  # ... and failing CreateSession
        release.set()
        t.join(30)
        assert got == [3.0]
        a.close()
        b.close()
    finally:
        for s in servers:
            s.stop()


def test_server_config_is_the_default_of_its_sessions(capsys):
    server = tf.train.Server.create_local_server(
        config=tf.ConfigProto(log_device_placement=True, allow_soft_placement=True)
    )
    try:
        with tf.device("/device:GPU:3"):  # no such card: soft placement picks GPU:0
            c = tf.constant(2.0) * 5.0
        with tf.Session(server.target) as sess:
            assert sess.run(c) == 10.0
        out = capsys.readouterr().out
        assert "mul: (Mul): /job:local/replica:0/task:0/device:GPU:0" in out
    finally:
        server.stop()


def test_a_worker_splits_its_partition_by_device_again():
    """A worker splits the piece a master registered on it by device (TF's GraphMgr uses the
    same partitioner): within one task, a value crossing from a GPU to the CPU goes through a
    _Send/_Recv pair named ``<op>_G<n>``, in the step stats like the master's ``_S<n>`` pairs
    between tasks."""
    server = tf.train.Server.create_local_server()  # this process's 2 emulated GPUs
    try:
        with tf.device("/gpu:0"):
            b = tf.constant([1.0, 2.0], name="a_gpu") * 2.0
        with tf.device("/cpu:0"):
            c = tf.reduce_sum(b, name="c_cpu")
        md = tf.RunMetadata()
        with tf.Session(server.target, config=_rpc()) as sess:
            assert (
                sess.run(
                    c, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md
                )
                == 6.0
            )
        where = {
            n.node_name: (n.op_type, d.device.rsplit("/", 1)[-1])
            for d in md.step_stats.dev_stats
            for n in d.node_stats
        }
        pairs = {name: v for name, v in where.items() if re.fullmatch(r"mul_G\d+", name)}
        assert sorted(pairs.values()) == [("_Recv", "device:CPU:0"), ("_Send", "device:GPU:0")]
        (t,) = [t for t in md.step_stats.transfers if t.tensor_name == b.name]
        assert t.src_device.endswith("/job:local/replica:0/task:0/device:GPU:0")
        assert t.dst_device.endswith("/job:local/replica:0/task:0/device:CPU:0")
    finally:
        server.stop()


@pytest.mark.cluster
def test_a_private_queue_lives_across_a_grpc_sessions_steps():
    """A worker shares the kernels of stateful ops between the graphs a session registers (TF's
    OpSegment): a private queue filled by one step is the queue another step reads, whatever
    each step fetches."""
    server = tf.train.Server.create_local_server()
    try:
        q = tf.FIFOQueue(10, tf.float32, shapes=[])
        enqueue, size, dequeue = q.enqueue(7.0), q.size(), q.dequeue()
        with tf.Session(server.target) as sess:
            sess.run(enqueue)
            sess.run(enqueue)
            assert sess.run(size) == 2
            assert sess.run(dequeue) == 7.0
            assert sess.run([size, q.is_closed()]) == [1, False]
        with tf.Session(server.target) as other:  # a private queue is its session's only
            assert other.run(size) == 0
    finally:
        server.stop()


@pytest.mark.cluster
def test_closing_a_grpc_session_cancels_its_running_steps():
    """A step blocked in a queue ends when its session closes (TF's master cancels a closing
    session's steps): nothing waits on after the session is gone."""
    server = tf.train.Server.create_local_server()
    try:
        q = tf.FIFOQueue(10, tf.float32, shapes=[])
        dequeue = q.dequeue()
        sess = tf.Session(server.target)
        sess.run(q.size())
        errors_seen = []

        def blocked():
            try:
                sess.run(dequeue)
            except Exception as e:  # noqa: BLE001 - what the test looks at
                errors_seen.append(e)

        thread = threading.Thread(target=blocked)
        thread.start()
        sessions = server.master.sessions
        assert wait_until(lambda: any(s.runs for s in list(sessions.values())), 10)
        sess.close()
        thread.join(10)
        assert not thread.is_alive()
        assert [type(e) for e in errors_seen] == [tf.errors.CancelledError]
        assert not any(s.runs for s in list(sessions.values()))
    finally:
        server.stop()


def test_a_growing_graph_keeps_the_partitions_of_steps_planned_before():
    """Another thread may be about to run a signature's partitions when the graph grows (a
    QueueRunner's enqueue while the main loop adds a ``q.size()`` op each time): as TF's master
    does, the grown graph is placed again and those partitions stay registered on every task
    (minitf used to drop them, and the enqueue failed with AbortedError "Graph handle is not
    found")."""
    spec = {"ps": ["127.0.0.1:%d" % free_port()], "worker": ["127.0.0.1:%d" % free_port()]}
    servers = {j: tf.train.Server(spec, job_name=j, task_index=0) for j in ("ps", "worker")}
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                q = tf.FIFOQueue(10, tf.float32, shapes=[], name="q")
            enqueue = q.enqueue(1.0)
            with tf.Session(servers["worker"].target) as sess:
                sess.run(enqueue)
                (master_session,) = servers["worker"].master.sessions.values()
                (planned,) = master_session.signatures.values()
                assert sess.run(q.size()) == 1  # a new op: the graph grew and is placed again
                by_task = {s.worker.task_name: s for s in servers.values()}
                for task, handle in planned.handles.items():
                    by_task[task].worker.graph_mgr.get(handle)
                assert planned in master_session.signatures.values()
                sess.run(enqueue)
                assert sess.run(q.size()) == 2
    finally:
        for server in servers.values():
            server.stop()
