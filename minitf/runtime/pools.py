"""The thread pools a step runs on: inter-op threads run ops, intra-op threads run chunks of one.

Book section: "Parallel Execution" (Figure 12-5).  The book draws an *inter-op* pool and an
*intra-op* pool per device.  TF 1.x has that picture only for GPUs that ask for it:

* by default one process-wide **inter-op pool** runs the ops of every device's partition (its
  size: ``inter_op_parallelism_threads`` of the first session, 0 meaning one per core), and one
  **intra-op pool** runs the chunks of multithreaded CPU kernels (a large matmul's row blocks);
  a GPU op's kernel is the card's work and is not split on host threads;
* with ``TF_GPU_THREAD_MODE=gpu_private`` (TF's own switch, read when a session is created) each
  GPU gets threads of its own: ``TF_GPU_THREAD_COUNT`` inter-op threads (default 2) that run
  only that GPU's ops, and, in minitf, an intra-op pool of its own on which an emulated card
  splits its kernels (the book's Figure 12-5, a card's parallel hardware stood in for by host
  threads).

As in TF the default pools are made by the first session and shared by later ones, unless a
session asks for its own (``use_per_session_threads=True``) or names pools in
``session_inter_op_thread_pool``.  A :class:`PoolSet` is what one step runs on; its
:meth:`~PoolSet.queue_of` names the ready queue each device's ops wait in.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time

from minitf.framework import errors
from minitf.lib.cores import schedulable_cores

_thread_ids = itertools.count(1)  # 0 is the caller thread of a run
_local = threading.local()


def current_thread():
    """(thread id, thread name) of the calling thread as traces show it."""
    t = getattr(_local, "ident", None)
    return t if t is not None else (0, "caller")


def default_threads(n):
    """TF's rule: 0 means "as many as the process may use cores"."""
    if n < 0:
        raise errors.InvalidArgumentError(None, None, "thread pool size must be >= 0, got %d" % n)
    return n or schedulable_cores()


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
                t = threading.Thread(
                    target=self._work,
                    name="%s #%d" % (self.name, k),
                    args=(next(_thread_ids), "%s #%d" % (self.name, k)),
                    daemon=True,
                )
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
        takes the first chunk, pool threads the others; returns when all are done.  A chunk
        that no pool thread has started by the time the caller is done with its own, the caller
        runs too (:class:`_Chunks`): a pool thread the OS has not woken yet (a busy machine)
        never holds the op up.

        ``record(index, thread id, thread name, start us, end us)`` is called per chunk.
        """
        k = chunk_count(n, self.num_threads)
        if k == 1:  # one thread (or one item): the caller runs it all, no hand-off
            _run_chunk(fn, 0, (0, n), record)
            return
        work = _Chunks(n, k, fn, record)
        for _ in range(1, k):
            self.submit(work.take)
        work.run(0)
        work.take()
        work.wait()


class _Chunks:
    """The chunks of one ``parallel_for``, chunk 0 the caller's and the others handed out in
    order to whoever asks first: a pool thread, or the caller once its own is done (as idle
    threads steal queued work in Eigen's thread pool, TF's intra-op pool; TF's threads spin a
    while before sleeping and start at once, minitf's need the OS and the GIL to wake them).
    The last chunk to end releases the caller: one lock, acquired when the work is made
    (cheaper than a semaphore, whose every wait and release goes through a condition)."""

    __slots__ = ("bounds", "fn", "record", "left", "ended", "failures", "latch", "k")

    def __init__(self, n, k, fn, record):
        self.k = k
        self.bounds = [(n * c // k, n * (c + 1) // k) for c in range(k)]
        self.fn, self.record = fn, record
        self.left = list(range(k - 1, 0, -1))  # pop() hands out 1, 2, ...
        self.ended = itertools.count(1)  # next() is atomic: the count of chunks ended
        self.failures = []
        self.latch = threading.Lock()
        self.latch.acquire()

    def take(self):
        """Runs chunks nobody has taken until none is left (a late pool task finds none)."""
        while True:
            try:
                c = self.left.pop()
            except IndexError:
                return
            self.run(c)

    def run(self, c):
        try:
            _run_chunk(self.fn, c, self.bounds[c], self.record)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            self.failures.append(e)
        finally:
            if next(self.ended) == self.k:
                self.latch.release()

    def wait(self):
        """Waits for the last chunk to end, then re-raises the first failure.  The kernel's
        function goes: a pool task that comes late still holds this object, and must not keep
        the op's operands and result alive until it runs."""
        self.latch.acquire()
        self.fn = self.record = None
        if self.failures:
            raise self.failures[0]


def _run_chunk(fn, c, bounds, record):
    if record is None:
        fn(*bounds)
        return
    t0 = time.time_ns() // 1000
    fn(*bounds)
    ident, name = current_thread()
    record(c, ident, name, t0, time.time_ns() // 1000)


def chunk_count(n: int, threads: int) -> int:
    """Into how many chunks ``parallel_for`` cuts ``n`` items on ``threads`` threads."""
    return max(1, min(threads, n))


SHARED = "inter-op"  # the queue (and thread names) of the shared inter-op pool


def gpu_thread_mode() -> str:
    """``"global"`` (TF's default) or ``"gpu_private"``, from ``TF_GPU_THREAD_MODE``."""
    mode = os.environ.get("TF_GPU_THREAD_MODE", "") or "global"
    if mode not in ("global", "gpu_private", "gpu_shared"):
        raise errors.InvalidArgumentError(
            None,
            None,
            "Invalid TF_GPU_THREAD_MODE: %s (expected "
            "global, gpu_private or gpu_shared)" % mode[:50],
        )
    return "global" if mode == "gpu_shared" else mode


def gpu_thread_count() -> int:
    """``TF_GPU_THREAD_COUNT``: each GPU's own inter-op threads in gpu_private mode (2)."""
    text = os.environ.get("TF_GPU_THREAD_COUNT", "") or "2"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise errors.InvalidArgumentError(
            None, None, "Invalid TF_GPU_THREAD_COUNT: %s (expected an integer >= 1)" % text[:50]
        )
    return n


def short_device(device_name: str) -> str:
    """``"GPU:1"`` for ``/job:localhost/replica:0/task:0/device:GPU:1`` (thread names use it)."""
    return device_name.rsplit("/device:", 1)[-1]


def is_private(device_name: str, mode: str) -> bool:
    """Whether ops of a device run on threads of its own: a GPU in gpu_private mode."""
    return mode == "gpu_private" and short_device(device_name).startswith("GPU")


def queue_key(device_name: str, mode: str) -> str:
    """The ready queue the ops of a device wait in: ``"inter-op"`` (the shared pool's), or the
    device's own (``"GPU:0"``) in gpu_private mode."""
    return short_device(device_name) if is_private(device_name, mode) else SHARED


def intra_key(device_name: str, mode: str) -> str | None:
    """Whose intra-op pool a splittable kernel of a device splits over: the shared one
    (``"inter-op"``'s partner, keyed ``SHARED``) for a CPU, a GPU's own in gpu_private mode, and
    none (``None``: one piece) for a GPU otherwise: its kernel is the card's work."""
    if is_private(device_name, mode):
        return short_device(device_name)
    return SHARED if short_device(device_name).startswith("CPU") else None


class PoolSet:
    """The pools one step runs on: the shared inter-op and intra-op pools, and in gpu_private
    mode each GPU's own pair (made on first use)."""

    def __init__(self, inter: int, intra: int, mode: str = "global", gpu_threads: int = 2):
        self.inter_threads = inter
        self.intra_threads = intra
        self.mode = mode
        self.gpu_threads = gpu_threads
        self.inter = ThreadPool(SHARED, inter)
        self.intra = ThreadPool("intra-op", intra)
        self._private: dict[str, tuple[ThreadPool, ThreadPool]] = {}
        self._intra_of: dict[str, ThreadPool | None] = {}  # device name -> intra_for's answer
        self._lock = threading.Lock()
        # held by the one step whose device programs run on these pools (device_programs.py)
        self.programs_running = threading.Lock()

    def queue_of(self, device_name: str) -> str:
        """The ready queue the ops of a device wait in (:func:`queue_key`)."""
        return queue_key(device_name, self.mode)

    def pool(self, queue: str) -> ThreadPool:
        """The inter-op pool serving ``queue``."""
        return self.inter if queue == SHARED else self._own(queue)[0]

    def intra_for(self, device_name: str) -> ThreadPool | None:
        """The intra-op pool a splittable kernel of that device splits over (:func:`intra_key`);
        None where its kernels run in one piece.  Asked for every split kernel a pool thread
        runs, so the answer is kept per device."""
        try:
            return self._intra_of[device_name]
        except KeyError:
            pass
        key = intra_key(device_name, self.mode)
        pool = None if key is None else self.intra if key == SHARED else self._own(key)[1]
        self._intra_of[device_name] = pool
        return pool

    def _own(self, short: str):
        pair = self._private.get(short)
        if pair is None:
            with self._lock:
                pair = self._private.get(short)
                if pair is None:
                    pair = self._private[short] = (
                        ThreadPool("%s inter-op" % short, self.gpu_threads),
                        ThreadPool("%s intra-op" % short, self.intra_threads),
                    )
        return pair

    def close(self):
        self.inter.close()
        self.intra.close()
        for inter, intra in self._private.values():
            inter.close()
            intra.close()


_global_lock = threading.Lock()
_global_default = {}  # gpu thread mode -> the process-wide pools, sized by the first session
_global_named = {}  # session_inter_op_thread_pool entries with a global_name


def runs_in_caller_thread(config) -> bool:
    """TF's ``run_in_caller_thread_``: a session on the process-wide pools whose
    ``inter_op_parallelism_threads`` is negative runs each step whose graph is one partition
    (one device: a GPU op fetched to the client makes two) on the thread that called ``run``,
    one node at a time and its kernels in one piece, instead of on the inter-op pool."""
    return (
        config.inter_op_parallelism_threads < 0
        and not config.use_per_session_threads
        and not len(config.session_inter_op_thread_pool)
    )


def session_pools(config) -> tuple[list[PoolSet], list[PoolSet]]:
    """The pool sets of a session, one per inter-op pool option (index 0 = default), and the
    ones the session owns (and must close when it closes)."""
    caller = runs_in_caller_thread(config)  # (the shared pool keeps its default size then)
    inter = default_threads(0 if caller else config.inter_op_parallelism_threads)
    intra = default_threads(config.intra_op_parallelism_threads)
    mode, gpu_threads = gpu_thread_mode(), gpu_thread_count()
    entries = list(config.session_inter_op_thread_pool)
    if not entries and config.use_per_session_threads:
        # minitf: a session with its own pools also sizes its own intra-op pool (in TF the
        # intra-op pool stays process-wide), so a notebook can compare sizes.  As in TF it
        # leaves the process-wide pools alone: the first session that uses them sizes them.
        own = PoolSet(inter, intra, mode, gpu_threads)
        return [own], [own]
    with _global_lock:
        default = _global_default.get(mode)
        if default is None:
            default = _global_default[mode] = PoolSet(inter, intra, mode, gpu_threads)
        if not entries:
            return [default], []
        intra = default.intra_threads  # shared pools: the first session's size wins
        sets, owned = [], []
        for entry in entries:
            n = default_threads(entry.num_threads) if entry.num_threads else inter
            if entry.global_name:
                existing = _global_named.get(entry.global_name)
                if existing is None:
                    existing = _global_named[entry.global_name] = PoolSet(
                        n, intra, mode, gpu_threads
                    )
                elif existing.inter_threads != n:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        "Pool %s configured previously with num_threads=%d; cannot "
                        "re-configure with num_threads=%d"
                        % (entry.global_name, existing.inter_threads, n),
                    )
                sets.append(existing)
            else:
                sets.append(PoolSet(n, intra, mode, gpu_threads))
                owned.append(sets[-1])
        return sets, owned
