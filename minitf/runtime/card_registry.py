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
import numbers
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from minitf.framework import errors
from minitf.lib import file_io
from minitf.runtime.allocator import describe_size, human_readable_num_bytes

_thread_lock = threading.Lock()
_mine: dict[str, Reservation] = {}  # reservation id -> Reservation, for the atexit clean-up
_mine_lock = threading.Lock()


def state_dir() -> str:
    """Where the registry lives: ``$MINITF_STATE_DIR``, else ``/tmp/minitf-<uid>``."""
    return os.environ.get("MINITF_STATE_DIR") or "/tmp/minitf-%d" % os.getuid()


def byte_count(what: str, value: object) -> int:
    """``value`` as a number of bytes (an int >= 0); InvalidArgumentError naming ``what`` if it
    is not one."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise errors.InvalidArgumentError(
            None, None, "%s must be a number of bytes >= 0, got %r" % (what, value)
        )
    return int(value)


def _card_paths(directory: str, card_id: int) -> tuple[str, str]:
    card_id = byte_count("GPU card id", card_id)
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


def process_name() -> str:
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


# How long a process waits for another one's hold on a card's registry file before giving up
# (a real driver never hangs a process because another one is stuck; neither does minitf).
LOCK_TIMEOUT_S = 10.0
_FORMAT = "minitf-card-registry/1"
RESET_HINT = (
    "To reset it, make sure no minitf program uses the emulated cards, then run "
    "`python -m minitf.smi --reset` (or delete the file)."
)


def _os_error(what: str, directory: str, e: OSError) -> errors.OpError:
    """An OSError on the state folder as a TF error naming ``MINITF_STATE_DIR``."""
    denied = isinstance(e, PermissionError)
    cls = errors.PermissionDeniedError if denied else errors.UnavailableError
    return cls(
        None,
        None,
        "Cannot %s the emulated GPU registry in MINITF_STATE_DIR=%s: %s. Point MINITF_STATE_DIR "
        "at a folder this user can write." % (what, directory, e.strerror or e),
    )


def _lock_holder(fd: int) -> str:
    """What the lock file says about the process holding it (written by each holder)."""
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        pid = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return "a process that has not written its pid yet"
    return "pid %d" % pid


def _acquire_flock(fd: int, lock_path: str, card_id: int, timeout: float) -> None:
    """``flock`` with a deadline: DeadlineExceededError naming the holder's pid after it."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise errors.DeadlineExceededError(
                    None,
                    None,
                    "Timed out after %g s waiting for the lock of emulated GPU %d's registry (%s), "
                    "held by %s. If that process is stuck, stop it (kill <pid>); its hold ends "
                    "with it." % (timeout, card_id, lock_path, _lock_holder(fd)),
                ) from None
            time.sleep(delay)  # polling a file lock: there is nothing to wait on
            delay = min(delay * 2, 0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % os.getpid(), 0)


@contextlib.contextmanager
def _card_lock(directory: str, card_id: int) -> Iterator[str]:
    """Exclusive access to one card's registry file (a thread lock, then ``flock``), waited for
    at most LOCK_TIMEOUT_S; yields the registry file's path."""
    path, lock_path = _card_paths(directory, card_id)
    timeout = LOCK_TIMEOUT_S
    if not _thread_lock.acquire(timeout=timeout):
        raise errors.DeadlineExceededError(
            None,
            None,
            "Timed out after %g s waiting for another thread of pid %d to finish "
            "with emulated GPU %d's registry (%s)" % (timeout, os.getpid(), card_id, lock_path),
        )
    try:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise _os_error("open", directory, e) from None
        try:
            _acquire_flock(fd, lock_path, card_id, timeout)
            yield path
        finally:
            os.close(fd)  # closing the descriptor drops the flock
    finally:
        _thread_lock.release()


@contextlib.contextmanager
def _locked_card(directory: str, card_id: int) -> Iterator[dict[str, Any]]:
    """One card's registry, read and validated under its lock; written back if changed."""
    with _card_lock(directory, card_id) as path:
        state = _load(path, directory)
        before = json.dumps(state, sort_keys=True)
        state["entries"] = [e for e in state["entries"] if _is_alive(e)]  # reclaim the dead's
        try:
            yield state
        finally:  # (callers change nothing before they may fail)
            if json.dumps(state, sort_keys=True) != before:
                _store(path, state, directory)


def _damaged(path: str, directory: str, why: str) -> errors.DataLossError:
    return errors.DataLossError(
        None,
        None,
        "The emulated GPU registry file %s (in MINITF_STATE_DIR=%s) is damaged or not minitf's: "
        "%s. minitf does not guess which memory is reserved. %s"
        % (path, directory, why, RESET_HINT),
    )


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _entry_problem(e: object) -> str | None:
    """Why a registry entry is not one minitf wrote (None if it is)."""
    if not isinstance(e, dict):
        return "an entry is not an object"
    if not isinstance(e.get("id"), str) or not isinstance(e.get("name", ""), str):
        return "an entry has no id"
    if not _is_count(e.get("pid")) or not e["pid"]:
        return "an entry has no valid pid"
    if not _is_count(e.get("bytes")):
        return "an entry reserves %r bytes" % (e.get("bytes"),)
    if not (e.get("start_time") is None or _is_count(e["start_time"])):
        return "an entry has an invalid start time"
    if not _is_count(e.get("sessions", 0)):
        return "an entry has an invalid session count"
    return None


def _validate(state: object) -> str | None:
    """Why ``state`` is not a registry minitf wrote (None if it is)."""
    if not isinstance(state, dict) or not isinstance(state.get("entries"), list):
        return "it holds no list of entries"
    if state.get("format", _FORMAT) != _FORMAT:
        return "its format is %r, not %r" % (state.get("format"), _FORMAT)
    for e in state["entries"]:
        problem = _entry_problem(e)
        if problem:
            return problem
    capacity = state.get("capacity")
    if capacity is not None and not _is_count(capacity):
        return "its capacity is %r" % (capacity,)
    held = sum(e["bytes"] for e in state["entries"])
    if capacity is not None and held > capacity:
        return "its entries reserve %d bytes of a %d-byte card" % (held, capacity)
    return None


def _load(path: str, directory: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {"entries": []}
    except OSError as e:
        raise _os_error("read", directory, e) from None
    try:
        state = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _damaged(path, directory, "it is not JSON (%s)" % e) from None
    problem = _validate(state)
    if problem:
        raise _damaged(path, directory, problem)
    return state


def _store(path: str, state: dict[str, Any], directory: str) -> None:
    """Writes the registry atomically: a temporary file, then a rename."""
    state["format"] = _FORMAT
    try:  # readers see the old or the new file, never half
        file_io.atomic_write_string_to_file(path, json.dumps(state, indent=1, sort_keys=True))
    except OSError as e:
        raise _os_error("write", directory, e) from None


def oldest_first(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reservations in the order they were made (not by pid: pids wrap, and a listing a
    notebook shows must not change with them)."""
    return sorted(entries, key=lambda e: (e.get("created", 0), e["pid"]))


def _describe_holders(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "nobody holds any of it"
    parts = [
        "pid %d (%s) %s" % (e["pid"], e.get("name", "?"), human_readable_num_bytes(e["bytes"]))
        for e in oldest_first(entries)
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
        new_total = byte_count("new_total", new_total)
        with self._lock:
            if self._released:
                raise errors.FailedPreconditionError(
                    None, None, "GPU %d reservation %s was released" % (self.card_id, self.id)
                )
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
            if not os.path.isdir(self._dir):
                return  # the state folder was removed (a notebook's temporary one at exit)
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
    nbytes, capacity = byte_count("nbytes", nbytes), byte_count("capacity", capacity)
    owner = owner or process_name()
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
    """Forgets every reservation of one card (all cards with None), damaged registry files
    included (``python -m minitf.smi --reset``).  For tests and for a teaching machine in a bad
    state; running processes are not told."""
    directory = state_dir()
    if card_id is None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        except OSError as e:
            raise _os_error("list", directory, e) from None
        ids = sorted(
            int(n[3:-5])
            for n in names
            if n.startswith("gpu") and n.endswith(".json") and n[3:-5].isdigit()
        )
    else:
        ids = [int(card_id)]
    for i in ids:  # a damaged file is not read: clear() is how it is reset
        with _card_lock(directory, i) as path:
            _store(path, {"entries": []}, directory)


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
