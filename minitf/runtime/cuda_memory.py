"""The memory options on a real card: every byte numba allocates there is capped.

Book section: "Managing the GPU RAM".  This is part of the process's GPU memory state (TF's
``gpu_process_state`` and its allocators), not a kernel: no kernel imports it.  On emulated
cards ``per_process_gpu_memory_fraction``, ``allow_growth`` and ``virtual_devices`` are
enforced by minitf's reservation registry (``runtime/card_registry.py``) and allocators
(``runtime/allocator.py``).  On a real card the memory belongs to the CUDA driver and numba
allocates it, for tensors, copies and kernel temporaries alike.  So minitf plugs into numba's
External Memory Management (EMM) interface: :func:`install` makes numba create every context
with :func:`memory_manager_class` (numba's own manager plus a cap), and
``runtime.gpu_process_state.ensure_gpu_memory`` sets each card's cap with :func:`set_cap` to
what the session's options give this process.  An allocation that would pass the cap first
flushes numba's pending frees, then fails with ResourceExhaustedError naming the sizes, instead
of taking memory another process was promised.

A freed block is not given back to the driver: it waits in a :class:`BlockPool` for the next
allocation of its size class, as TF's BFC allocator keeps its regions (on an H100 a
``cuMemAlloc`` plus its later ``cuMemFree`` cost tens of microseconds, several times a small
kernel's launch, and a training step allocates the same sizes every step).  Blocks are reused
only on the card's one stream, whose order makes that safe.  The pool's idle blocks count as
held by the process; when the cap or the card runs out they are freed first.

CI has no GPU: the cap itself (:class:`MemoryCap`) and the pool (:class:`BlockPool`) are plain
Python and tested everywhere; the numba class is built only outside the simulator (tests build
it in a subprocess and drive it with the driver's allocation calls replaced).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from minitf.framework import errors
from minitf.runtime.allocator import describe_size

_lock = threading.Lock()
_caps: dict[int, MemoryCap] = {}  # CUDA device id -> MemoryCap
_managers: dict[int, weakref.ref] = {}  # CUDA device id -> this process's memory manager there


class MemoryCap:
    """The most bytes this process may hold on one card (``None``: no cap)."""

    def __init__(self, device_id: int, limit: int | None = None) -> None:
        self.device_id = device_id
        self.limit = None if limit is None else int(limit)

    def check(self, size: int, held: Callable[[], int], flush: Callable[[], object]) -> None:
        """Lets an allocation of ``size`` bytes go ahead, or raises ResourceExhaustedError.

        ``held()``: the bytes held now (live allocations plus frees numba has not done yet);
        ``flush()``: does the pending frees.  They are flushed only when the cap would be passed.
        """
        if self.limit is None:
            return
        if held() + size > self.limit:
            flush()
            now = held()
            if now + size > self.limit:
                raise errors.ResourceExhaustedError(
                    None,
                    None,
                    "OOM when allocating %d bytes on GPU %d: this process may hold "
                    "at most %s of the card (gpu_options) and holds %d bytes"
                    % (size, self.device_id, describe_size(self.limit), now),
                )


def size_class(nbytes: int) -> int:
    """The block size an allocation of ``nbytes`` gets: a multiple of 512 bytes, and above
    8 KiB one of eight steps per power of two (at most 1/8 more than asked for)."""
    nbytes = max(512, int(nbytes))
    if nbytes <= 8192:
        return -(-nbytes // 512) * 512
    step = 1 << (nbytes.bit_length() - 4)
    return -(-nbytes // step) * step


class BlockPool:
    """Idle device blocks by size class, waiting to be reused (thread-safe: numba frees a
    block from whichever thread drops its last reference)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list] = {}
        self.idle_bytes = 0

    def take(self, size: int):
        """An idle block of exactly ``size`` bytes (a size class), or None."""
        with self._lock:
            blocks = self._free.get(size)
            if not blocks:
                return None
            self.idle_bytes -= size
            return blocks.pop()

    def give(self, block, size: int) -> None:
        with self._lock:
            self._free.setdefault(size, []).append(block)
            self.idle_bytes += size

    def drain(self) -> list:
        """Every idle block, now no longer in the pool (for the caller to free)."""
        with self._lock:
            blocks = [b for bs in self._free.values() for b in bs]
            self._free.clear()
            self.idle_bytes = 0
        return blocks


def held_by_this_process(device_id: int) -> int | None:
    """The bytes this process holds on CUDA device ``device_id`` through numba (its pool's idle
    blocks included), or None when it has no context there (what ``minitf.smi`` shows)."""
    with _lock:
        ref = _managers.get(device_id)
    manager = ref() if ref is not None else None
    return None if manager is None else manager.held_bytes()


def set_cap(device_id: int, limit: int | None) -> None:
    """Caps numba's allocations on CUDA device ``device_id`` at ``limit`` bytes (None: none)."""
    with _lock:
        _caps[device_id] = MemoryCap(device_id, limit)


def cap_of(device_id: int) -> MemoryCap:
    """The cap of CUDA device ``device_id`` (one with no limit when none was set)."""
    with _lock:
        return _caps.get(device_id) or MemoryCap(device_id)


def _driver():
    from numba.cuda.cudadrv import driver

    return driver


class _PooledCappedMemory:
    """What minitf adds to numba's NumbaCUDAMemoryManager (the class
    :func:`memory_manager_class` builds from both): a pool of freed blocks, and new blocks
    passing :func:`cap_of` the device first."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = BlockPool()
        if self.context is not None:  # (numba builds one without a context to check it)
            with _lock:
                _managers[self._device_id()] = weakref.ref(self)

    def _device_id(self) -> int:
        return self.context.device.id

    def held_bytes(self) -> int:
        live = sum(m.size for m in list(self.allocations.values()))
        return live + self.pool.idle_bytes + int(self.deallocations._size)

    def _give_back(self) -> None:
        """numba's pending frees, and the pool's idle blocks, go to the driver."""
        self.deallocations.clear()
        for block in self.pool.drain():
            self._device_free(block)

    def _device_alloc(self, size: int):
        return self._attempt_allocation(lambda: _driver().driver.cuMemAlloc(size))

    def _device_free(self, block) -> None:
        _driver().driver.cuMemFree(block)

    def memalloc(self, size: int):
        block_size = size_class(size)
        block = self.pool.take(block_size)
        if block is None:
            cap_of(self._device_id()).check(block_size, self.held_bytes, self._give_back)
            try:
                block = self._device_alloc(block_size)
            except _driver().CudaAPIError:  # the card is full: idle blocks go first
                if not self.pool.idle_bytes:
                    raise
                self._give_back()
                block = self._device_alloc(block_size)
        return self._own(block, size, block_size)

    def _own(self, block, size: int, block_size: int):
        allocations, pool = self.allocations, self.pool

        def back_to_pool():
            allocations.pop(block, None)
            pool.give(block, block_size)

        ctx = weakref.proxy(self.context)
        mem = _driver().AutoFreePointer(ctx, block, size, finalizer=back_to_pool)
        allocations[block] = mem
        return mem.own()

    def reset(self):
        super().reset()  # the context's memory is gone: so are the pool's blocks
        self.pool.drain()

    def get_memory_info(self):
        """What numba sees of the card: at most the cap."""
        info = super().get_memory_info()
        limit = cap_of(self._device_id()).limit
        if limit is None:
            return info
        return _driver().MemoryInfo(
            free=max(0, min(info.free, limit - self.held_bytes())), total=min(info.total, limit)
        )


_class = None


def memory_manager_class() -> type:
    """numba's NumbaCUDAMemoryManager with minitf's pool and cap (built on first use; needs
    the real numba.cuda driver module, not the simulator)."""
    global _class
    if _class is None:
        base = _driver().NumbaCUDAMemoryManager
        _class = type("CappedMemoryManager", (_PooledCappedMemory, base), {})
    return _class


def install() -> None:
    """Makes numba use :func:`memory_manager_class` for every context created from now on
    (call it before the first CUDA call: runtime.devices does, before it lists the cards)."""
    from numba.cuda.cudadrv import driver

    driver.set_memory_manager(memory_manager_class())
