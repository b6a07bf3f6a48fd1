"""One fix to Numba's CUDA simulator: every thread of a block gets the same shared array.

Book section: "Operations and kernels" (a GPU kernel's threads share a block's fast memory).
The simulator runs a CUDA block as one Python thread per CUDA thread.  ``cuda.shared.array``
finds the block's array by the line that asks for it, and makes it when it is missing, in
two steps: a look-up, then a store.  Two threads that both look before either stores make
two arrays.  One thread then writes its part of a tile where nobody else reads, and reads
uninitialised memory where the others wrote; the kernel's result is wrong now and then
(minitf's tiled matmul: about one launch in 200 with a short thread switch interval, and one
hypothesis example in a CI run).  On a card shared memory is one block-wide allocation and
there is no such race.

:func:`apply` makes the look-up-or-make one atomic step (``dict.setdefault``).  It changes
nothing else: the array is still keyed by the calling line, uninitialised as on a card, and
dynamic shared memory (shape 0) and ``alignment`` behave as the simulator's own method does.
"""

from __future__ import annotations

import sys

import numpy as np


def _shared_array(self, shape, dtype, alignment=None):
    """``FakeCUDAShared.array`` with an atomic look-up-or-make of a static shared array."""
    if shape == 0 or alignment is not None:
        return _ORIGINAL[0](self, shape, dtype, alignment)
    from numba.cuda.simulator import kernelapi

    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    allocations = self._allocations
    found = allocations.get(key)
    if found is not None:  # the common case: an earlier thread made it
        return found
    return allocations.setdefault(key, np.empty(shape, dtype))


_ORIGINAL: list = []


def apply() -> None:
    """Install the fix in the simulator's ``FakeCUDAShared`` (once; later calls do nothing)."""
    from numba.cuda.simulator import kernelapi

    if _ORIGINAL:
        return
    _ORIGINAL.append(kernelapi.FakeCUDAShared.array)
    kernelapi.FakeCUDAShared.array = _shared_array
