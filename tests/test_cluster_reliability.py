"""Waits and exits of the cluster runtime (issue 24, items 1, 2, 3, 9, 10, 11): a script with
in-process servers exits at once, blocked RecvTensor calls leave the server's other RPCs
alone, many client threads on one session all finish, a killed worker is reported within 2 s,
TF's "no timeout" values, ports out of range.  The heavy versions (1,000 threads or calls) are
in tests/stress/test_cluster_load.py."""

import socket
import subprocess
import sys
import textwrap
import threading
import time

import cluster_load
import grpc
import numpy as np
import pytest

import minitf as tf
from helpers import wait_until
from minitf.distributed import master_interface, services, streams, wire
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.local_cluster import LocalCluster, free_port
from minitf.distributed.worker_cache import Channels, rpc_error

pytestmark = pytest.mark.cluster


def _rpc(**kw):
    config = tf.ConfigProto(**kw)
    config.rpc_options.use_rpc_for_inprocess_master = True
    return config


# -- item 10: operation_timeout_in_ms <= 0 or huge means no timeout ----------------------------


@pytest.mark.parametrize("ms", [-1, 2**63 - 1])
def test_operation_timeout_without_a_limit_runs_over_grpc(ms):
    with tf.train.Server.create_local_server() as server:
        g = tf.Graph()
        with g.as_default():
            c = tf.constant(2.0) * 3.0
        for config in (
            tf.ConfigProto(operation_timeout_in_ms=ms),
            _rpc(operation_timeout_in_ms=ms),
        ):
            with tf.Session(server.target, graph=g, config=config) as sess:
                assert sess.run(c) == 6.0
                opts = tf.RunOptions(timeout_in_ms=ms)
                assert sess.run(c, options=opts) == 6.0


def test_negative_run_timeout_falls_back_to_the_session_timeout():
    """TF: a RunOptions.timeout_in_ms <= 0 leaves the session's operation_timeout_in_ms."""
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(1, tf.float32)
        d = q.dequeue()
    with tf.train.Server.create_local_server() as server:
        for target, config in (("", tf.ConfigProto), (server.target, _rpc)):
            with tf.Session(target, graph=g, config=config(operation_timeout_in_ms=300)) as sess:
                t0 = time.monotonic()
                with pytest.raises(tf.errors.DeadlineExceededError):
                    sess.run(d, options=tf.RunOptions(timeout_in_ms=-1))
                assert time.monotonic() - t0 < 5


# -- item 11: ports past 65535 -------------------------------------------------------------------


@pytest.mark.parametrize("port", [65536, 70000, 2**32 + 2222])
def test_port_out_of_range_is_rejected_naming_the_address(port):
    addr = "localhost:%d" % port
    with pytest.raises(ValueError, match='"%s".*0 to 65535' % addr):
        tf.train.ClusterSpec({"worker": [addr]})
    with pytest.raises(ValueError, match='"%s"' % addr):
        tf.train.ClusterSpec({"worker": {3: addr}})
    with pytest.raises(ValueError, match='"%s"' % addr):
        tf.train.Server({"worker": [addr]}, job_name="worker", task_index=0)
    assert tf.train.ClusterSpec({"worker": ["localhost:65535"]}).num_tasks("worker") == 1


# -- a server slow to answer a new connection (a loaded machine) is waited for -----------------


class _SlowHelloProxy:
    """A TCP proxy to the server at ``address`` that holds back the server's side of each new
    connection for ``delay`` seconds: a server on a busy machine, slow to say hello."""

    def __init__(self, address, delay):
        host, port = address.rsplit(":", 1)
        self._upstream, self._delay = (host, int(port)), delay
        self._closed = threading.Event()
        self._sockets = [socket.create_server(("127.0.0.1", 0))]
        self.address = "127.0.0.1:%d" % self._sockets[0].getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._sockets[0].accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, 0), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(server, client, self._delay), daemon=True
            ).start()

    def _pump(self, src, dst, delay):
        try:
            data = src.recv(1 << 16)
            if delay and self._closed.wait(delay):  # held back (close() ends the wait)
                return
            while data:
                dst.sendall(data)
                data = src.recv(1 << 16)
        except OSError:
            pass

    def close(self):
        self._closed.set()
        for s in self._sockets:
            s.close()


def test_a_server_slow_to_answer_a_new_connection_is_still_reached():
    """A new connection's first answer (the server's HTTP/2 SETTINGS) 0.5 s late: the session
    waits for it.  With the connection attempt cut at 100 ms (``grpc.min_reconnect_backoff_ms``,
    which gRPC reads as the least time an attempt gets) the call failed with UnavailableError,
    on which a MonitoredTrainingSession re-creates its session: notebook 14's asynchronous
    replicas then counted a wrong global step in a loaded CI run."""
    with tf.train.Server.create_local_server() as server:
        proxy = _SlowHelloProxy(server.target[len("grpc://") :], 0.5)
        try:
            g = tf.Graph()
            with g.as_default():
                c = tf.constant(2.0) * 3.0
            with tf.Session("grpc://" + proxy.address, graph=g) as sess:
                assert sess.run(c) == 6.0
        finally:
            proxy.close()


# -- item 9: a task killed mid-step is reported at once -------------------------------------------


def test_worker_killed_mid_step_is_reported_within_2_s():
    """The master's own partition (blocked in a dequeue) is cancelled as soon as another task's
    partition fails: the client does not wait for it to end first."""
    with LocalCluster({"worker": 2}) as lc:
        with tf.Graph().as_default():
            with tf.device("/job:worker/task:1"):
                there = tf.FIFOQueue(1, tf.float32, shared_name="there").dequeue()
                started = tf.constant(1.0)
            with tf.device("/job:worker/task:0"):
                here = tf.FIFOQueue(1, tf.float32, shared_name="here").dequeue()
                signals = tf.FIFOQueue(1, tf.float32, shared_name="signals")
                signal = signals.enqueue(started)  # worker 1's partition has begun
            config = tf.ConfigProto(operation_timeout_in_ms=30000)
            with tf.Session(lc.target("worker", 0), config=config) as sess:
                _killed_mid_step(lc, sess, [here, there, signal], signals, ("worker", 1))


def test_a_ps_killed_while_a_worker_waits_on_its_open_recv_call_is_reported_within_2_s():
    """The worker takes the ps's tensors on a RecvTensorsSteps call it keeps open from step to
    step; the ps dying while a step waits on that call fails the step at once with
    UnavailableError naming the ps (the call breaks; nothing waits for the step's deadline)."""
    with LocalCluster({"ps": 1, "worker": 1}) as lc:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.ones(4, np.float32), name="v")
                late = tf.FIFOQueue(1, tf.float32, shared_name="late").dequeue() + 1.0
            with tf.device("/job:worker/task:0"):
                total = tf.reduce_sum(v * 2.0)
                waits = late * 2.0  # the worker's _Recv of `late` waits on its call
                signals = tf.FIFOQueue(1, tf.float32, shared_name="signals")
                signal = signals.enqueue(tf.reduce_sum(v))  # the call got v: it is open
            config = tf.ConfigProto(operation_timeout_in_ms=30000)
            with tf.Session(lc.target("worker", 0), config=config) as sess:
                sess.run(v.initializer)
                for _ in range(3):  # steps on the call kept open
                    assert sess.run(total) == 8.0
                _killed_mid_step(lc, sess, [waits, signal], signals, ("ps", 0))


def _killed_mid_step(lc, sess, fetches, signals, task):
    """Runs ``fetches`` on a thread until their step has put something in ``signals`` (it
    has started on every task), kills ``task`` (job, index), and checks the step fails with
    UnavailableError naming that task within 2 s."""
    errs = []

    def run():
        try:
            sess.run(fetches)
        except tf.errors.OpError as e:
            errs.append((time.monotonic(), e))

    t = threading.Thread(target=run)
    t.start()
    # on a loaded machine the step may take long to start on every task
    assert wait_until(lambda: sess.run(signals.size()) == 1, 60)
    t0 = time.monotonic()
    lc.kill(*task)
    t.join(5)
    assert not t.is_alive() and len(errs) == 1
    print("\nkilled %s:%d reported after %.3f s" % (task + (errs[0][0] - t0,)))
    assert errs[0][0] - t0 < 2.0
    assert isinstance(errs[0][1], tf.errors.UnavailableError), errs
    assert "/job:%s/replica:0/task:%d" % task in errs[0][1].message


def test_calls_cut_by_their_channel_closing_read_as_the_peer_unavailable():
    """A master and its own worker share one channel to each peer.  When one call finds the
    peer gone it closes that channel (a restarted task is then reached at once), and gRPC cuts
    the other calls on it with CANCELLED "Channel closed!".  Nobody cancelled the step, so it
    fails as TF's does when a peer is lost: UnavailableError naming the peer (it used to be
    CancelledError, when the master's own partition, whose _Recv was cut, failed first).  The
    next step reaches the peer on a fresh channel."""
    spec = {"worker": ["127.0.0.1:%d" % free_port() for _ in range(2)]}
    servers = [tf.train.Server(spec, job_name="worker", task_index=i) for i in range(2)]
    try:
        with tf.Graph().as_default():
            with tf.device("/job:worker/task:1"):
                q = tf.FIFOQueue(1, tf.float32, shared_name="cut")
                there, put = q.dequeue(), q.enqueue(2.0)
            with tf.device("/job:worker/task:0"):
                here = there * 3.0
            config = tf.ConfigProto(operation_timeout_in_ms=30000)
            with tf.Session(servers[0].target, config=config) as sess:
                errs = []

                def run():
                    try:
                        sess.run(here)
                    except tf.errors.OpError as e:
                        errs.append(e)

                t = threading.Thread(target=run)
                t.start()
                steps = servers[1].worker.rendezvous._steps  # worker 0's _Recv is waiting
                assert wait_until(lambda: any(r._waiters for r in list(steps.values())), 60)
                servers[0].worker.channels.forget(spec["worker"][1])
                t.join(10)
                assert not t.is_alive() and len(errs) == 1
                assert isinstance(errs[0], tf.errors.UnavailableError), errs
                assert "/job:worker/replica:0/task:1" in errs[0].message
                sess.run(put)
                assert sess.run(here) == 6.0
    finally:
        for s in servers:
            s.stop()


def test_a_client_step_cut_by_its_channel_closing_reads_as_the_master_unavailable():
    """A process's sessions share one channel to each master; a session that finds the master
    gone closes it, which cuts the steps other sessions have in flight on it.  Those fail with
    UnavailableError (not CancelledError: nobody cancelled them), and the next step reaches
    the master on a fresh channel."""
    with tf.train.Server.create_local_server() as server:
        address = server.target[len("grpc://") :]
        with tf.Graph().as_default():
            q = tf.FIFOQueue(1, tf.float32, shared_name="client_cut")
            took, put = q.dequeue(), q.enqueue(1.0)
            signals = tf.FIFOQueue(1, tf.float32, shared_name="client_cut_signals")
            signal = signals.enqueue(2.0)  # the step is running
            config = _rpc(operation_timeout_in_ms=30000)
            with tf.Session(server.target, config=config) as sess:
                errs = []

                def run():
                    try:
                        sess.run([took, signal])
                    except tf.errors.OpError as e:
                        errs.append(e)

                t = threading.Thread(target=run)
                t.start()
                assert wait_until(lambda: sess.run(signals.size()) == 1, 60)
                master_interface._channels.forget(address)
                t.join(10)
                assert not t.is_alive() and len(errs) == 1
                assert isinstance(errs[0], tf.errors.UnavailableError), errs
                sess.run(put)
                assert sess.run(took) == 1.0


def test_a_master_call_whose_channel_is_closed_twice_names_the_master(monkeypatch):
    """The client takes a fresh channel once; when that one is closed too, the error it raises
    names the master it could not reach."""
    channel = grpc.insecure_channel("127.0.0.1:%d" % free_port())
    stub = services.Stub(channel, "MasterService")  # (made on a closed channel, gRPC crashes)
    channel.close()
    monkeypatch.setattr(master_interface._channels, "master", lambda address: stub)
    master = master_interface.RemoteMaster("127.0.0.1:2222")
    with pytest.raises(streams.ChannelClosed) as ei:
        master.call("ListDevices", pb.ListDevicesRequest(), 5)
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
    assert ei.value.details() == "The channel to 127.0.0.1:2222 was closed."


def test_a_call_on_a_channel_closed_meanwhile_is_unavailable_and_spares_the_fresh_one():
    """A stub taken before another call closed its channel: calling it raises ChannelClosed
    (an RpcError every caller handles, UNAVAILABLE and derived), not gRPC's ValueError; and
    reporting that failure does not close the fresh channel another call has made since."""
    with tf.train.Server.create_local_server() as server:
        address = server.target[len("grpc://") :]
        channels = Channels()
        try:
            stale = channels.worker(address)
            channels.forget(address)
            with pytest.raises(streams.ChannelClosed) as ei:
                stale.GetStatus(pb.GetStatusRequest(), timeout=5)
            err = rpc_error(ei.value, "/job:local/replica:0/task:0")
            assert type(err) is tf.errors.UnavailableError and err.derived
            fresh = channels.worker(address)
            channels.failed(address, ei.value)
            assert channels.worker(address) is fresh
            assert fresh.GetStatus(pb.GetStatusRequest(), timeout=5).device_attributes
        finally:
            channels.close()


def test_rpc_errors_read_a_cut_call_as_unavailable_and_keep_what_a_peer_reported():
    """``rpc_error``: a CANCELLED the peer did not report is a cut call (UnavailableError,
    derived from what cut it); one the peer reported stays CancelledError; the peer's
    "derived" mark carries over; the task is named once."""
    task = "/job:ps/replica:0/task:0"
    cut = rpc_error(streams.StepError(grpc.StatusCode.CANCELLED, "Channel closed!"), task)
    assert type(cut) is tf.errors.UnavailableError and cut.derived
    assert cut.message == "From %s:\nChannel closed!" % task
    told = streams.StepError(grpc.StatusCode.CANCELLED, "RunGraph was cancelled.", reported=True)
    assert type(rpc_error(told, task)) is tf.errors.CancelledError
    assert not rpc_error(told, task).derived
    lost = streams.StepError(grpc.StatusCode.UNAVAILABLE, "From %s:\nx" % task, True, True)
    err = rpc_error(lost, "/job:worker/replica:0/task:1")
    assert type(err) is tf.errors.UnavailableError and err.derived
    assert err.message == "From %s:\nx" % task


# -- item 1: a script with in-process servers exits at once ---------------------------------------

SEED_CLUSTER_SCRIPT = textwrap.dedent("""
    import sys
    import minitf as tf
    ports = sys.argv[1:6]
    cluster = tf.train.ClusterSpec({
        "ps": ["127.0.0.1:%s" % p for p in ports[:2]],
        "worker": ["127.0.0.1:%s" % p for p in ports[2:]],
    })
    servers = [tf.train.Server(cluster, job_name=j, task_index=i)
               for j, n in (("ps", 2), ("worker", 3)) for i in range(n)]
    with tf.device("/job:ps/task:0"):
        a = tf.Variable(1.0, name="a")
    with tf.device("/job:ps/task:1"):
        b = tf.Variable(2.0, name="b")
    with tf.device("/job:worker/task:1"):
        c = a + b
    with tf.device("/job:worker/task:2"):
        d = c * 2.0
    config = tf.ConfigProto()
    config.rpc_options.use_rpc_for_inprocess_master = sys.argv[6] == "rpc"
    with tf.Session(servers[2].target, config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            result = sess.run(d)
    print(result, flush=True)
""")


@pytest.mark.parametrize("master", ["rpc", "direct"])
def test_script_with_in_process_servers_exits_within_2_s_of_its_last_line(tmp_path, master):
    """Five tf.train.Server in one script, never stopped (as in the seed's cluster code): the
    process ends right after its last line, as a TF process does."""
    script = tmp_path / "cluster_script.py"
    script.write_text(SEED_CLUSTER_SCRIPT)
    ports = [str(free_port()) for _ in range(5)]
    with subprocess.Popen(
        [sys.executable, str(script), *ports, master], stdout=subprocess.PIPE, text=True
    ) as p:
        try:
            assert p.stdout.readline() == "6.0\n"
            t0 = time.monotonic()
            p.wait(timeout=60)
            assert time.monotonic() - t0 < 2.0
            assert p.returncode == 0
        finally:
            p.kill()


# -- item 2: RecvTensor calls without a deadline leave the server's other methods alone ----------


@pytest.mark.slow
def test_blocked_recv_calls_leave_other_rpcs_answering():
    """300 RecvTensor(s) calls with no deadline for a step that never runs (more than the 256
    handler threads the whole server used to have): other RPCs still answer within 1 s."""
    with tf.train.Server.create_local_server() as server:
        channel, calls = cluster_load.blocked_recvs("localhost:%d" % server.bound_port, 300)
        try:
            # (the server used to have 256 handler threads in all)
            assert wait_until(lambda: cluster_load.handler_threads() >= 256, 30)
            assert cluster_load.answer_seconds(server) < 1.0
        finally:
            for c in calls:
                c.cancel()
            channel.close()


def test_recv_without_a_deadline_waits_the_control_rpc_cap(monkeypatch):
    """gRPC reports ~9.2e18 s left on a call without a deadline: the handler waits the 30 s
    cap of a control RPC instead (here cut to 0.3 s)."""
    monkeypatch.setattr(wire, "CONTROL_RPC_SECONDS", 0.3)
    with tf.train.Server.create_local_server() as server:
        channel, calls = cluster_load.blocked_recvs("localhost:%d" % server.bound_port, 2)
        try:
            assert wait_until(lambda: all(c.done() for c in calls), 10)
            assert {c.code() for c in calls} == {grpc.StatusCode.DEADLINE_EXCEEDED}
        finally:
            channel.close()


def test_every_reader_of_the_control_rpc_cap_sees_it_changed():
    """The cap is read from ``wire`` at each use: no module keeps a copy of it taken when it was
    imported (one imported while a test had the cap cut kept 0.3 s for the rest of the run)."""
    import importlib
    import pkgutil

    import minitf.distributed

    names = [
        m.name for m in pkgutil.walk_packages(minitf.distributed.__path__, "minitf.distributed.")
    ]
    copies = [
        n
        for n in names
        if not n.startswith("minitf.distributed.wire")
        and "CONTROL_RPC_SECONDS" in vars(importlib.import_module(n))
    ]
    assert len(names) > 20 and copies == []


# -- item 3: many client threads on one session ---------------------------------------------------


@pytest.mark.slow
def test_300_client_threads_on_one_session_all_finish():
    """More concurrent steps than the master's server had handler threads (each step holds one
    there while its partitions' tensors cross into that server): every step finishes."""
    with LocalCluster({"ps": 1, "worker": 2}) as lc:
        results, errs, hung = cluster_load.many_clients(lc.target("worker", 0), 300, steps=1)
    assert not hung and not errs, errs[:3]
    assert results == [5.0] * 300
