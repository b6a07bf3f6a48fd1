"""Random bytes to every method of both services (a few hundred messages; tests/stress/ sends
10,000 a service): no crash, no state change, the server answers afterwards.  Reset and
CleanupAll clear state only for a well-formed request (issue 24, item 6)."""

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_fuzz import SERVICES, fuzz_target

import minitf as tf
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def target():
    with fuzz_target() as t:
        yield t


@pytest.mark.parametrize("service", SERVICES)
def test_random_bytes_to_every_method_change_nothing(target, service):
    calls = target.calls(service)

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.sampled_from(calls), st.binary(max_size=256))
    def one(named_call, data):
        name, call = named_call
        call(data, 0.3)
        assert target.state_is_intact(), "%s(%r) changed the server's state" % (name, data)

    one()
    assert target.state_is_intact()


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
