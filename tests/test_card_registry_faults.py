"""Faults of the emulated cards' registry (``minitf.runtime.card_registry``): a damaged or
foreign file, bad byte counts, an unusable state folder, a process stuck holding the lock.

Book section: "Managing the GPU RAM".  A real driver never loses track of who holds a card's
memory and never hangs a process because another one is stuck; the registry that stands in for
it must not either: every fault gives a TF error that names the file or ``MINITF_STATE_DIR``
and says how to reset, and nothing is silently forgotten (issue 24, item 7).
"""

import io
import json
import os
import subprocess
import sys

import pytest

import minitf as tf
from minitf import smi
from minitf.lib import file_io
from minitf.runtime import card_registry

GiB = 1 << 30
CARD = 4 * GiB
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf.__file__)))


@pytest.fixture(autouse=True)
def registry_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("MINITF_STATE_DIR", str(d))
    return d


def _write(registry_dir, content):
    registry_dir.mkdir(exist_ok=True)
    path = registry_dir / "gpu0.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _entry(nbytes, **extra):
    e = {"id": "x", "pid": os.getpid(), "start_time": card_registry.process_start_time()}
    e.update(bytes=nbytes, name="python3 other.py", sessions=1, **extra)
    return e


DAMAGED = [
    "{ not json",
    "",
    "\xff\xfe",
    json.dumps([1, 2, 3]),
    json.dumps({"cards": []}),
    json.dumps({"entries": [], "format": "someone-else/7"}),
    json.dumps({"entries": ["abc"]}),
    json.dumps({"entries": [{"id": "x", "pid": os.getpid()}]}),  # no bytes (was a KeyError)
    json.dumps({"entries": [_entry("3G")]}),  # (was a TypeError)
    json.dumps({"entries": [_entry(-5 * GiB)]}),  # would make memory out of nothing
    json.dumps({"entries": [_entry(5 * GiB)], "capacity": CARD}),  # 125 % of the card
]


# ids by position: some contents hold this process's id, and xdist's workers must collect the
# same test ids
@pytest.mark.parametrize("content", DAMAGED, ids=["damaged%d" % i for i in range(len(DAMAGED))])
def test_damaged_or_foreign_file_is_an_error_naming_it_never_a_silent_reset(registry_dir, content):
    path = _write(registry_dir, content)
    for call in (
        lambda: card_registry.reserve(0, CARD, GiB),
        lambda: card_registry.usage(0),
        lambda: smi.smi(file=io.StringIO()),
    ):
        with pytest.raises(tf.errors.DataLossError) as e:
            call()
        msg = str(e.value)
        assert str(path) in msg and "MINITF_STATE_DIR=%s" % registry_dir in msg
        assert "python -m minitf.smi --reset" in msg
    assert path.read_text() == content  # nothing forgotten behind the user's back


def test_reset_clears_a_damaged_file(registry_dir, capsys):
    _write(registry_dir, "{ not json")
    assert smi.main(["--reset"]) == 0
    assert "reset" in capsys.readouterr().out
    with card_registry.reserve(0, CARD, CARD) as r:
        assert r.bytes == CARD and card_registry.used_bytes(0) == CARD


def test_a_card_is_never_more_than_full(registry_dir):
    """The issue's 5.3 of 4 GiB: a damaged file reset behind a holder's back let a second
    program take the whole card again.  Now the second program is told instead."""
    held = card_registry.reserve(0, CARD, 3 * GiB)
    try:
        path = registry_dir / "gpu0.json"
        good = path.read_text()
        path.write_text(good[: len(good) // 2])  # damaged
        with pytest.raises(tf.errors.DataLossError):
            card_registry.reserve(0, CARD, 3 * GiB)
        path.write_text(good)
        with pytest.raises(tf.errors.ResourceExhaustedError):
            card_registry.reserve(0, CARD, 3 * GiB)
        assert card_registry.used_bytes(0) == 3 * GiB <= CARD
    finally:
        held.release()


@pytest.mark.parametrize("bad", [-1, -5 * GiB, 1.5, "3G", None, True])
def test_bad_byte_counts_are_invalid_arguments(bad):
    with pytest.raises(tf.errors.InvalidArgumentError, match="number of bytes >= 0, got"):
        card_registry.reserve(0, CARD, bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="capacity"):
        card_registry.reserve(0, bad, 1)
    with card_registry.reserve(0, CARD, 1) as r:
        with pytest.raises(tf.errors.InvalidArgumentError, match="new_total"):
            r.grow(bad)
        assert card_registry.used_bytes(0) == 1


def test_unusable_state_folder_is_a_tf_error_naming_it(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    monkeypatch.setenv("MINITF_STATE_DIR", str(not_a_dir))
    with pytest.raises(tf.errors.UnavailableError, match="MINITF_STATE_DIR=%s" % not_a_dir):
        card_registry.usage(0)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(card_registry.os, "open", denied)
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        card_registry.reserve(0, CARD, 1)
    assert "MINITF_STATE_DIR=%s" % (tmp_path / "state") in str(e.value)
    assert "Permission denied" in str(e.value)


def test_registry_is_written_atomically(registry_dir, monkeypatch):
    """A write that fails half way leaves the previous file whole and no temporary file."""
    card_registry.reserve(0, CARD, GiB).release()
    path = registry_dir / "gpu0.json"
    before = path.read_text()

    real_open = open

    class HalfFile:  # a disk that fills up half way through the write
        def __init__(self, *args):
            self._f = real_open(*args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

        def write(self, data):
            self._f.write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(file_io, "open", HalfFile, raising=False)
    with pytest.raises(tf.errors.UnavailableError, match="No space left on device"):
        card_registry.reserve(0, CARD, GiB)
    assert path.read_text() == before
    assert sorted(p.name for p in registry_dir.iterdir()) == ["gpu0.json", "gpu0.lock"]


HOLDER = r"""
import sys
from minitf.runtime import card_registry
with card_registry._card_lock(card_registry.state_dir(), 0):
    print("holding", flush=True)
    sys.stdin.read()          # a process stuck while it holds the card's lock
"""


def test_lock_wait_times_out_naming_the_holder(registry_dir, monkeypatch):
    env = dict(os.environ, PYTHONPATH=ROOT, MINITF_STATE_DIR=str(registry_dir))
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert p.stdout.readline() == b"holding\n"
        monkeypatch.setattr(card_registry, "LOCK_TIMEOUT_S", 0.3)
        for call in (lambda: card_registry.reserve(0, CARD, 1), lambda: smi.smi(io.StringIO())):
            with pytest.raises(tf.errors.DeadlineExceededError) as e:
                call()
            assert "held by pid %d" % p.pid in str(e.value)
            assert str(registry_dir / "gpu0.lock") in str(e.value)
    finally:
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        p.stdout.close()
    assert card_registry.usage(0) == []  # the lock came back with its holder's end
