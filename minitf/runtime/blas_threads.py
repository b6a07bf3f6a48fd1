"""BLAS held to one thread while minitf's pools run a step.

Book section: "Parallel Execution" (``intra_op_parallelism_threads``: how many threads one op
may use).  Parallelism comes from minitf's own pools, sized as the user asked, not from BLAS
threads multiplying them: while any step with pools (or a one-thread step run on its caller)
runs, every BLAS library of the process runs one thread; the last step to end gives each its
own count back.  OpenBLAS's own threads also spin while they wait, and beside other busy
processes they lose far more than they gain.

The libraries are found once with threadpoolctl (numpy loaded them; the lookup reads the
process's memory map, about 0.4 ms).  For OpenBLAS, the usual case, the count is then read and
set through OpenBLAS's own two C functions: threadpoolctl's wrappers cost about 20 us per step
(a step sets one thread and restores the count), the C functions under 2 us.  Those wrappers
also let only one Python thread set a pthreads OpenBLAS's count (threadpoolctl >= 3.8), where
minitf's steps start on any thread (a session shared by threads, a server's RPC threads); the
module's lock already keeps minitf's own changes one at a time.  Other libraries (MKL, BLIS)
go through threadpoolctl's controllers.
"""

from __future__ import annotations

import threading
from typing import Callable, List, Optional, Tuple

_lock = threading.Lock()
_users = 0
_original: Optional[List[int]] = None  # each library's thread count before the first step
_knobs: Optional[List[Tuple[Callable[[], int], Callable[[int], object]]]] = None


def _knob(lib) -> Tuple[Callable[[], int], Callable[[int], object]]:
    """(get, set) of one library's thread count: OpenBLAS's C functions where threadpoolctl
    can name them, else the controller's own methods."""
    if getattr(lib, "internal_api", None) == "openblas":
        openmp = getattr(lib, "threading_layer", None) == "openmp"
        find = getattr(lib, "_get_symbol", None)
        if find is not None:
            get = find("omp_get_max_threads" if openmp else "openblas_get_num_threads")
            put = find("omp_set_num_threads" if openmp else "openblas_set_num_threads")
            if get is not None and put is not None:
                return get, put
    clear = getattr(type(lib), "clear_controlling_thread", None)

    def put_through_threadpoolctl(n):
        # threadpoolctl >= 3.8 ignores a pthreads OpenBLAS limit set by any thread but the
        # first that set one: take that control, set, and hand it back
        if clear is not None:
            clear(force=True)
        try:
            return lib.set_num_threads(n)
        finally:
            if clear is not None:
                clear(force=True)

    return (lambda: lib.num_threads), put_through_threadpoolctl


def knobs() -> List[Tuple[Callable[[], int], Callable[[int], object]]]:
    """The (get, set) pair of each BLAS library in the process, found on first use."""
    global _knobs
    if _knobs is None:
        from threadpoolctl import ThreadpoolController

        _knobs = [
            _knob(lib) for lib in ThreadpoolController().select(user_api="blas").lib_controllers
        ]
    return _knobs


class SingleThreadedBlas:
    """``with SingleThreadedBlas():`` -- BLAS at one thread inside, counted across threads:
    from the first step's start to the last step's end.  Where every library has one thread
    already (``OPENBLAS_NUM_THREADS=1``, a worker task held to one core) nothing is set or
    restored."""

    def __enter__(self):
        global _users, _original
        with _lock:
            if _users == 0:
                counts = [get() for get, _ in knobs()]
                _original = None if all(n == 1 for n in counts) else counts
                if _original is not None:
                    self._set([1] * len(counts))
            _users += 1

    def __exit__(self, *exc):
        global _users, _original
        with _lock:
            _users -= 1
            if _users == 0 and _original is not None:
                self._set(_original)
                _original = None
        return False

    @staticmethod
    def _set(counts):
        for (_, put), n in zip(knobs(), counts):
            if n is not None:
                put(n)
