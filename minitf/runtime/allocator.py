"""GPU memory as TF manages it: each device's allocator, the gpu_options in bytes, allow_growth.

Book section: "Managing the GPU RAM".  The section makes three points, and this module is where
minitf computes each of them (the process's use of them is ``runtime/gpu_process_state.py``):

1. By default a TF process grabs (nearly) all the memory of every GPU it can see at its first
   ``run()``, so a second program on the same card fails with
   ``failed to allocate 3.66G (3928915200 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY``.
   :class:`GpuMemoryPolicy` says how much "nearly all" is: the card's free memory minus TF's
   system reserve (:func:`min_system_memory`).  On emulated cards the grab itself, and the
   error, come from the emulator's stand-in for the CUDA driver (``runtime/card_registry.py``).
2. ``gpu_options.per_process_gpu_memory_fraction=0.4`` makes each process take 40 % of each
   card: two such programs fit, a third gets the error above (Figure 12-4).
   :class:`GpuMemoryPolicy` turns the options into a number of bytes (:func:`reservation_size`).
3. ``gpu_options.allow_growth=True`` starts with nothing and grows on demand, but never gives
   memory back (:func:`next_region`, :class:`BfcGrowth`): regions double, the total is
   their sum, as TF's BFC allocator reports it.

Inside a process, each device's :class:`Allocator` (TF's ``GPU_0_bfc``) accounts for the
tensors living in its share of the card; going over raises TF's ``OOM when allocating tensor
with shape[...]`` error.  Amounts are written as TF writes them: :func:`human_readable_num_bytes`
(``3.66G``) and :func:`describe_size` (``3.66G (3928915200 bytes)``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from minitf.framework import errors


class Reservation(Protocol):
    """What allow_growth asks of a card reservation (``card_registry.Reservation`` is one):
    its card, its size, and to grow it."""

    card_id: int

    @property
    def bytes(self) -> int: ...

    def grow(self, new_total: int) -> int: ...


if TYPE_CHECKING:
    from minitf.runtime.config_proto import GPUOptions

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# TF's MinSystemMemory(): what the default (fraction unset) leaves to the rest of the system.
SMALL_CARD_FREE = 2 * GiB  # below this much free memory ...
SMALL_CARD_RESERVE = 225 * MiB  # ... leave 225 MiB
LARGE_CARD_MIN_RESERVE = 300 * MiB  # otherwise leave max(300 MiB, 5 % of the free memory)
LARGE_CARD_RESERVE_FRACTION = 0.05

GROWTH_FIRST_REGION = 2 * MiB  # allow_growth's first region (TF's BFC allocator: 2 MiB)


def human_readable_num_bytes(num_bytes: int) -> str:
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


def describe_size(num_bytes: int) -> str:
    """``3.66G (3928915200 bytes)``: how minitf's memory messages state an amount."""
    return "%s (%d bytes)" % (human_readable_num_bytes(num_bytes), num_bytes)


# =============================================================================================
# Per-device accounting
# =============================================================================================


def type_string(dtype_name: Any) -> str | None:
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


def shape_string(shape: Any) -> str:
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

    ``grow``: optional callable ``grow(needed_capacity, request) -> new_capacity`` asked for
    more room before giving up (allow_growth: see :func:`growth_callback`); it may raise
    ResourceExhaustedError, which becomes the ``__cause__`` of the OOM error.

    Every method is thread-safe (the executor's threads allocate concurrently).
    """

    def __init__(
        self,
        name: str,
        device_name: str,
        capacity_bytes: int,
        grow: Callable[[int, int], int] | None = None,
    ) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0, got %r" % (capacity_bytes,))
        self.name = name
        self.device_name = device_name
        self._capacity = int(capacity_bytes)
        self._grow = grow
        self._lock = threading.Lock()
        self._live: dict[int, tuple] = {}  # token -> (nbytes, op_name, shape, dtype_name)
        self._next_token = 1
        self._in_use = 0
        self._peak = 0
        self._num_allocs = 0
        self._largest = 0

    # -- the numbers TF's AllocatorStats reports --------------------------------------------
    @property
    def capacity(self) -> int:
        with self._lock:
            return self._capacity

    @property
    def bytes_in_use(self) -> int:
        with self._lock:
            return self._in_use

    @property
    def peak_bytes_in_use(self) -> int:
        with self._lock:
            return self._peak

    @property
    def num_allocs(self) -> int:
        """How many allocations were ever made (TF's ``num_allocs``), not how many are live."""
        with self._lock:
            return self._num_allocs

    def stats(self) -> dict[str, int]:
        """A snapshot like TF's ``AllocatorStats``: limit, in use, peak, count, largest."""
        with self._lock:
            return {
                "bytes_limit": self._capacity,
                "bytes_in_use": self._in_use,
                "peak_bytes_in_use": self._peak,
                "num_allocs": self._num_allocs,
                "largest_alloc_size": self._largest,
                "live_allocations": len(self._live),
            }

    def live_allocations(self) -> list[tuple[int, int, str | None, Any, Any]]:
        """``[(token, nbytes, op_name, shape, dtype_name)]`` of the tensors still allocated."""
        with self._lock:
            return [(t,) + v for t, v in sorted(self._live.items())]

    def usage_report(self) -> str:
        """What ``RunOptions(report_tensor_allocations_upon_oom=True)`` shows: bytes per op."""
        per_op: dict[str, int] = {}
        for _, nbytes, op_name, _, _ in self.live_allocations():
            key = op_name or "(unknown op)"
            per_op[key] = per_op.get(key, 0) + nbytes
        lines = ["Current usage from device: %s, allocator: %s" % (self.device_name, self.name)]
        for op_name, nbytes in sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append("  %s from %s" % (human_readable_num_bytes(nbytes), op_name))
        return "\n".join(lines)

    # -- allocation ---------------------------------------------------------------------------
    def _oom_message(self, nbytes: int, shape: Any, dtype_name: Any) -> str:
        what = "OOM when allocating tensor"
        type_str = type_string(dtype_name)
        if shape is not None:
            what += " with " + shape_string(shape)
            if type_str:
                what += " and type " + type_str
        elif type_str:
            what += " of type " + type_str
        return "%s on %s by allocator %s (requested %d bytes, in use %d of %d bytes)" % (
            what,
            self.device_name,
            self.name,
            nbytes,
            self._in_use,
            self._capacity,
        )

    def allocate(
        self, nbytes: int, op_name: str | None = None, shape: Any = None, dtype_name: Any = None
    ) -> int:
        """Accounts ``nbytes`` for a tensor; returns the token to :meth:`free` it with."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("cannot allocate a negative number of bytes (%d)" % nbytes)
        cause = None
        with self._lock:
            needed = self._in_use + nbytes
            if needed > self._capacity and self._grow is not None:
                try:
                    new_capacity = int(self._grow(needed, nbytes))
                    if new_capacity > self._capacity:
                        self._capacity = new_capacity
                except errors.ResourceExhaustedError as e:
                    cause = e
            if needed > self._capacity:
                err = errors.ResourceExhaustedError(
                    None, None, self._oom_message(nbytes, shape, dtype_name)
                )
                raise err from cause
            token = self._next_token
            self._next_token += 1
            self._live[token] = (nbytes, op_name, shape, dtype_name)
            self._in_use = needed
            self._peak = max(self._peak, needed)
            self._num_allocs += 1
            self._largest = max(self._largest, nbytes)
            return token

    def free(self, token: int) -> None:
        """Gives back the bytes of one allocation (each token exactly once)."""
        with self._lock:
            try:
                nbytes = self._live.pop(token)[0]
            except KeyError:
                raise ValueError(
                    "allocator %s: token %r is unknown or already freed" % (self.name, token)
                ) from None
            self._in_use -= nbytes

    def grow_to(self, capacity: int) -> int:
        """Raises the capacity to ``capacity`` bytes (allow_growth); never lowers it.

        Returns the capacity after the call.
        """
        with self._lock:
            if capacity > self._capacity:
                self._capacity = int(capacity)
            return self._capacity

    def __repr__(self) -> str:
        return "<Allocator %s on %s: %d of %d bytes in use>" % (
            self.name,
            self.device_name,
            self.bytes_in_use,
            self.capacity,
        )


# =============================================================================================
# gpu_options -> bytes
# =============================================================================================


def min_system_memory(available: int) -> int:
    """TF's ``MinSystemMemory``: what the default leaves to others on a card with ``available``
    free bytes: 225 MiB below 2 GiB free, else max(300 MiB, 5 % of the free memory)."""
    if available < SMALL_CARD_FREE:
        return SMALL_CARD_RESERVE
    return max(LARGE_CARD_MIN_RESERVE, int(available * LARGE_CARD_RESERVE_FRACTION))


def _check_fraction(fraction: float) -> None:
    """Refuses a ``per_process_gpu_memory_fraction`` outside 0 (unset) and (0, 1]."""
    if math.isnan(fraction) or fraction < 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "gpu_options.per_process_gpu_memory_fraction=%r is invalid: it must "
            "be 0 (use all free memory) or a fraction in (0, 1]" % fraction,
        )
    if fraction > 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            "gpu_options.per_process_gpu_memory_fraction=%r is greater than 1: "
            "TensorFlow would oversubscribe the card with CUDA unified memory (Pascal or "
            "newer GPUs only), which minitf's emulated cards do not have. Use a value in "
            "(0, 1]." % fraction,
        )


def _check_memory_limit(memory_limit: int, fraction: float, capacity: int) -> None:
    """Refuses a virtual device's ``memory_limit`` (bytes) set with a fraction, negative, or
    larger than the card's ``capacity``."""
    if fraction > 0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "It's invalid to set per_process_gpu_memory_fraction (%r) when "
            "a per-device memory_limit (%d bytes) is set" % (fraction, memory_limit),
        )
    if memory_limit < 0:
        raise errors.InvalidArgumentError(
            None, None, "memory_limit must be >= 0 bytes, got %d" % memory_limit
        )
    if memory_limit > capacity:
        raise errors.InvalidArgumentError(
            None,
            None,
            "memory_limit of %s is larger than the GPU's memory of %s"
            % (describe_size(memory_limit), describe_size(capacity)),
        )


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

    def __init__(
        self,
        capacity: int,
        gpu_options: GPUOptions | None = None,
        free_bytes: int | None = None,
        memory_limit: int | None = None,
    ) -> None:
        capacity = int(capacity)
        if capacity < 0:
            raise errors.InvalidArgumentError(
                None, None, "a GPU's memory cannot be negative (%d bytes)" % capacity
            )
        free = capacity if free_bytes is None else max(0, min(int(free_bytes), capacity))
        fraction = float(getattr(gpu_options, "per_process_gpu_memory_fraction", 0.0) or 0.0)
        allow_growth = bool(getattr(gpu_options, "allow_growth", False))
        _check_fraction(fraction)
        if memory_limit is not None:
            memory_limit = int(memory_limit)
            _check_memory_limit(memory_limit, fraction, capacity)
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

    def __repr__(self) -> str:
        return "GpuMemoryPolicy(limit=%s, initial=%s, fraction=%r, allow_growth=%r)" % (
            describe_size(self.limit_bytes),
            describe_size(self.initial_bytes),
            self.fraction,
            self.allow_growth,
        )


def reservation_size(
    capacity: int,
    gpu_options_like: GPUOptions | None = None,
    free_bytes: int | None = None,
    memory_limit: int | None = None,
) -> int:
    """The bytes a process reserves on a card of ``capacity`` bytes at its first session run.

    Book section: "Managing the GPU RAM".  ``gpu_options_like``: anything with
    ``per_process_gpu_memory_fraction`` / ``allow_growth`` attributes (``tf.GPUOptions``), or
    None for the defaults.  See :class:`GpuMemoryPolicy` for the rules and the errors.
    """
    return GpuMemoryPolicy(capacity, gpu_options_like, free_bytes, memory_limit).initial_bytes


def next_region(region_bytes: int, request: int) -> tuple[int, int]:
    """allow_growth, one step of TF's ``BFCAllocator::Extend``: ``(new region, next region
    size)`` for a ``request`` that fits in no region held so far.

    ``region_bytes`` is the size the allocator means to use for its next region (2 MiB at
    first).  When the request does not fit in it, the size doubles until it does and the new
    region has that size; otherwise the region has ``region_bytes`` and the size doubles for
    the region after.  Regions add up: the process holds the *sum* of its regions (2, 2 + 4,
    2 + 4 + 8 ... MiB), not the size of the last one.
    """
    if request <= region_bytes:
        return region_bytes, region_bytes * 2
    while region_bytes < request:
        region_bytes *= 2
    return region_bytes, region_bytes


class BfcGrowth:
    """The ``grow`` callable of an allow_growth :class:`Allocator`: adds TF BFC regions
    (:func:`next_region`) to a card ``reservation``, never past ``limit`` bytes in all.

    Called with ``(needed_total, request)`` when a ``request``-byte tensor does not fit in the
    free room; one new region always holds the request, as in TF, where a tensor never spans two
    regions.  Like TF it backs off to exactly the request when the region does not fit on the
    card; if even that fails, the registry's CUDA_ERROR_OUT_OF_MEMORY error is raised.  The
    order of a step's allocations can change where the total ends (TF's too: the book calls
    allow_growth less deterministic).
    """

    def __init__(self, reservation: Reservation, limit: int) -> None:
        self.reservation = reservation
        self.limit = int(limit)
        self.region_bytes = GROWTH_FIRST_REGION
        self.regions: list[int] = []  # the sizes of the regions added so far, in order

    def __call__(self, needed_total: int, request: int) -> int:
        held = self.reservation.bytes
        if needed_total <= held:
            return held
        region, following = next_region(self.region_bytes, max(int(request), 1))
        region = min(region, self.limit - held)
        if region < request:
            raise errors.ResourceExhaustedError(
                None,
                None,
                "allow_growth: %s needed but this process may hold at most %s of GPU %d"
                % (
                    describe_size(held + request),
                    describe_size(self.limit),
                    self.reservation.card_id,
                ),
            )
        try:
            total = self.reservation.grow(held + region)
        except errors.ResourceExhaustedError:
            if region == request:
                raise
            region = int(request)
            total = self.reservation.grow(held + region)
        self.region_bytes = following
        self.regions.append(region)
        return total


def growth_callback(reservation: Reservation, limit: int) -> BfcGrowth:
    """The ``grow`` callable of an allow_growth allocator on ``reservation`` (a
    :class:`BfcGrowth`)."""
    return BfcGrowth(reservation, limit)
