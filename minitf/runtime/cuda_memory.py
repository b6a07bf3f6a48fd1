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

CI has no GPU: the cap itself (:class:`MemoryCap`) is plain Python and tested everywhere; the
numba class is built only outside the simulator (tests build it in a subprocess and drive it
with numba's allocation call replaced).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from minitf.framework import errors
from minitf.runtime.allocator import describe_size

_lock = threading.Lock()
_caps: dict[int, MemoryCap] = {}  # CUDA device id -> MemoryCap


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


def set_cap(device_id: int, limit: int | None) -> None:
    """Caps numba's allocations on CUDA device ``device_id`` at ``limit`` bytes (None: none)."""
    with _lock:
        _caps[device_id] = MemoryCap(device_id, limit)


def cap_of(device_id: int) -> MemoryCap:
    """The cap of CUDA device ``device_id`` (one with no limit when none was set)."""
    with _lock:
        return _caps.get(device_id) or MemoryCap(device_id)


_class = None


def memory_manager_class() -> type:
    """numba's NumbaCUDAMemoryManager with the cap of its context's device (built on first use;
    needs the real numba.cuda driver module, not the simulator)."""
    global _class
    if _class is None:
        from numba.cuda.cudadrv import driver

        class CappedMemoryManager(driver.NumbaCUDAMemoryManager):
            """numba's memory manager; allocations pass :func:`cap_of` the device first."""

            def _device_id(self) -> int:
                return self.context.device.id

            def held_bytes(self) -> int:
                live = sum(m.size for m in list(self.allocations.values()))
                return live + int(self.deallocations._size)

            def memalloc(self, size: int):
                cap_of(self._device_id()).check(size, self.held_bytes, self.deallocations.clear)
                return super().memalloc(size)

            def get_memory_info(self):
                """What numba sees of the card: at most the cap."""
                info = super().get_memory_info()
                limit = cap_of(self._device_id()).limit
                if limit is None:
                    return info
                return driver.MemoryInfo(
                    free=max(0, min(info.free, limit - self.held_bytes())),
                    total=min(info.total, limit),
                )

        _class = CappedMemoryManager
    return _class


def install() -> None:
    """Makes numba use :func:`memory_manager_class` for every context created from now on
    (call it before the first CUDA call: runtime.devices does, before it lists the cards)."""
    from numba.cuda.cudadrv import driver

    driver.set_memory_manager(memory_manager_class())
