import socket

import pytest

from minitf import teaching


def test_local_addresses_are_bindable_loopback_ports():
    addresses = teaching.local_addresses(3)
    assert len(addresses) == 3
    for address in addresses:
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1"
        with socket.socket() as s:
            s.bind((host, int(port)))


def test_local_addresses_rejects_negative_count():
    with pytest.raises(ValueError, match="count must be >= 0"):
        teaching.local_addresses(-1)
