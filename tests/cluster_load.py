"""Load on a cluster's servers, shared by tests/test_cluster_reliability.py (a few hundred
calls or threads) and tests/stress/test_cluster_load.py (a thousand): RecvTensor calls that
block without a deadline, and many client threads stepping one session."""

import threading
import time

import grpc

import minitf as tf
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import services, wire
from minitf.framework.rendezvous import create_key


def blocked_recvs(address, n):
    """``(channel, calls)``: ``n`` RecvTensor and RecvTensors calls (half each) to the worker at
    ``address`` for a step that never runs, with no deadline: each holds a handler thread."""
    channel = grpc.insecure_channel(address, options=wire.GRPC_OPTIONS)
    stub = services.Stub(channel, "WorkerService")
    calls = []
    for i in range(n):
        key = create_key(
            "/job:local/replica:0/task:0/device:CPU:0",
            1,
            "/job:local/replica:0/task:0/device:CPU:0",
            "never_sent_%d:0" % i,
        )
        if i % 2:
            calls.append(stub.RecvTensor(pb.RecvTensorRequest(step_id=7, rendezvous_key=key)))
        else:
            calls.append(stub.RecvTensors(pb.RecvTensorsRequest(step_id=7, rendezvous_key=[key])))
    return channel, calls


def handler_threads(kind=""):
    """This process's gRPC handler threads of one class of method (server.HANDLER_POOLS), or
    of every class."""
    tag = "-%s_" % kind if kind else ""
    return sum(
        1 for t in threading.enumerate() if t.name.startswith("minitf-grpc-") and tag in t.name
    )


def answer_seconds(server):
    """Seconds the slowest of a worker RPC (GetStatus) and a step over gRPC on ``server`` took."""
    channel = grpc.insecure_channel("localhost:%d" % server.bound_port, options=wire.GRPC_OPTIONS)
    try:
        t0 = time.monotonic()
        services.Stub(channel, "WorkerService").GetStatus(pb.GetStatusRequest(), timeout=5)
        status = time.monotonic() - t0
    finally:
        channel.close()
    config = tf.ConfigProto(operation_timeout_in_ms=5000)
    config.rpc_options.use_rpc_for_inprocess_master = True
    with tf.Graph().as_default():
        c = tf.constant(2.0) * 3.0
        with tf.Session(server.target, config=config) as sess:
            t0 = time.monotonic()
            assert sess.run(c) == 6.0
            step = time.monotonic() - t0
    return max(status, step)


def many_clients(target, n_threads, steps=2, join_seconds=120.0):
    """``n_threads`` threads running ``steps`` steps each on one session of ``target``: a
    variable on the ps, ops on worker 0 (the master's task) and worker 1, tensors crossing into
    the master's task and out of it.  ``(results, errors, threads still running)``."""
    results, errs = [], []
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0, name="v")
        with tf.device("/job:worker/task:0"):
            x = v + 1.0
        with tf.device("/job:worker/task:1"):
            w = x * 2.0
        with tf.device("/job:worker/task:0"):
            out = w + v
        with tf.Session(target) as sess:
            sess.run(v.initializer)

            together = threading.Barrier(n_threads)

            def client():
                try:  # every thread starts its first step at the same time
                    together.wait(join_seconds)
                except threading.BrokenBarrierError:
                    pass
                for _ in range(steps):
                    try:
                        results.append(sess.run(out))
                    except tf.errors.OpError as e:
                        errs.append(e)

            threads = [threading.Thread(target=client) for _ in range(n_threads)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + join_seconds
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            hung = [t for t in threads if t.is_alive()]
    return results, errs, hung
