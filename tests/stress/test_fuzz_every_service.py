"""10,000 random-byte messages to each service of a server (every method, hypothesis picks
the bytes): each call ends with a status, no state changes (its variable, its open session),
and the server still answers afterwards.  The fast version is tests/test_service_fuzz.py."""

import grpc
import pytest
from service_fuzz import SERVICES, fuzz, fuzz_target

pytestmark = pytest.mark.stress

MESSAGES = 10_000


@pytest.mark.parametrize("service", SERVICES)
def test_ten_thousand_random_messages_per_service(service):
    with fuzz_target() as target:
        seen = fuzz(target, service, MESSAGES, max_bytes=512, timeout=0.05)
    print("\n%s: %d messages; (method, status): count %s" % (service, sum(seen.values()), seen))
    assert sum(seen.values()) >= MESSAGES * 0.9  # hypothesis may stop early on duplicates
    assert not [k for k in seen if k[1] == grpc.StatusCode.UNKNOWN.name]
