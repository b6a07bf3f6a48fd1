"""The emulated cards' machine-wide registry: the emulator's stand-in for the CUDA driver.

Book section: "Managing the GPU RAM".  This is emulation machinery, not TensorFlow: on a real
machine the CUDA driver knows which process holds how much of each card, refuses memory that
is not free (``failed to allocate 3.66G (3928915200 bytes) from device:
CUDA_ERROR_OUT_OF_MEMORY``) and takes back the memory of a process that ends.  Emulated cards
have no driver, so minitf keeps a small **registry of reservations** shared by every process of
the machine (:func:`reserve`): one JSON file per card in ``MINITF_STATE_DIR`` (default
``/tmp/minitf-<uid>``), guarded by ``flock``.  A process that exits gives its memory back
(``atexit``); one that dies without cleaning up (``kill -9``) is noticed by a liveness check on
every read, exactly as the driver frees the memory of a dead process.

How much a process asks for is TF's business (``runtime/allocator.py``: the gpu_options in
bytes, allow_growth's steps); ``minitf.smi`` prints what this registry holds.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from minitf.framework import errors
from minitf.runtime.allocator import describe_size, human_readable_num_bytes

_thread_lock = threading.Lock()
_mine: dict[str, Reservation] = {}  # reservation id -> Reservation, for the atexit clean-up
_mine_lock = threading.Lock()


def state_dir() -> str:
    """Where the registry lives: ``$MINITF_STATE_DIR``, else ``/tmp/minitf-<uid>``."""
    return os.environ.get("MINITF_STATE_DIR") or "/tmp/minitf-%d" % os.getuid()


def _card_paths(directory: str, card_id: int) -> tuple[str, str]:
    card_id = int(card_id)
    return (
        os.path.join(directory, "gpu%d.json" % card_id),
        os.path.join(directory, "gpu%d.lock" % card_id),
    )


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) from ``/proc/<pid>/stat``; None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain ') '.
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0].decode(), int(fields[19])  # field 3 (state) and field 22 (starttime)


_HAVE_PROC = os.path.exists("/proc/self/stat")


def process_start_time(pid: int | None = None) -> int | None:
    """A process's start time (field 22 of ``/proc/<pid>/stat``): with the pid it names one
    process for good, even after the pid is reused.  None where there is no /proc."""
    st = _proc_stat(os.getpid() if pid is None else pid) if _HAVE_PROC else None
    return None if st is None else st[1]


def _is_alive(entry: dict[str, Any]) -> bool:
    pid = entry.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if not _HAVE_PROC:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    st = _proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):  # gone, or a zombie waiting to be reaped
        return False
    start = entry.get("start_time")
    return start is None or start == st[1]


def _default_owner() -> str:
    """A short process name for the registry and minitf.smi: ``python3 train.py``."""
    exe = os.path.basename(sys.executable or "python")
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 in ("", "-c"):
        return exe + (" -c" if argv0 == "-c" else "")
    if argv0 == "-m" or argv0.endswith("__main__.py"):
        return exe + " -m"
    return "%s %s" % (exe, os.path.basename(argv0))


def _cmdline() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
        return " ".join(p.decode(errors="replace") for p in parts if p)
    except OSError:
        return " ".join([sys.executable] + sys.argv)


@contextlib.contextmanager
def _locked_card(directory: str, card_id: int) -> Iterator[dict[str, Any]]:
    """Exclusive access to one card's registry file: a thread lock, then ``flock``."""
    path, lock_path = _card_paths(directory, card_id)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with _thread_lock:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = _load(path)
            before = json.dumps(state, sort_keys=True)
            live = [e for e in state["entries"] if _is_alive(e)]
            state["entries"] = live  # a dead process's reservation is reclaimed
            try:
                yield state
            finally:  # (callers change nothing before they may fail)
                if json.dumps(state, sort_keys=True) != before:
                    _store(path, state)
        finally:
            os.close(fd)  # closing the descriptor drops the flock


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            state = json.load(f)
        if not isinstance(state, dict) or not isinstance(state.get("entries"), list):
            raise ValueError("not a registry file")
    except FileNotFoundError:
        state = {"entries": []}
    except ValueError:
        # A damaged file (a crash mid-write cannot cause one: writes are atomic) is reset.
        state = {"entries": []}
    state["entries"] = [e for e in state["entries"] if isinstance(e, dict)]
    return state


def _store(path: str, state: dict[str, Any]) -> None:
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)  # readers see the old or the new file, never half


def _describe_holders(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "nobody holds any of it"
    parts = [
        "pid %d (%s) %s" % (e["pid"], e.get("name", "?"), human_readable_num_bytes(e["bytes"]))
        for e in sorted(entries, key=lambda e: (e["pid"], e.get("created", 0)))
    ]
    return "held by " + ", ".join(parts)


def _oom(
    card_id: int, capacity: int, request: int, holders: list[dict[str, Any]]
) -> errors.ResourceExhaustedError:
    """The error of a reservation of ``request`` more bytes that ``holders`` leave no room for."""
    held = sum(e["bytes"] for e in holders)
    free = max(0, capacity - held)
    return errors.ResourceExhaustedError(
        None,
        None,
        "failed to allocate %s from device: CUDA_ERROR_OUT_OF_MEMORY\n"
        "GPU %d: %s free of %s in total; the rest is %s. Let each program take a share "
        "(gpu_options.per_process_gpu_memory_fraction, allow_growth) or give it other cards "
        "(CUDA_VISIBLE_DEVICES); minitf.smi() shows who holds what."
        % (
            describe_size(request),
            card_id,
            human_readable_num_bytes(free),
            human_readable_num_bytes(capacity),
            _describe_holders(holders),
        ),
    )


class Reservation:
    """This process's hold on part of one card (its "GPU region"), recorded in the registry.

    Book section: "Managing the GPU RAM".  Made by :func:`reserve`; :meth:`grow` is
    allow_growth (it only ever grows); :meth:`release` gives the memory back (also done for
    every live reservation when the interpreter exits).
    """

    def __init__(
        self, card_id: int, capacity: int, nbytes: int, owner: str, directory: str, rid: str
    ) -> None:
        self.card_id = int(card_id)
        self.capacity = int(capacity)
        self.owner = owner
        self.id = rid
        self._bytes = int(nbytes)
        self._dir = directory
        self._pid = os.getpid()
        self._released = False
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The bytes currently reserved."""
        return self._bytes

    @property
    def released(self) -> bool:
        return self._released

    def _entry(self, state: dict[str, Any]) -> dict[str, Any] | None:
        for e in state["entries"]:
            if e.get("id") == self.id:
                return e
        return None

    def grow(self, new_total: int) -> int:
        """allow_growth: raise this reservation to ``new_total`` bytes (a smaller value changes
        nothing: memory is never given back).  Fails like :func:`reserve` - naming the extra
        bytes asked for - when the card has not that much free.  Returns the new total."""
        new_total = int(new_total)
        with self._lock:
            if self._released:
                raise ValueError("GPU %d reservation %s was released" % (self.card_id, self.id))
            if new_total <= self._bytes:
                return self._bytes
            with _locked_card(self._dir, self.card_id) as state:
                mine = self._entry(state)
                others = [e for e in state["entries"] if e is not mine]
                if sum(e["bytes"] for e in others) + new_total > self.capacity:
                    raise _oom(
                        self.card_id, self.capacity, new_total - self._bytes, state["entries"]
                    )
                if mine is None:  # wiped by clear(): record it again
                    mine = _new_entry(self.id, self.owner, 0)
                    state["entries"].append(mine)
                mine["bytes"] = new_total
                state["capacity"] = self.capacity
            self._bytes = new_total
            return new_total

    def set_sessions(self, count: int) -> None:
        """Records how many sessions of this process use the reservation (shown by smi)."""
        with self._lock:
            if self._released:
                return
            with _locked_card(self._dir, self.card_id) as state:
                mine = self._entry(state)
                if mine is not None:
                    mine["sessions"] = int(count)

    def release(self) -> None:
        """Gives the memory back to the card (idempotent)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            with _mine_lock:
                _mine.pop(self.id, None)
            if os.getpid() != self._pid:
                return  # a forked child never releases its parent's memory
            with _locked_card(self._dir, self.card_id) as state:
                state["entries"] = [e for e in state["entries"] if e.get("id") != self.id]

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return "<Reservation GPU %d: %s by pid %d%s>" % (
            self.card_id,
            describe_size(self._bytes),
            self._pid,
            ", released" if self._released else "",
        )


def _new_entry(rid: str, owner: str, nbytes: int) -> dict[str, Any]:
    return {
        "id": rid,
        "pid": os.getpid(),
        "start_time": process_start_time(),
        "bytes": int(nbytes),
        "name": owner,
        "cmdline": _cmdline(),
        "sessions": 1,
        "created": time.time(),
    }


def reserve(card_id: int, capacity: int, nbytes: int, owner: str | None = None) -> Reservation:
    """Takes ``nbytes`` of card ``card_id`` (``capacity`` bytes in total) for this process.

    Book section: "Managing the GPU RAM".  Raises :class:`errors.ResourceExhaustedError` with
    the book's ``failed to allocate 3.66G (3928915200 bytes) from device:
    CUDA_ERROR_OUT_OF_MEMORY`` (with the actual amount), how much is free and who holds the
    rest, when the other live processes leave less than ``nbytes`` free.  ``owner``: the
    process name shown by ``minitf.smi`` (default: ``python3 <script>``).
    """
    nbytes, capacity = int(nbytes), int(capacity)
    if nbytes < 0:
        raise ValueError("cannot reserve a negative number of bytes (%d)" % nbytes)
    owner = owner or _default_owner()
    directory = state_dir()
    rid = uuid.uuid4().hex
    with _locked_card(directory, card_id) as state:
        others = state["entries"]
        if sum(e["bytes"] for e in others) + nbytes > capacity:
            raise _oom(int(card_id), capacity, nbytes, others)
        state["entries"].append(_new_entry(rid, owner, nbytes))
        state["capacity"] = capacity
    r = Reservation(card_id, capacity, nbytes, owner, directory, rid)
    with _mine_lock:
        _mine[rid] = r
    return r


def usage(card_id: int) -> list[dict[str, Any]]:
    """The live reservations of one card: dicts with ``pid``, ``start_time``, ``bytes``,
    ``name``, ``cmdline``, ``sessions``, ``id``, ``created``.  Entries of dead processes are
    removed from the registry on the way (their memory is reclaimed)."""
    with _locked_card(state_dir(), card_id) as state:
        return [dict(e) for e in state["entries"]]


def used_bytes(card_id: int) -> int:
    """Bytes of card ``card_id`` reserved by live processes."""
    return sum(e["bytes"] for e in usage(card_id))


def free_bytes(card_id: int, capacity: int) -> int:
    """Bytes of card ``card_id`` (``capacity`` in total) nobody has reserved."""
    return max(0, int(capacity) - used_bytes(card_id))


def clear(card_id: int | None = None) -> None:
    """Forgets every reservation of one card (all cards with None).  For tests and for a
    teaching machine in a bad state; running processes are not told."""
    directory = state_dir()
    if card_id is None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        ids = sorted(
            int(n[3:-5])
            for n in names
            if n.startswith("gpu") and n.endswith(".json") and n[3:-5].isdigit()
        )
    else:
        ids = [int(card_id)]
    for i in ids:
        with _locked_card(directory, i) as state:
            state["entries"] = []


def _release_all_at_exit() -> None:
    with _mine_lock:
        mine = list(_mine.values())
    for r in mine:
        if r._pid == os.getpid():
            try:
                r.release()
            except Exception:  # noqa: BLE001 - never fail the interpreter's exit
                pass


atexit.register(_release_all_at_exit)
