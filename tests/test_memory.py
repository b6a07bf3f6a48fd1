"""Tests for GPU memory in minitf: ``minitf.runtime.allocator``, ``minitf.runtime.card_registry``
and ``minitf.smi``.

Book section: "Managing the GPU RAM".  TF grabs (nearly) all the memory of every visible card,
so a second program fails with ``failed to allocate 3.66G (3928915200 bytes) from device:
CUDA_ERROR_OUT_OF_MEMORY``; ``per_process_gpu_memory_fraction=0.4`` lets two programs share a
card and makes a third fail (Figure 12-4); ``allow_growth=True`` grows on demand and never
gives memory back (spec §5.3).  The registry tests use real processes: two children hold 40 %
of a card each while the test process, and a third child, try their luck.

Every test uses its own registry directory (``MINITF_STATE_DIR``), and every child process is
killed and reaped in a ``finally``.
"""

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitf
import minitf as tf
import minitf.smi as smi_mod
from helpers import wait_until
from minitf.framework import errors
from minitf.runtime import allocator, card_registry

MiB, GiB = 1 << 20, 1 << 30
CARD = 4 * GiB  # the default emulated card
SHARE = int(CARD * 0.4)  # 1717986918 bytes: per_process_gpu_memory_fraction=0.4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minitf.__file__)))
BOOK_TEXT = "failed to allocate 3.66G (3928915200 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.fixture(autouse=True)
def registry_dir(tmp_path, monkeypatch):
    """A private registry per test, so tests never see each other's (or a user's) cards."""
    d = tmp_path / "state"
    monkeypatch.setenv("MINITF_STATE_DIR", str(d))
    return d


# -- child processes ----------------------------------------------------------------------------

CHILD = r"""
import sys
import minitf as tf
from minitf.runtime import allocator, card_registry
opts = tf.GPUOptions(per_process_gpu_memory_fraction=%(fraction)r)
policy = allocator.GpuMemoryPolicy(%(card)d, opts, free_bytes=card_registry.free_bytes(0, %(card)d))
try:
    r = card_registry.reserve(0, %(card)d, policy.initial_bytes, owner=%(name)r)
except tf.errors.ResourceExhaustedError as e:
    sys.stderr.write("ResourceExhaustedError: %%s\n" %% e)
    sys.exit(3)
print("reserved", r.bytes, flush=True)
sys.stdin.read()          # hold the memory until the test closes our stdin (or kills us)
"""


def _child_env(registry_dir):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["MINITF_STATE_DIR"] = str(registry_dir)
    env["MINITF_EMULATED_GPUS"] = "2"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


@contextlib.contextmanager
def children(registry_dir):
    """Yields ``spawn(name, fraction) -> Popen``; kills and reaps every child on the way out."""
    procs = []

    def spawn(name, fraction=0.4):
        code = CHILD % {"fraction": fraction, "card": CARD, "name": name}
        p = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(registry_dir),
        )
        procs.append(p)
        return p

    try:
        yield spawn
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait(timeout=10)
            for f in (p.stdin, p.stdout, p.stderr):
                if f is not None:
                    f.close()


def wait_reserved(p, timeout=20):
    """The number of bytes a child reports having reserved (it then holds them)."""
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    assert ready, "child %d did not report in %ss" % (p.pid, timeout)
    line = p.stdout.readline().split()
    assert line and line[0] == "reserved", (line, p.stderr.read() if p.poll() is not None else "")
    return int(line[1])


# -- human-readable sizes -----------------------------------------------------------------------


def test_human_readable_num_bytes_like_tf():
    """TF's HumanReadableNumBytes: the book's 3928915200 bytes are '3.66G'."""
    assert allocator.human_readable_num_bytes(3928915200) == "3.66G"
    assert allocator.human_readable_num_bytes(512) == "512B"
    assert allocator.human_readable_num_bytes(1536) == "1.5K"
    assert allocator.human_readable_num_bytes(858993460) == "819.20M"
    assert allocator.human_readable_num_bytes(4 * GiB) == "4.00G"
    assert allocator.human_readable_num_bytes(-2048) == "-2.0K"


# -- Allocator ----------------------------------------------------------------------------------


def test_allocator_accounting_and_peak():
    a = allocator.Allocator("GPU_0_bfc", GPU0, 100)
    t1 = a.allocate(40, op_name="x")
    t2 = a.allocate(50, op_name="y")
    assert (a.bytes_in_use, a.peak_bytes_in_use, a.num_allocs, a.capacity) == (90, 90, 2, 100)
    a.free(t1)
    assert a.bytes_in_use == 50 and a.peak_bytes_in_use == 90
    t3 = a.allocate(30)
    assert a.bytes_in_use == 80 and a.peak_bytes_in_use == 90 and a.num_allocs == 3
    assert [x[0] for x in a.live_allocations()] == [t2, t3]
    stats = a.stats()
    assert stats["bytes_limit"] == 100 and stats["largest_alloc_size"] == 50
    assert stats["live_allocations"] == 2
    a.free(t2)
    a.free(t3)
    assert a.bytes_in_use == 0 and a.peak_bytes_in_use == 90
    with pytest.raises(ValueError, match="already freed"):
        a.free(t3)
    with pytest.raises(ValueError):
        a.allocate(-1)
    assert a.allocate(0) and a.bytes_in_use == 0  # empty tensors are fine


def test_allocator_oom_text_like_tf():
    """The text of TF's OOM error, with the sizes; nothing is allocated by a failed call."""
    a = allocator.Allocator("GPU_0_bfc", GPU0, 8 * MiB)
    a.allocate(1 * MiB)
    with pytest.raises(errors.ResourceExhaustedError) as e:
        a.allocate(2048 * 2048 * 4, op_name="MatMul", shape=(2048, 2048), dtype_name=tf.float32)
    assert str(e.value) == (
        "OOM when allocating tensor with shape[2048,2048] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc "
        "(requested 16777216 bytes, in use 1048576 of 8388608 bytes)"
    )
    assert e.value.error_code == errors.RESOURCE_EXHAUSTED
    assert a.bytes_in_use == 1 * MiB and a.num_allocs == 1


def test_allocator_oom_text_without_shape_or_type():
    a = allocator.Allocator("GPU_1_bfc", "/job:localhost/replica:0/task:0/device:GPU:1", 10)
    with pytest.raises(errors.ResourceExhaustedError) as e:
        a.allocate(11)
    assert str(e.value) == (
        "OOM when allocating tensor on /job:localhost/replica:0/task:0/"
        "device:GPU:1 by allocator GPU_1_bfc (requested 11 bytes, in use "
        "0 of 10 bytes)"
    )
    with pytest.raises(errors.ResourceExhaustedError, match=r"tensor of type double on"):
        a.allocate(11, dtype_name="float64")
    with pytest.raises(errors.ResourceExhaustedError, match=r"shape\[\] and type int32 on"):
        a.allocate(11, shape=(), dtype_name="int32")


def test_allocator_usage_report_names_ops():
    a = allocator.Allocator("GPU_0_bfc", GPU0, 100 * MiB)
    a.allocate(4 * MiB, op_name="weights")
    a.allocate(4 * MiB, op_name="weights")
    a.allocate(1 * MiB, op_name="bias")
    report = a.usage_report().splitlines()
    assert report == [
        "Current usage from device: %s, allocator: GPU_0_bfc" % GPU0,
        "  8.00M from weights",
        "  1.00M from bias",
    ]


def test_allocator_is_thread_safe():
    a = allocator.Allocator("GPU_0_bfc", GPU0, 1000)

    def work():
        for _ in range(300):
            a.free(a.allocate(7))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert a.bytes_in_use == 0 and a.num_allocs == 2400
    assert 7 <= a.peak_bytes_in_use <= 56


def test_allocator_grow_to_never_shrinks():
    a = allocator.Allocator("GPU_0_bfc", GPU0, 0)
    with pytest.raises(errors.ResourceExhaustedError):
        a.allocate(1)
    assert a.grow_to(64) == 64
    a.allocate(64)
    assert a.grow_to(10) == 64 and a.capacity == 64


# -- gpu_options -> bytes -----------------------------------------------------------------------


def test_default_takes_all_free_memory_minus_a_reserve():
    """Fraction unset: all free memory minus 225 MiB (< 2 GiB free) or max(300 MiB, 5 %)."""
    assert allocator.reservation_size(CARD, tf.GPUOptions()) == CARD - 300 * MiB
    assert allocator.reservation_size(CARD, None) == CARD - 300 * MiB
    big = 16 * GiB
    assert allocator.reservation_size(big, None) == big - int(big * 0.05)
    assert allocator.reservation_size(CARD, None, free_bytes=1 * GiB) == 1 * GiB - 225 * MiB
    # less free memory than the reserve: TF then takes what is there
    assert allocator.reservation_size(CARD, None, free_bytes=100 * MiB) == 100 * MiB
    assert allocator.reservation_size(CARD, None, free_bytes=0) == 0
    assert allocator.min_system_memory(2 * GiB - 1) == 225 * MiB
    assert allocator.min_system_memory(2 * GiB) == 300 * MiB


def test_fraction_is_of_the_total_memory():
    """0.4 of a 4 GiB card, free or not (the reservation is what fails when it is not)."""
    opts = tf.GPUOptions(per_process_gpu_memory_fraction=0.4)
    assert allocator.reservation_size(CARD, opts) == SHARE == 1717986918
    assert allocator.reservation_size(CARD, opts, free_bytes=0) == SHARE
    config = tf.ConfigProto()
    config.gpu_options.per_process_gpu_memory_fraction = 1.0
    assert allocator.reservation_size(CARD, config.gpu_options) == CARD


def test_allow_growth_starts_at_zero_with_the_same_limit():
    p = allocator.GpuMemoryPolicy(CARD, tf.GPUOptions(allow_growth=True))
    assert p.initial_bytes == 0 and p.limit_bytes == CARD - 300 * MiB and p.allow_growth
    p = allocator.GpuMemoryPolicy(
        CARD, tf.GPUOptions(allow_growth=True, per_process_gpu_memory_fraction=0.4)
    )
    assert p.initial_bytes == 0 and p.limit_bytes == SHARE
    assert allocator.reservation_size(CARD, tf.GPUOptions(allow_growth=True)) == 0


@pytest.mark.parametrize("bad", [1.5, 2.0, -0.1, float("nan")])
def test_bad_fractions_are_refused(bad):
    with pytest.raises(errors.InvalidArgumentError) as e:
        allocator.reservation_size(CARD, tf.GPUOptions(per_process_gpu_memory_fraction=bad))
    assert "per_process_gpu_memory_fraction=%r" % bad in str(e.value)
    if bad > 1:
        assert "unified memory" in str(e.value)


def test_memory_limit_rules():
    assert allocator.reservation_size(CARD, None, memory_limit=1 * GiB) == 1 * GiB
    with pytest.raises(errors.InvalidArgumentError, match="larger than the GPU's memory"):
        allocator.reservation_size(CARD, None, memory_limit=CARD + 1)
    with pytest.raises(errors.InvalidArgumentError, match=">= 0"):
        allocator.reservation_size(CARD, None, memory_limit=-1)
    with pytest.raises(errors.InvalidArgumentError, match="It's invalid to set"):
        allocator.reservation_size(
            CARD, tf.GPUOptions(per_process_gpu_memory_fraction=0.5), memory_limit=GiB
        )


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(0, 1 << 40), fraction=st.floats(0.0, 1.0), free=st.integers(0, 1 << 40))
def test_policy_never_exceeds_the_card(capacity, fraction, free):
    p = allocator.GpuMemoryPolicy(
        capacity, tf.GPUOptions(per_process_gpu_memory_fraction=fraction), free_bytes=free
    )
    assert 0 <= p.limit_bytes <= capacity
    if fraction > 0:
        assert p.limit_bytes == int(capacity * fraction)
    else:
        assert p.limit_bytes <= min(free, capacity)


def test_next_region_doubles_as_bfc_extend_does():
    assert allocator.next_region(2 * MiB, 1) == (2 * MiB, 4 * MiB)  # fits: next one doubles
    assert allocator.next_region(4 * MiB, 4 * MiB) == (4 * MiB, 8 * MiB)
    assert allocator.next_region(16 * MiB, 64 * MiB) == (64 * MiB, 64 * MiB)  # doubled to fit


class _Held:
    """A stand-in card reservation (no registry): just its bytes."""

    card_id = 0

    def __init__(self):
        self.bytes = 0

    def grow(self, new_total):
        self.bytes = max(self.bytes, new_total)
        return self.bytes


def _grown(sizes_per_step, limit=1 << 40):
    """The totals held after each step of ``sizes_per_step`` (each step's tensors live together,
    then die), with TF's BFC regions."""
    r = _Held()
    growth = allocator.BfcGrowth(r, limit)
    a = allocator.Allocator("GPU_0_bfc", GPU0, 0, grow=growth)
    totals = []
    for sizes in sizes_per_step:
        tokens = [a.allocate(n) for n in sizes]
        for t in tokens:
            a.free(t)
        totals.append(a.capacity // MiB)
    return totals, growth.regions


def test_allow_growth_total_is_the_sum_of_doubling_regions():
    """The notebook 02 program (steps of n x n floats, the `ones` and the product alive at
    once): TF's BFC allocator holds 2, 14, 142 MiB - the sum of its regions - not 2/16/256."""
    steps = [[256 * 256 * 4] * 2, [1024 * 1024 * 4] * 2, [4096 * 4096 * 4] * 2, [512 * 512 * 4]]
    totals, regions = _grown(steps)
    assert totals == [2, 14, 142, 142]  # never given back
    assert [r // MiB for r in regions] == [2, 4, 8, 64, 64]


def test_allow_growth_backs_off_to_the_request_when_the_region_does_not_fit():
    """Like BFC's backpedal: the card has room for the tensor but not for the whole region."""

    class Card(_Held):
        def grow(self, new_total):
            if new_total > 10 * MiB:  # another program holds the rest of the card
                raise errors.ResourceExhaustedError(None, None, "CUDA_ERROR_OUT_OF_MEMORY")
            return super().grow(new_total)

    r = Card()
    growth = allocator.BfcGrowth(r, 1 << 30)
    a = allocator.Allocator("GPU_0_bfc", GPU0, 0, grow=growth)
    a.allocate(3 * MiB)  # a 4 MiB region
    a.allocate(5 * MiB)  # an 8 MiB region would need 12 MiB in all: 5 MiB instead
    assert [n // MiB for n in growth.regions] == [4, 5] and a.capacity == 9 * MiB
    with pytest.raises(errors.ResourceExhaustedError):
        a.allocate(2 * MiB)  # not even the request fits now


def test_allow_growth_stops_at_the_limit():
    with pytest.raises(errors.ResourceExhaustedError, match="OOM when allocating") as e:
        _grown([[3 * MiB], [3 * MiB, 3 * MiB]], limit=6 * MiB)
    assert "may hold at most 6.00M" in str(e.value.__cause__)


# -- the registry, in one process ---------------------------------------------------------------


def test_reserve_usage_release(registry_dir):
    r = card_registry.reserve(0, CARD, SHARE, owner="train.py")
    assert r.bytes == SHARE and r.card_id == 0
    (entry,) = card_registry.usage(0)
    assert entry["pid"] == os.getpid() and entry["bytes"] == SHARE
    assert entry["name"] == "train.py" and entry["sessions"] == 1
    assert entry["start_time"] == card_registry.process_start_time()
    assert card_registry.usage(1) == [] and card_registry.free_bytes(0, CARD) == CARD - SHARE
    assert (registry_dir / "gpu0.json").exists()
    r.set_sessions(3)
    assert card_registry.usage(0)[0]["sessions"] == 3
    r.release()
    r.release()  # idempotent
    assert card_registry.usage(0) == [] and r.released
    with card_registry.reserve(1, CARD, 10) as r2:
        assert card_registry.used_bytes(1) == 10
    assert card_registry.used_bytes(1) == 0 and r2.released


def test_reserve_failure_has_the_books_text_free_memory_and_holders():
    holder = card_registry.reserve(0, CARD, 1 * GiB, owner="first-program")
    try:
        with pytest.raises(errors.ResourceExhaustedError) as e:
            card_registry.reserve(0, CARD, 3928915200, owner="second-program")
        msg = str(e.value)
        assert msg.splitlines()[0] == BOOK_TEXT
        assert "3.00G free of 4.00G" in msg
        assert "pid %d (first-program) 1.00G" % os.getpid() in msg
        assert "per_process_gpu_memory_fraction" in msg and "CUDA_VISIBLE_DEVICES" in msg
        assert len(card_registry.usage(0)) == 1  # the failed attempt left nothing
    finally:
        holder.release()


def test_concurrent_reservations_never_overcommit():
    """Threads racing for 1 GiB each of a 4 GiB card: exactly four win."""
    won, lost = [], []

    def take():
        try:
            won.append(card_registry.reserve(0, CARD, GiB))
        except errors.ResourceExhaustedError:
            lost.append(1)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(won) == 4 and len(lost) == 4
        assert card_registry.used_bytes(0) == CARD
    finally:
        for r in won:
            r.release()


def test_reused_pid_is_not_trusted(registry_dir):
    """An entry whose pid is alive but started at another time is a dead process's (a damaged
    file is an error: tests/test_card_registry_faults.py)."""
    r = card_registry.reserve(0, CARD, GiB)
    path = registry_dir / "gpu0.json"
    state = json.loads(path.read_text())
    state["entries"][0]["start_time"] += 12345  # "same pid, another process"
    path.write_text(json.dumps(state))
    assert card_registry.usage(0) == []
    assert json.loads(path.read_text())["entries"] == []  # reclaimed in the file too
    assert card_registry.reserve(0, CARD, CARD).bytes == CARD
    r.release()


def test_clear_forgets_every_card():
    card_registry.reserve(0, CARD, 1)
    card_registry.reserve(1, CARD, 2)
    card_registry.clear(1)
    assert card_registry.used_bytes(0) == 1 and card_registry.used_bytes(1) == 0
    card_registry.clear()
    assert card_registry.used_bytes(0) == 0


def test_allow_growth_grows_and_never_shrinks():
    """allow_growth: the reservation follows the allocator up, never down."""
    policy = allocator.GpuMemoryPolicy(CARD, tf.GPUOptions(allow_growth=True))
    r = card_registry.reserve(0, CARD, policy.initial_bytes)
    other = None
    try:
        assert r.bytes == 0 and card_registry.usage(0)[0]["bytes"] == 0
        a = allocator.Allocator(
            "GPU_0_bfc", GPU0, r.bytes, grow=allocator.growth_callback(r, policy.limit_bytes)
        )
        t1 = a.allocate(1 * MiB)
        assert r.bytes == 2 * MiB == a.capacity
        t2 = a.allocate(3 * MiB)  # no room left in the 2 MiB region: a second one, of 4 MiB
        assert r.bytes == 6 * MiB == a.capacity == card_registry.used_bytes(0)
        a.free(t1)
        a.free(t2)
        assert a.bytes_in_use == 0
        assert r.bytes == 6 * MiB == card_registry.used_bytes(0)  # nothing given back
        assert r.grow(1 * MiB) == 6 * MiB  # growing down does nothing
        # another program takes the rest of the card: growth now fails with the driver's error
        other = card_registry.reserve(0, CARD, CARD - 6 * MiB, owner="greedy")
        with pytest.raises(errors.ResourceExhaustedError) as e:
            a.allocate(8 * MiB, shape=(2 * MiB,), dtype_name="float32")
        assert str(e.value).startswith(
            "OOM when allocating tensor with shape[2097152] and type float on " + GPU0
        )
        # the next region (8 MiB, which holds the request) does not fit on the full card
        cause = str(e.value.__cause__)
        assert cause.startswith(
            "failed to allocate 8.00M (8388608 bytes) from device: "
            "CUDA_ERROR_OUT_OF_MEMORY\nGPU 0: 0B free of 4.00G"
        )
        assert "pid %d (greedy) 3.99G" % os.getpid() in cause
        with pytest.raises(errors.ResourceExhaustedError, match="greedy"):
            r.grow(7 * MiB)
        assert r.bytes == 6 * MiB
    finally:
        r.release()
        if other is not None:
            other.release()


# -- the registry, across real processes --------------------------------------------------------


def test_two_processes_fit_a_third_fails(registry_dir):
    """Figure 12-4: two programs with fraction 0.4 share a 4 GiB card; a third one fails."""
    with children(registry_dir) as spawn:
        p1, p2 = spawn("program-1"), spawn("program-2")
        assert wait_reserved(p1) == SHARE
        assert wait_reserved(p2) == SHARE
        holders = {e["pid"]: e for e in card_registry.usage(0)}
        assert set(holders) == {p1.pid, p2.pid}
        assert holders[p1.pid]["name"] == "program-1"

        # a third program (a real one) fails and says why
        p3 = spawn("program-3")
        assert p3.wait(timeout=20) == 3
        err = p3.stderr.read()
        assert (
            "ResourceExhaustedError: failed to allocate 1.60G (1717986918 bytes) from "
            "device: CUDA_ERROR_OUT_OF_MEMORY" in err
        )
        assert "819.20M free of 4.00G" in err
        assert "pid %d (program-1) 1.60G" % p1.pid in err
        assert "pid %d (program-2) 1.60G" % p2.pid in err

        # and so does this process
        with pytest.raises(errors.ResourceExhaustedError, match="CUDA_ERROR_OUT_OF_MEMORY"):
            card_registry.reserve(
                0,
                CARD,
                allocator.reservation_size(
                    CARD, tf.GPUOptions(per_process_gpu_memory_fraction=0.4)
                ),
            )

        # smi shows both programs, in-process and from the command line
        (card0, card1) = smi_mod.smi_data()
        assert card0["memory_used"] == 2 * SHARE and card0["memory_total"] == CARD
        # listed in the order they reserved (not by pid: pids wrap, and a notebook's listing
        # must not change with them)
        created = {e["pid"]: e["created"] for e in card_registry.usage(0)}
        want = [(p1.pid, "program-1", SHARE), (p2.pid, "program-2", SHARE)]
        assert [(p["pid"], p["name"], p["memory"]) for p in card0["processes"]] == sorted(
            want, key=lambda row: created[row[0]]
        )
        assert card1["processes"] == [] and card1["memory_used"] == 0
        out = subprocess.run(
            [sys.executable, "-m", "minitf.smi", "--json"],
            capture_output=True,
            text=True,
            timeout=30,
            env=_child_env(registry_dir),
        )
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data[0]["memory_used"] == 2 * SHARE
        assert {p["pid"] for p in data[0]["processes"]} == {p1.pid, p2.pid}

        # a program that exits normally gives its memory back (atexit) ...
        p1.stdin.close()
        assert p1.wait(timeout=20) == 0
        assert [e["pid"] for e in card_registry.usage(0)] == [p2.pid]
        # ... and a new one now fits
        r = card_registry.reserve(0, CARD, SHARE, owner="program-4")
        r.release()


def test_killed_process_memory_is_reclaimed(registry_dir):
    """A program killed with SIGKILL cannot clean up: the liveness check does it."""
    with children(registry_dir) as spawn:
        p = spawn("doomed", fraction=1.0)
        assert wait_reserved(p) == CARD
        with pytest.raises(errors.ResourceExhaustedError, match=r"pid %d \(doomed\)" % p.pid):
            card_registry.reserve(0, CARD, 1)
        os.kill(p.pid, signal.SIGKILL)
        # not reaped yet: a zombie holds no memory either
        assert wait_until(lambda: card_registry.usage(0) == [], 10)
        assert p.wait(timeout=10) == -signal.SIGKILL
        r = card_registry.reserve(0, CARD, CARD)
        assert r.bytes == CARD
        r.release()


# -- smi ----------------------------------------------------------------------------------------


def test_smi_table_shows_cards_processes_and_memory(capsys):
    r = card_registry.reserve(0, CARD, SHARE, owner="python3 train.py")
    try:
        buf = io.StringIO()
        assert smi_mod.smi(file=buf) is None
        text = buf.getvalue()
        smi_mod(file=None)  # the module itself is callable
        assert capsys.readouterr().out.splitlines()[1:] == text.splitlines()[1:]
    finally:
        r.release()
    lines = text.splitlines()
    table = [ln for ln in lines if ln.startswith(("|", "+"))]
    assert table and all(len(ln) == smi_mod.WIDTH for ln in table)  # fixed columns
    assert "MINITF-SMI" in lines[2] and "2 emulated GPU card(s)" in lines[2]
    assert "Memory-Usage" in text and "Processes:" in text
    card_rows = [ln for ln in table if "minitf emulated GPU" in ln]
    assert len(card_rows) == 2
    assert "1638MiB /    4096MiB" in card_rows[0] and "0MiB /    4096MiB" in card_rows[1]
    (proc_row,) = [ln for ln in table if "python3 train.py" in ln]
    assert proc_row.split()[1:3] == ["0", str(os.getpid())]
    assert proc_row.rstrip("|").split()[-1] == "1638MiB"
    assert "emulated" in lines[-2]


def test_smi_without_processes_and_without_cards(cpu_only):
    data = smi_mod.smi_data()
    assert data == []
    text = "\n".join(smi_mod.smi_lines())
    assert "No GPU card" in text and "No running processes found" in text


def test_smi_data_sums_a_process_reservations():
    rs = [card_registry.reserve(1, CARD, 100 * MiB), card_registry.reserve(1, CARD, 28 * MiB)]
    try:
        card1 = smi_mod.smi_data()[1]
        assert card1["id"] == 1 and card1["bus_id"] == "0000:02:00.0" and card1["emulated"]
        assert card1["memory_used"] == 128 * MiB == card1["processes"][0]["memory"]
        assert card1["memory_free"] == CARD - 128 * MiB
        assert [p["pid"] for p in card1["processes"]] == [os.getpid()]
        assert card1["processes"][0]["sessions"] == 2
    finally:
        for r in rs:
            r.release()


def test_smi_command_line_table():
    out = subprocess.run(
        [sys.executable, "-m", "minitf.smi"],
        capture_output=True,
        text=True,
        timeout=30,
        env=_child_env(os.environ["MINITF_STATE_DIR"]),
    )
    assert out.returncode == 0, out.stderr
    assert "MINITF-SMI" in out.stdout and "No running processes found" in out.stdout
    assert out.stdout.count("minitf emulated GPU") == 2 and out.stderr == ""
