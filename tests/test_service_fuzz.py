"""Random bytes to every method of both services (a few hundred messages; tests/stress/ sends
10,000 a service): no crash, no state change, the server answers afterwards.  Reset and
CleanupAll clear state only for a well-formed request (issue 24, item 6)."""

import grpc
import psutil
import pytest
from service_fuzz import SERVICES, fuzz, fuzz_target, method_calls

import minitf as tf
from minitf.distributed import LocalCluster, wire
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire import GRPC_OPTIONS

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def target():
    with fuzz_target() as t:
        yield t


@pytest.mark.parametrize("service", SERVICES)
def test_random_bytes_to_every_method_change_nothing(target, service):
    fuzz(target, service, 150, max_bytes=256, timeout=0.3)


@pytest.mark.parametrize(
    "method, service, message",
    [
        ("Reset", "MasterService", b""),
        ("CleanupAll", "WorkerService", b""),
        ("Reset", "MasterService", pb.ResetRequest(container=["worker"]).SerializeToString()),
        (
            "CleanupAll",
            "WorkerService",
            pb.CleanupAllRequest(**wire.clear_request(["bad name!"])).SerializeToString(),
        ),
    ],
)
def test_a_clear_request_must_be_well_formed(target, method, service, message):
    assert dict(target.calls(service))[method](message, 5.0) == grpc.StatusCode.INVALID_ARGUMENT
    assert target.state_is_intact()


def test_a_well_formed_reset_still_clears():
    with fuzz_target() as t:
        tf.Session.reset(t.server.target)
        with pytest.raises(tf.errors.AbortedError, match="not found"):
            t.sess.run(t.v)  # its session was closed
        with tf.Session(t.server.target, graph=t.graph) as sess:
            with pytest.raises(tf.errors.FailedPreconditionError):
                sess.run(t.v)  # and its variable cleared


def test_requests_that_do_not_parse_are_invalid_arguments_and_leave_nothing_behind():
    """Bytes that are no message of the method's type: InvalidArgumentError (gRPC's own
    deserializer failure was INTERNAL, logged with its traceback, about 19 KB kept a call)."""
    with LocalCluster({"worker": 1}) as lc:
        channel = grpc.insecure_channel(lc.target("worker")[len("grpc://") :], GRPC_OPTIONS)
        calls = dict(method_calls(channel, "WorkerService"))
        proc = psutil.Process(lc.pid("worker"))
        for _ in range(200):  # gRPC's own buffers and pools settle
            calls["GetStatus"](b"\xff\xff\xff\xff", 5.0)
        before = proc.memory_info().rss
        codes = {calls["CleanupAll"](b"\x0a\xff\xff\xff\xff", 5.0) for _ in range(1000)}
        growth = proc.memory_info().rss - before
        channel.close()
    assert codes == {grpc.StatusCode.INVALID_ARGUMENT}
    assert growth < 4 << 20, "the worker grew by %d KiB" % (growth >> 10)
