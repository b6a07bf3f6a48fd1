"""Load runs of issue 24's "must show": a thousand RecvTensor calls without a deadline on one
server, a thousand client threads on one session (the
smaller versions are in tests/test_cluster_reliability.py).  Each prints its figure."""

import time

import cluster_load
import pytest

import minitf as tf
from helpers import wait_until
from minitf.distributed import LocalCluster

pytestmark = [pytest.mark.stress, pytest.mark.cluster]


def test_1000_blocked_recv_calls_leave_other_rpcs_answering_within_1_s():
    with tf.train.Server.create_local_server() as server:
        channel, calls = cluster_load.blocked_recvs("localhost:%d" % server.bound_port, 1000)
        try:
            assert wait_until(lambda: cluster_load.handler_threads("recv") >= 1000, 60)
            worst = max(cluster_load.answer_seconds(server) for _ in range(5))
            print("\n1,000 blocked RecvTensor(s) calls: slowest other RPC %.3f s" % worst)
            assert worst < 1.0
            assert not any(c.done() for c in calls)  # still blocked: the RPCs got past them
        finally:
            for c in calls:
                c.cancel()
            channel.close()


def test_1000_client_threads_on_one_session_all_finish_or_fail_with_a_tf_error():
    with LocalCluster({"ps": 1, "worker": 2}) as lc:
        t0 = time.monotonic()
        results, errs, hung = cluster_load.many_clients(
            lc.target("worker", 0), 1000, steps=2, join_seconds=300
        )
        print(
            "\n1,000 client threads x 2 steps: %d done, %d TF errors, %d hung, %.1f s"
            % (len(results), len(errs), len(hung), time.monotonic() - t0)
        )
    assert not hung
    assert len(results) + len(errs) == 2000
    assert all(isinstance(e, tf.errors.OpError) for e in errs)
    assert set(results) <= {5.0}
