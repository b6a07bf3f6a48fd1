"""How many threads BLAS runs while minitf's steps run.

Book section: "Parallel Execution" (``intra_op_parallelism_threads``: how many threads one op
may use).  Parallelism comes from minitf's own pools, sized as the user asked, not from BLAS
threads multiplying them.  A step run by the pools asks for one BLAS thread: its large kernels
split their own work over the intra-op pool, where a trace shows each piece.  A step its
caller runs alone, one node after another (``step_run``), asks for its intra-op count: its
heavy nodes are single BLAS calls (``kernel_stats``), and BLAS's own threads are then that op's
intra-op threads.  While steps run, every BLAS library of the process runs the smallest count
any of them asked for, so pooled steps are never oversubscribed; the last step to end gives
each library its own count back.

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
from typing import Callable, Dict, List, Optional, Tuple

_lock = threading.Lock()
_wishes: Dict[int, int] = {}  # thread count asked for -> steps running that asked for it
_original: List[int] = []  # each library's thread count when the first running step began
_current: Optional[int] = None  # the count set for the running steps (None: their own)
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


class BlasThreads:
    """``with BlasThreads(n):`` -- BLAS at ``n`` threads inside, counted across threads: from
    the first step's start to the last step's end every BLAS library runs the smallest count
    any step running then asked for (a pooled step asks for one: its kernels split their own
    work; a step its caller runs alone asks for its intra-op count, ``step_run``).  Where every
    library has that count already (``OPENBLAS_NUM_THREADS=1``, a worker task held to one core)
    nothing is set or restored."""

    __slots__ = ("n",)

    def __init__(self, n: int = 1):
        self.n = max(1, int(n))

    def __enter__(self):
        global _original
        with _lock:
            if not _wishes:
                _original = [get() for get, _ in knobs()]
            _wishes[self.n] = _wishes.get(self.n, 0) + 1
            _apply(self._set)

    def __exit__(self, *exc):
        with _lock:
            left = _wishes[self.n] - 1
            if left:
                _wishes[self.n] = left
            else:
                del _wishes[self.n]
            _apply(self._set)
        return False

    @staticmethod
    def _set(counts):
        for (_, put), n in zip(knobs(), counts):
            if n is not None:
                put(n)


def _apply(set_counts) -> None:
    """Sets the libraries to what the running steps ask (caller holds ``_lock``): the smallest
    wish, or each library's own count back once no step runs or all already have it."""
    global _current
    if _wishes:
        target = min(_wishes)
        want = None if all(n == target for n in _original) else target
    else:
        want = None
    if want == _current:
        return
    set_counts(list(_original) if want is None else [want] * len(_original))
    _current = want
