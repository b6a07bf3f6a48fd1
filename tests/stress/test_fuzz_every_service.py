"""10,000 random-byte messages to each service of a server (every method, hypothesis picks
the bytes): each call ends with a status, no state changes (its variable, its open session),
and the server still answers afterwards.  The fast version is tests/test_service_fuzz.py."""

import collections

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_fuzz import SERVICES, fuzz_target

pytestmark = pytest.mark.stress

MESSAGES = 10_000


@pytest.mark.parametrize("service", SERVICES)
def test_ten_thousand_random_messages_per_service(service):
    seen = collections.Counter()
    with fuzz_target() as target:
        calls = target.calls(service)

        @settings(
            max_examples=MESSAGES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.sampled_from(calls), st.binary(max_size=512))
        def one(named_call, data):
            name, call = named_call
            seen[name, call(data, 0.05).name] += 1
            assert target.state_is_intact(), "%s(%r) changed the server's state" % (name, data)

        one()
        assert target.state_is_intact()
    print("\n%s: %d messages; (method, status): count %s" % (service, sum(seen.values()), seen))
    assert sum(seen.values()) >= MESSAGES * 0.9  # hypothesis may stop early on duplicates
    assert not [k for k in seen if k[1] == grpc.StatusCode.UNKNOWN.name]
