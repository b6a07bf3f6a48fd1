"""GPU memory: per-device accounting, the machine-wide card reservations, and the gpu_options.

Book section: "Managing the GPU RAM".  The section makes three points, and this module is where
minitf makes each of them happen:

1. By default a TF process grabs (nearly) all the memory of every GPU it can see at its first
   ``run()``, so a second program on the same card fails with
   ``failed to allocate 3.66G (3928915200 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY``.
   Emulated cards have no driver to refuse memory, so minitf keeps a small **registry of
   reservations** shared by every process of the machine (:func:`reserve`): one JSON file per
   card in ``MINITF_STATE_DIR`` (default ``/tmp/minitf-<uid>``), guarded by ``flock``.  A
   process that exits gives its memory back (``atexit``); one that dies without cleaning up
   (``kill -9``) is noticed by a liveness check on every read, exactly as the driver frees the
   memory of a dead process.
2. ``gpu_options.per_process_gpu_memory_fraction=0.4`` makes each process take 40 % of each
   card: two such programs fit, a third gets the error above (Figure 12-4).
   :class:`GpuMemoryPolicy` turns the options into a number of bytes.
3. ``gpu_options.allow_growth=True`` starts with nothing and grows on demand, but never gives
   memory back (:meth:`Reservation.grow`, :func:`next_growth`).

Inside a process, each device's :class:`Allocator` accounts for the tensors living in its
share of the card; going over raises TF's ``OOM when allocating tensor with shape[...]`` error.
"""

import atexit
import contextlib
import fcntl
import json
import math
import os
import sys
import threading
import time
import uuid

from minitf.framework import errors

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# TF's MinSystemMemory(): what the default (fraction unset) leaves to the rest of the system.
SMALL_CARD_FREE = 2 * GiB          # below this much free memory ...
SMALL_CARD_RESERVE = 225 * MiB     # ... leave 225 MiB
LARGE_CARD_MIN_RESERVE = 300 * MiB  # otherwise leave max(300 MiB, 5 % of the free memory)
LARGE_CARD_RESERVE_FRACTION = 0.05

GROWTH_FIRST_REGION = 2 * MiB      # allow_growth's first region (TF's BFC allocator: 2 MiB)


def human_readable_num_bytes(num_bytes):
    """TF's ``strings::HumanReadableNumBytes``: ``512B``, ``1.5K``, ``819.20M``, ``3.66G``.

    Whole units are divided out with integer division (as TF does), then the last step keeps
    two decimals (one for KiB).  ``human_readable_num_bytes(3928915200) == "3.66G"``.
    """
    num_bytes = int(num_bytes)
    sign = "-" if num_bytes < 0 else ""
    num_bytes = abs(num_bytes)
    if num_bytes < 1024:
        return "%s%dB" % (sign, num_bytes)
    units = "KMGTPE"
    i = 0
    while num_bytes >= 1024 * 1024 and i < len(units) - 1:
        num_bytes //= 1024
        i += 1
    return ("%s%.1f%s" if units[i] == "K" else "%s%.2f%s") % (sign, num_bytes / 1024.0, units[i])


def _size(num_bytes):
    """``3.66G (3928915200 bytes)``: how the registry's messages state an amount."""
    return "%s (%d bytes)" % (human_readable_num_bytes(num_bytes), num_bytes)


# =============================================================================================
# Per-device accounting
# =============================================================================================

def _type_string(dtype_name):
    """TF's name of an element type in messages: ``float`` for float32, ``double`` ..."""
    if dtype_name is None:
        return None
    dt = getattr(dtype_name, "base_dtype", dtype_name)
    if hasattr(dt, "type_string"):
        return dt.type_string
    try:
        from minitf.framework import dtypes
        return dtypes.as_dtype(dtype_name).base_dtype.type_string
    except Exception:  # noqa: BLE001 - any other spelling is shown as given
        return str(dtype_name)


def _shape_string(shape):
    """``shape[2048,2048]`` (``?`` for an unknown dimension, ``shape[]`` for a scalar)."""
    dims = getattr(shape, "dims", shape)
    if dims is None:
        return "shape[?]"
    out = []
    for d in dims:
        d = getattr(d, "value", d)
        out.append("?" if d is None else str(int(d)))
    return "shape[%s]" % ",".join(out)


class Allocator:
    """The memory accounting of one device (TF's ``GPU_0_bfc`` allocator, minus the bins).

    Book section: "Managing the GPU RAM".  ``capacity`` is the device's share of its card: all
    of it, a fraction of it, or - with ``allow_growth`` - what has been grown so far
    (:meth:`grow_to`).  ``allocate()`` hands out a token per live tensor; ``free()`` takes it
    back.  An allocation that does not fit raises :class:`errors.ResourceExhaustedError` with
    TF's text, e.g. ``OOM when allocating tensor with shape[2048,2048] and type float on
    /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc (requested 16777216
    bytes, in use 0 of 8388608 bytes)``.  The executor adds the ``[[node ...]]`` marker.

    ``grow``: optional callable ``grow(needed_capacity) -> new_capacity`` asked for more room
    before giving up (allow_growth: see :func:`growth_callback`); it may raise
    ResourceExhaustedError, which becomes the ``__cause__`` of the OOM error.

    Every method is thread-safe (the executor's threads allocate concurrently).
    """

    def __init__(self, name, device_name, capacity_bytes, grow=None):
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0, got %r" % (capacity_bytes,))
        self.name = name
        self.device_name = device_name
        self._capacity = int(capacity_bytes)
        self._grow = grow
        self._lock = threading.Lock()
        self._live = {}          # token -> (nbytes, op_name, shape, dtype_name)
        self._next_token = 1
        self._in_use = 0
        self._peak = 0
        self._num_allocs = 0
        self._largest = 0

    # -- the numbers TF's AllocatorStats reports --------------------------------------------
    @property
    def capacity(self):
        with self._lock:
            return self._capacity

    @property
    def bytes_in_use(self):
        with self._lock:
            return self._in_use

    @property
    def peak_bytes_in_use(self):
        with self._lock:
            return self._peak

    @property
    def num_allocs(self):
        """How many allocations were ever made (TF's ``num_allocs``), not how many are live."""
        with self._lock:
            return self._num_allocs

    def stats(self):
        """A snapshot like TF's ``AllocatorStats``: limit, in use, peak, count, largest."""
        with self._lock:
            return {"bytes_limit": self._capacity, "bytes_in_use": self._in_use,
                    "peak_bytes_in_use": self._peak, "num_allocs": self._num_allocs,
                    "largest_alloc_size": self._largest, "live_allocations": len(self._live)}

    def live_allocations(self):
        """``[(token, nbytes, op_name, shape, dtype_name)]`` of the tensors still allocated."""
        with self._lock:
            return [(t,) + v for t, v in sorted(self._live.items())]

    def usage_report(self):
        """What ``RunOptions(report_tensor_allocations_upon_oom=True)`` shows: bytes per op."""
        per_op = {}
        for _, nbytes, op_name, _, _ in self.live_allocations():
            key = op_name or "(unknown op)"
            per_op[key] = per_op.get(key, 0) + nbytes
        lines = ["Current usage from device: %s, allocator: %s" % (self.device_name, self.name)]
        for op_name, nbytes in sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append("  %s from %s" % (human_readable_num_bytes(nbytes), op_name))
        return "\n".join(lines)

    # -- allocation ---------------------------------------------------------------------------
    def _oom_message(self, nbytes, shape, dtype_name):
        what = "OOM when allocating tensor"
        type_str = _type_string(dtype_name)
        if shape is not None:
            what += " with " + _shape_string(shape)
            if type_str:
                what += " and type " + type_str
        elif type_str:
            what += " of type " + type_str
        return "%s on %s by allocator %s (requested %d bytes, in use %d of %d bytes)" % (
            what, self.device_name, self.name, nbytes, self._in_use, self._capacity)

    def allocate(self, nbytes, op_name=None, shape=None, dtype_name=None):
        """Accounts ``nbytes`` for a tensor; returns the token to :meth:`free` it with."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("cannot allocate a negative number of bytes (%d)" % nbytes)
        cause = None
        with self._lock:
            needed = self._in_use + nbytes
            if needed > self._capacity and self._grow is not None:
                try:
                    new_capacity = int(self._grow(needed))
                    if new_capacity > self._capacity:
                        self._capacity = new_capacity
                except errors.ResourceExhaustedError as e:
                    cause = e
            if needed > self._capacity:
                err = errors.ResourceExhaustedError(None, None,
                                                    self._oom_message(nbytes, shape, dtype_name))
                raise err from cause
            token = self._next_token
            self._next_token += 1
            self._live[token] = (nbytes, op_name, shape, dtype_name)
            self._in_use = needed
            self._peak = max(self._peak, needed)
            self._num_allocs += 1
            self._largest = max(self._largest, nbytes)
            return token

    def free(self, token):
        """Gives back the bytes of one allocation (each token exactly once)."""
        with self._lock:
            try:
                nbytes = self._live.pop(token)[0]
            except KeyError:
                raise ValueError("allocator %s: token %r is unknown or already freed"
                                 % (self.name, token)) from None
            self._in_use -= nbytes

    def grow_to(self, capacity):
        """Raises the capacity to ``capacity`` bytes (allow_growth); never lowers it.

        Returns the capacity after the call.
        """
        with self._lock:
            if capacity > self._capacity:
                self._capacity = int(capacity)
            return self._capacity

    def __repr__(self):
        return "<Allocator %s on %s: %d of %d bytes in use>" % (
            self.name, self.device_name, self.bytes_in_use, self.capacity)


# =============================================================================================
# gpu_options -> bytes
# =============================================================================================

def min_system_memory(available):
    """TF's ``MinSystemMemory``: what the default leaves to others on a card with ``available``
    free bytes: 225 MiB below 2 GiB free, else max(300 MiB, 5 % of the free memory)."""
    if available < SMALL_CARD_FREE:
        return SMALL_CARD_RESERVE
    return max(LARGE_CARD_MIN_RESERVE, int(available * LARGE_CARD_RESERVE_FRACTION))


class GpuMemoryPolicy:
    """How much of one card a process takes, from its ``gpu_options`` (spec §5.3).

    Book section: "Managing the GPU RAM".

    * ``per_process_gpu_memory_fraction`` unset (0): all the card's *free* memory, minus
      :func:`min_system_memory` (when there is more free memory than that reserve);
    * a fraction in (0, 1]: that fraction of the card's *total* memory (0.4 of a 4 GiB card is
      1717986918 bytes, whether or not it is free: the reservation is what fails);
    * > 1 (or < 0, or NaN): refused with InvalidArgumentError - TF would oversubscribe the card
      through CUDA unified memory, which emulated cards do not have;
    * ``memory_limit`` (bytes, TF's virtual-device limit) replaces the computation; larger than
      the card, negative, or combined with a fraction: InvalidArgumentError.

    Attributes: ``capacity`` (the card's total bytes), ``free`` (its free bytes when the policy
    was computed), ``fraction``, ``allow_growth``, ``limit_bytes`` (the most this process may
    ever hold on the card) and ``initial_bytes`` (what it reserves at its first run: the limit,
    or 0 with ``allow_growth`` - it then grows on demand up to the limit).
    """

    def __init__(self, capacity, gpu_options=None, free_bytes=None, memory_limit=None):
        capacity = int(capacity)
        if capacity < 0:
            raise errors.InvalidArgumentError(None, None, "a GPU's memory cannot be negative "
                                              "(%d bytes)" % capacity)
        free = capacity if free_bytes is None else max(0, min(int(free_bytes), capacity))
        fraction = float(getattr(gpu_options, "per_process_gpu_memory_fraction", 0.0) or 0.0)
        allow_growth = bool(getattr(gpu_options, "allow_growth", False))
        if math.isnan(fraction) or fraction < 0:
            raise errors.InvalidArgumentError(
                None, None, "gpu_options.per_process_gpu_memory_fraction=%r is invalid: it must "
                "be 0 (use all free memory) or a fraction in (0, 1]" % fraction)
        if fraction > 1:
            raise errors.InvalidArgumentError(
                None, None, "gpu_options.per_process_gpu_memory_fraction=%r is greater than 1: "
                "TensorFlow would oversubscribe the card with CUDA unified memory (Pascal or "
                "newer GPUs only), which minitf's emulated cards do not have. Use a value in "
                "(0, 1]." % fraction)
        if memory_limit is not None:
            memory_limit = int(memory_limit)
            if fraction > 0:
                raise errors.InvalidArgumentError(
                    None, None, "It's invalid to set per_process_gpu_memory_fraction (%r) when "
                    "a per-device memory_limit (%d bytes) is set" % (fraction, memory_limit))
            if memory_limit < 0:
                raise errors.InvalidArgumentError(
                    None, None, "memory_limit must be >= 0 bytes, got %d" % memory_limit)
            if memory_limit > capacity:
                raise errors.InvalidArgumentError(
                    None, None, "memory_limit of %s is larger than the GPU's memory of %s"
                    % (_size(memory_limit), _size(capacity)))
            limit = memory_limit
        elif fraction == 0:
            limit = free
            reserve = min_system_memory(free)
            if reserve < limit:
                limit -= reserve
        else:
            limit = int(capacity * fraction)
        self.capacity = capacity
        self.free = free
        self.fraction = fraction
        self.allow_growth = allow_growth
        self.memory_limit = memory_limit
        self.limit_bytes = limit
        self.initial_bytes = 0 if allow_growth else limit

    def __repr__(self):
        return ("GpuMemoryPolicy(limit=%s, initial=%s, fraction=%r, allow_growth=%r)"
                % (_size(self.limit_bytes), _size(self.initial_bytes), self.fraction,
                   self.allow_growth))


def reservation_size(capacity, gpu_options_like=None, free_bytes=None, memory_limit=None):
    """The bytes a process reserves on a card of ``capacity`` bytes at its first session run.

    Book section: "Managing the GPU RAM".  ``gpu_options_like``: anything with
    ``per_process_gpu_memory_fraction`` / ``allow_growth`` attributes (``tf.GPUOptions``), or
    None for the defaults.  See :class:`GpuMemoryPolicy` for the rules and the errors.
    """
    return GpuMemoryPolicy(capacity, gpu_options_like, free_bytes, memory_limit).initial_bytes


def next_growth(current_total, needed_total, limit):
    """allow_growth: the new reservation when ``needed_total`` bytes do not fit in
    ``current_total``: the smallest of 2 MiB, 4 MiB, 8 MiB ... (2 MiB times a power of two) that
    holds ``needed_total``, never more than ``limit``; ``None`` when even ``limit`` is too
    small.  Never shrinks.

    (TF's BFC allocator sizes each new region the same way: it doubles the region size until
    the request fits, never sizing a region to the exact request.)  So where a reservation
    ends depends only on the most a step has needed, not on the order in which the step's
    concurrent ops happened to allocate.
    """
    if needed_total <= current_total:
        return current_total
    if needed_total > limit:
        return None
    target = GROWTH_FIRST_REGION
    while target < needed_total:
        target *= 2
    return min(limit, target)


def growth_callback(reservation, limit):
    """The ``grow`` callable of an allow_growth :class:`Allocator`: grows ``reservation`` in the
    registry (:func:`next_growth`, up to ``limit``) and returns the new capacity.

    Like TF's allocator it backs off to exactly what is needed when the doubled amount does not
    fit on the card; if even that fails, the registry's CUDA_ERROR_OUT_OF_MEMORY error is raised.
    """
    def grow(needed_total):
        target = next_growth(reservation.bytes, needed_total, limit)
        if target is None:
            raise errors.ResourceExhaustedError(
                None, None, "allow_growth: %s needed but this process may hold at most %s of "
                "GPU %d" % (_size(needed_total), _size(limit), reservation.card_id))
        try:
            return reservation.grow(target)
        except errors.ResourceExhaustedError:
            if target == needed_total:
                raise
            return reservation.grow(needed_total)
    return grow


# =============================================================================================
# The machine-wide registry of card reservations
# =============================================================================================

_thread_lock = threading.Lock()
_mine = {}          # reservation id -> Reservation, for the atexit clean-up
_mine_lock = threading.Lock()


def state_dir():
    """Where the registry lives: ``$MINITF_STATE_DIR``, else ``/tmp/minitf-<uid>``."""
    return os.environ.get("MINITF_STATE_DIR") or "/tmp/minitf-%d" % os.getuid()


def _card_paths(directory, card_id):
    card_id = int(card_id)
    return (os.path.join(directory, "gpu%d.json" % card_id),
            os.path.join(directory, "gpu%d.lock" % card_id))


def _proc_stat(pid):
    """(state, start time in clock ticks since boot) from ``/proc/<pid>/stat``; None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain ') '.
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[19])   # field 3 (state) and field 22 (starttime)


_HAVE_PROC = os.path.exists("/proc/self/stat")


def process_start_time(pid=None):
    """A process's start time (field 22 of ``/proc/<pid>/stat``): with the pid it names one
    process for good, even after the pid is reused.  None where there is no /proc."""
    st = _proc_stat(os.getpid() if pid is None else pid) if _HAVE_PROC else None
    return None if st is None else st[1]


def _is_alive(entry):
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
    if st is None or st[0] in ("Z", "X"):      # gone, or a zombie waiting to be reaped
        return False
    start = entry.get("start_time")
    return start is None or start == st[1]


def _default_owner():
    """A short process name for the registry and minitf.smi: ``python3 train.py``."""
    exe = os.path.basename(sys.executable or "python")
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 in ("", "-c"):
        return exe + (" -c" if argv0 == "-c" else "")
    if argv0 == "-m" or argv0.endswith("__main__.py"):
        return exe + " -m"
    return "%s %s" % (exe, os.path.basename(argv0))


def _cmdline():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
        return " ".join(p.decode(errors="replace") for p in parts if p)
    except OSError:
        return " ".join([sys.executable] + sys.argv)


@contextlib.contextmanager
def _locked_card(directory, card_id):
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
            state["entries"] = live          # a dead process's reservation is reclaimed
            try:
                yield state
            finally:                         # (callers change nothing before they may fail)
                if json.dumps(state, sort_keys=True) != before:
                    _store(path, state)
        finally:
            os.close(fd)                     # closing the descriptor drops the flock


def _load(path):
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


def _store(path, state):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)                    # readers see the old or the new file, never half


def _describe_holders(entries):
    if not entries:
        return "nobody holds any of it"
    parts = ["pid %d (%s) %s" % (e["pid"], e.get("name", "?"), human_readable_num_bytes(e["bytes"]))
             for e in sorted(entries, key=lambda e: (e["pid"], e.get("created", 0)))]
    return "held by " + ", ".join(parts)


def _oom(card_id, capacity, request, holders):
    """The error of a reservation of ``request`` more bytes that ``holders`` leave no room for."""
    held = sum(e["bytes"] for e in holders)
    free = max(0, capacity - held)
    return errors.ResourceExhaustedError(
        None, None,
        "failed to allocate %s from device: CUDA_ERROR_OUT_OF_MEMORY\n"
        "GPU %d: %s free of %s in total; the rest is %s. Let each program take a share "
        "(gpu_options.per_process_gpu_memory_fraction, allow_growth) or give it other cards "
        "(CUDA_VISIBLE_DEVICES); minitf.smi() shows who holds what."
        % (_size(request), card_id, human_readable_num_bytes(free),
           human_readable_num_bytes(capacity), _describe_holders(holders)))


class Reservation:
    """This process's hold on part of one card (its "GPU region"), recorded in the registry.

    Book section: "Managing the GPU RAM".  Made by :func:`reserve`; :meth:`grow` is
    allow_growth (it only ever grows); :meth:`release` gives the memory back (also done for
    every live reservation when the interpreter exits).
    """

    def __init__(self, card_id, capacity, nbytes, owner, directory, rid):
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
    def bytes(self):
        """The bytes currently reserved."""
        return self._bytes

    @property
    def released(self):
        return self._released

    def _entry(self, state):
        for e in state["entries"]:
            if e.get("id") == self.id:
                return e
        return None

    def grow(self, new_total):
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
                    raise _oom(self.card_id, self.capacity, new_total - self._bytes,
                               state["entries"])
                if mine is None:   # wiped by clear(): record it again
                    mine = _new_entry(self.id, self.owner, 0)
                    state["entries"].append(mine)
                mine["bytes"] = new_total
                state["capacity"] = self.capacity
            self._bytes = new_total
            return new_total

    def set_sessions(self, count):
        """Records how many sessions of this process use the reservation (shown by smi)."""
        with self._lock:
            if self._released:
                return
            with _locked_card(self._dir, self.card_id) as state:
                mine = self._entry(state)
                if mine is not None:
                    mine["sessions"] = int(count)

    def release(self):
        """Gives the memory back to the card (idempotent)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            with _mine_lock:
                _mine.pop(self.id, None)
            if os.getpid() != self._pid:
                return   # a forked child never releases its parent's memory
            with _locked_card(self._dir, self.card_id) as state:
                state["entries"] = [e for e in state["entries"] if e.get("id") != self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return "<Reservation GPU %d: %s by pid %d%s>" % (
            self.card_id, _size(self._bytes), self._pid, ", released" if self._released else "")


def _new_entry(rid, owner, nbytes):
    return {"id": rid, "pid": os.getpid(), "start_time": process_start_time(),
            "bytes": int(nbytes), "name": owner, "cmdline": _cmdline(), "sessions": 1,
            "created": time.time()}


def reserve(card_id, capacity, nbytes, owner=None):
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


def usage(card_id):
    """The live reservations of one card: dicts with ``pid``, ``start_time``, ``bytes``,
    ``name``, ``cmdline``, ``sessions``, ``id``, ``created``.  Entries of dead processes are
    removed from the registry on the way (their memory is reclaimed)."""
    with _locked_card(state_dir(), card_id) as state:
        return [dict(e) for e in state["entries"]]


def used_bytes(card_id):
    """Bytes of card ``card_id`` reserved by live processes."""
    return sum(e["bytes"] for e in usage(card_id))


def free_bytes(card_id, capacity):
    """Bytes of card ``card_id`` (``capacity`` in total) nobody has reserved."""
    return max(0, int(capacity) - used_bytes(card_id))


def clear(card_id=None):
    """Forgets every reservation of one card (all cards with None).  For tests and for a
    teaching machine in a bad state; running processes are not told."""
    directory = state_dir()
    if card_id is None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        ids = sorted(int(n[3:-5]) for n in names
                     if n.startswith("gpu") and n.endswith(".json") and n[3:-5].isdigit())
    else:
        ids = [int(card_id)]
    for i in ids:
        with _locked_card(directory, i) as state:
            state["entries"] = []


def _release_all_at_exit():
    with _mine_lock:
        mine = list(_mine.values())
    for r in mine:
        if r._pid == os.getpid():
            try:
                r.release()
            except Exception:  # noqa: BLE001 - never fail the interpreter's exit
                pass


atexit.register(_release_all_at_exit)
