"""Per-device thread pools: the inter-op pool runs ops, the intra-op pool runs chunks of one op.

Book section: "Parallel Execution" (Figure 12-5).  Every device has an *inter-op* pool whose
threads take ready ops from the device's queue, and an *intra-op* pool that runs the pieces of
a multithreaded kernel (a large matmul is split into row blocks).  As in TF, the pools are made
by the first session and shared by later ones, unless a session asks for its own
(``use_per_session_threads=True``) or names pools in ``session_inter_op_thread_pool``.
"""

import itertools
import os
import queue
import threading
import time

from minitf.framework import errors

_thread_ids = itertools.count(1)  # 0 is the caller thread of a run
_local = threading.local()


def current_thread():
    """(thread id, thread name) of the calling thread as traces show it."""
    t = getattr(_local, "ident", None)
    return t if t is not None else (0, "caller")


def default_threads(n):
    """TF's rule: 0 means "as many as the machine has cores"."""
    if n < 0:
        raise errors.InvalidArgumentError(None, None, "thread pool size must be >= 0, got %d"
                                          % n)
    return n or os.cpu_count() or 1


class ThreadPool:
    """A fixed number of named daemon threads working through a FIFO of callables.

    Threads start on the first submit, so a pool that never gets work costs nothing.
    """

    def __init__(self, name, num_threads):
        self.name = name
        self.num_threads = num_threads
        self._queue = queue.SimpleQueue()
        self._threads = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn, *args):
        if self._closed:
            raise errors.CancelledError(None, None, "Thread pool %s is closed." % self.name)
        if len(self._threads) < self.num_threads:
            self._start_threads()
        self._queue.put((fn, args))

    def _start_threads(self):
        with self._lock:
            while len(self._threads) < self.num_threads:
                k = len(self._threads)
                t = threading.Thread(target=self._work, name="%s #%d" % (self.name, k),
                                     args=(next(_thread_ids), "%s #%d" % (self.name, k)),
                                     daemon=True)
                self._threads.append(t)
                t.start()

    def _work(self, ident, name):
        _local.ident = (ident, name)
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            fn(*args)
            # drop the task before waiting for the next one: a finished step's values must not
            # stay alive, held by an idle thread's locals, until this thread runs again
            item = fn = args = None

    def close(self, timeout=5.0):
        """Stops the threads once they finish what they are running (per-session pools)."""
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def parallel_for(self, n, fn, record=None):
        """Runs ``fn(lo, hi)`` over ``[0, n)`` in ``num_threads`` chunks: the calling thread
        takes the first chunk, pool threads the others; returns when all are done.

        ``record(index, thread id, thread name, start us, end us)`` is called per chunk.
        """
        k = max(1, min(self.num_threads, n))
        bounds = [(n * c // k, n * (c + 1) // k) for c in range(k)]
        if k == 1:
            _run_chunk(fn, 0, bounds[0], record)
            return
        done = threading.Semaphore(0)
        failures = []

        def chunk(c):
            try:
                _run_chunk(fn, c, bounds[c], record)
            except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
                failures.append(e)
            finally:
                done.release()

        for c in range(1, k):
            self.submit(chunk, c)
        chunk(0)
        for _ in range(k):
            done.acquire()
        if failures:
            raise failures[0]


def _run_chunk(fn, c, bounds, record):
    t0 = time.time_ns() // 1000
    fn(*bounds)
    if record is not None:
        ident, name = current_thread()
        record(c, ident, name, t0, time.time_ns() // 1000)


class DevicePools:
    """The inter-op and intra-op pools of one device."""

    def __init__(self, short_name, inter, intra):
        self.inter = ThreadPool("%s inter-op" % short_name, inter)
        self.intra = ThreadPool("%s intra-op" % short_name, intra)

    def close(self):
        self.inter.close()
        self.intra.close()


class PoolSet:
    """The pools a session's runs use: one :class:`DevicePools` per device name."""

    def __init__(self, inter, intra):
        self.inter_threads = inter
        self.intra_threads = intra
        self._by_device = {}
        self._lock = threading.Lock()

    def for_device(self, device_name):
        p = self._by_device.get(device_name)
        if p is None:
            with self._lock:
                p = self._by_device.get(device_name)
                if p is None:
                    short = device_name.rsplit("/device:", 1)[-1]
                    p = self._by_device[device_name] = DevicePools(short, self.inter_threads,
                                                                   self.intra_threads)
        return p

    def close(self):
        for p in self._by_device.values():
            p.close()


_global_lock = threading.Lock()
_global_default = None   # the process-wide pools, sized by the first session
_global_named = {}       # session_inter_op_thread_pool entries with a global_name


def session_pools(config):
    """The pool sets of a session, one per inter-op pool option (index 0 = default), and the
    ones the session owns (and must close when it closes)."""
    global _global_default
    inter = default_threads(config.inter_op_parallelism_threads)
    intra = default_threads(config.intra_op_parallelism_threads)
    with _global_lock:
        if _global_default is None:
            _global_default = PoolSet(inter, intra)
        entries = list(config.session_inter_op_thread_pool)
        if not entries:
            if config.use_per_session_threads:
                # minitf: a session with its own pools also sizes its own intra-op pool (in TF
                # the intra-op pool stays process-wide), so a notebook can compare sizes.
                own = PoolSet(inter, intra)
                return [own], [own]
            return [_global_default], []
        intra = _global_default.intra_threads  # shared pools: the first session's size wins
        sets, owned = [], []
        for entry in entries:
            n = default_threads(entry.num_threads) if entry.num_threads else inter
            if entry.global_name:
                existing = _global_named.get(entry.global_name)
                if existing is None:
                    existing = _global_named[entry.global_name] = PoolSet(n, intra)
                elif existing.inter_threads != n:
                    raise errors.InvalidArgumentError(
                        None, None, "Pool %s configured previously with num_threads=%d; cannot "
                        "re-configure with num_threads=%d" % (entry.global_name,
                                                              existing.inter_threads, n))
                sets.append(existing)
            else:
                sets.append(PoolSet(n, intra))
                owned.append(sets[-1])
        return sets, owned
