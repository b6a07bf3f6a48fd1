"""The queues the ``FIFOQueueV2``, ``RandomShuffleQueueV2``, ``PaddingFIFOQueueV2`` and
``PriorityQueueV2`` ops make: resources of their device, shared by name.

Book section: "Asynchronous Communication Using TensorFlow Queues".  A queue holds elements (one
tuple of arrays each) up to its capacity.  Every request that may have to wait is an *attempt*:
enqueue attempts (and a close waiting behind them) are served in arrival order from one list,
dequeue attempts from another, and after every change the queue serves the head of each list
again until neither moves (TF's queue_base.cc does the same).  So a ``dequeue_many(5)`` at the
head takes every element that arrives and holds it until it has five, and a later ``dequeue``
waits behind it.

An attempt ends by calling its callback, never while the queue's lock is held, so a callback
may touch the queue (or the step that waits for it) again.  ``cancel(attempt)`` takes a waiting
attempt out: that is how a step's cancellation (a timeout, a closed session) ends a wait.

Two counters, ``enqueued`` and ``dequeued`` (elements in and out since the queue was made), and
the waiting lists give ``stats()``: what the queue view (``minitf.viz.QueueView``) draws.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from minitf.framework import errors
from minitf.lib.philox import PhiloxSampler

ENQUEUE, DEQUEUE, CLOSE = "enqueue", "dequeue", "close"


class Attempt:
    """One waiting request: ``kind``, what it moves, and ``callback(result, error)``."""

    __slots__ = ("kind", "elements", "n", "batch", "up_to", "taken", "callback", "finished")

    def __init__(self, kind, callback, elements=(), n=1, batch=False, up_to=False):
        self.kind = kind
        self.callback = callback
        self.elements = deque(elements)  # an enqueue's elements not yet in the queue
        self.n = n  # how many elements a dequeue wants
        self.batch = batch  # dequeue_many / dequeue_up_to: results stacked on a new dim 0
        self.up_to = up_to  # dequeue_up_to: after close, what there is will do
        self.taken = []  # the elements a dequeue holds already
        self.finished = False


class QueueResource:
    """The mechanism every queue shares: a bounded store of tuples (``capacity`` < 0:
    unbounded) with the attempt lists above.  What varies is the ordering policy: where an
    element goes (``_put``), which one a dequeue takes (``_take``), how many may be taken now
    (``_available``) and where held elements go back (``_restore``); a subclass overrides those.
    """

    type_name = "QueueBase"
    single_type_name = None  # the name enqueues and single dequeues quote (default: type_name)
    whole_batches = False  # a dequeue_many never holds a partial batch (PriorityQueue)

    def __init__(self, name, component_types, shapes, capacity):
        self.name = name
        self.component_types = list(component_types)  # DTypes
        self.shapes = [tuple(s) for s in shapes]  # [] when unconstrained, else one per component
        self.capacity = capacity if capacity >= 0 else 2**31 - 1
        self.closed = False
        self._items = deque()
        self._enqueues = deque()  # enqueue and close attempts, in arrival order
        self._dequeues = deque()
        self._lock = threading.Lock()
        self.enqueued = 0  # elements put in, ever
        self.dequeued = 0  # elements handed out by finished dequeues, ever

    # -- the ordering policy (FIFO here) -----------------------------------------------------
    def _put(self, element):
        self._items.append(element)

    def _take(self):
        return self._items.popleft()

    def _available(self):
        return len(self._items)

    def _restore(self, taken):
        """Puts back the elements a failing dequeue_many held (in front, in order)."""
        self._items.extendleft(reversed(taken))

    # -- state ---------------------------------------------------------------------------------
    def size(self):
        with self._lock:
            return len(self._items)

    def is_closed(self):
        with self._lock:
            return self.closed

    def pending(self):
        """``(enqueue attempts, dequeue attempts)`` waiting now (a close counts as an enqueue)."""
        with self._lock:
            return len(self._enqueues), len(self._dequeues)

    def stats(self) -> dict:
        """One consistent reading: ``size``, ``capacity`` (None: unbounded), ``closed``, the
        counters, and the enqueues (a waiting close not counted) and dequeues blocked now."""
        with self._lock:
            return {
                "size": len(self._items),
                "capacity": None if self.capacity == 2**31 - 1 else self.capacity,
                "closed": self.closed,
                "enqueued": self.enqueued,
                "dequeued": self.dequeued,
                "blocked_enqueues": sum(a.kind == ENQUEUE for a in self._enqueues),
                "blocked_dequeues": len(self._dequeues),
            }

    def __repr__(self):
        return "<%s '%s' size=%d%s>" % (
            self.type_name,
            self.name,
            len(self._items),
            " closed" if self.closed else "",
        )

    # -- requests ------------------------------------------------------------------------------
    def enqueue(self, elements: list, callback: Callable) -> Attempt:
        """Adds ``elements`` (tuples) in order; ``callback(None, error)`` when all are in."""
        return self._submit(Attempt(ENQUEUE, callback, elements))

    def dequeue(self, n: int, callback: Callable, batch=False, up_to=False) -> Attempt:
        """Takes ``n`` elements; ``callback(list of component arrays, None)`` when it has them."""
        return self._submit(Attempt(DEQUEUE, callback, n=n, batch=batch, up_to=up_to))

    def close(self, cancel_pending_enqueues: bool, callback: Callable) -> Attempt:
        """Closes the queue: at once when ``cancel_pending_enqueues`` (failing every waiting
        enqueue), else once the enqueues that came before have put their elements in."""
        attempt = Attempt(CLOSE, callback)
        done = []
        with self._lock:
            if self.closed:
                attempt.finished = True
                error = errors.CancelledError(
                    None, None, "Queue '%s' is already closed." % self.name
                )
                done.append((attempt, None, error))
            elif cancel_pending_enqueues or not self._enqueues:
                self.closed = True
                attempt.finished = True
                done.append((attempt, None, None))
                while self._enqueues:
                    pending = self._enqueues.popleft()
                    pending.finished = True
                    done.append((pending, None, _cancelled(pending.kind)))
                self._serve(done)
            else:
                self._enqueues.append(attempt)
        _finish(done)
        return attempt

    def cancel(self, attempt: Attempt) -> None:
        """Ends ``attempt`` if it still waits: ``CancelledError`` ("Dequeue operation was
        cancelled"); elements a dequeue held are lost, as in TF."""
        done = []
        with self._lock:
            if attempt.finished:
                return
            attempt.finished = True
            waiting = self._dequeues if attempt.kind == DEQUEUE else self._enqueues
            waiting.remove(attempt)
            done.append((attempt, None, _cancelled(attempt.kind)))
            self._serve(done)
        _finish(done)

    # -- serving the attempts (caller holds the lock) -----------------------------------------
    def _submit(self, attempt):
        done = []
        with self._lock:
            if attempt.kind == ENQUEUE and self.closed:
                attempt.finished = True
                done.append((attempt, None, errors.CancelledError(None, None, self._closed_text())))
            else:
                (self._enqueues if attempt.kind == ENQUEUE else self._dequeues).append(attempt)
                self._serve(done)
        _finish(done)
        return attempt

    def _serve(self, done):
        """Serves the heads of both lists until neither moves; ``done`` collects the ended
        attempts with their results, to be called back once the lock is released."""
        moved = True
        while moved:
            moved = self._serve_enqueue(done) | self._serve_dequeue(done)

    def _serve_enqueue(self, done):
        if not self._enqueues:
            return False
        head = self._enqueues[0]
        if head.kind == CLOSE:
            self.closed = True
        elif self.closed:  # came after a close that waited for the enqueues before it
            done.append((head, None, errors.CancelledError(None, None, self._closed_text())))
        else:
            moved = False
            while head.elements and len(self._items) < self.capacity:
                self._put(head.elements.popleft())
                self.enqueued += 1
                moved = True
            if head.elements:
                return moved
            done.append((head, None, None))
        if head.kind == CLOSE:
            done.append((head, None, None))
        head.finished = True
        self._enqueues.popleft()
        return True

    def _serve_dequeue(self, done):
        """Serves the head dequeue: takes what the policy allows now, holds a partial batch
        (unless ``whole_batches``), and after close ends it as TF's TryDequeueMany does."""
        if not self._dequeues:
            return False
        head = self._dequeues[0]
        wanted, size = head.n - len(head.taken), len(self._items)
        if self.closed and size < wanted and not (self.whole_batches and head.up_to and size):
            if head.up_to and (head.taken or size) and not self.whole_batches:
                self._restore(head.taken)  # then what is left will do
                head.taken, head.n, wanted = [], len(self._items), len(self._items)
            else:
                self._fail_short(head, wanted, size, done)
                return True
        if self.whole_batches and not self.closed and size < wanted:
            return False
        moved = False
        for _ in range(min(wanted, self._available())):
            head.taken.append(self._take())
            moved = True
        if len(head.taken) < head.n:
            return moved
        self.dequeued += len(head.taken)
        done.append((head, self._result(head), None))
        head.finished = True
        self._dequeues.popleft()
        return True

    def _fail_short(self, head, wanted, size, done):
        """A closed queue cannot give ``wanted`` more: OutOfRangeError; what the dequeue held
        goes back (TF quotes the size before that)."""
        text = "%s '%s' is closed and has insufficient elements (requested %d, current size %d)"
        kind = self.type_name if head.batch else (self.single_type_name or self.type_name)
        error = errors.OutOfRangeError(None, None, text % (kind, self.name, wanted, size))
        if not self.whole_batches:
            self._restore(head.taken)
        done.append((head, None, error))
        head.finished = True
        self._dequeues.popleft()

    def _result(self, attempt):
        """The component arrays of a finished dequeue: the element itself, or a batch."""
        if not attempt.batch:
            return list(attempt.taken[0])
        if not attempt.taken:
            return [
                np.zeros((0,) + shape, dtype=dt.as_numpy_dtype)
                for dt, shape in zip(self.component_types, self.shapes)
            ]
        return [np.stack([e[c] for e in attempt.taken]) for c in range(len(self.component_types))]

    def _closed_text(self):
        return "%s '%s' is closed." % (self.single_type_name or self.type_name, self.name)


class FIFOQueue(QueueResource):
    """``FIFOQueueV2``: elements leave in the order they came."""

    type_name = "FIFOQueue"


class PaddingFIFOQueue(FIFOQueue):
    """``PaddingFIFOQueueV2`` (padding_fifo_queue.cc): a FIFO whose shapes may have unknown
    dimensions; ``dequeue_many``/``dequeue_up_to`` pad each component to the largest size of
    each dimension in the batch with 0, ``b""`` or False.  Only TryDequeueMany is its own, so
    enqueues and single dequeues quote ``FIFOQueue``."""

    type_name = "PaddingFIFOQueue"
    single_type_name = "FIFOQueue"

    def _result(self, attempt):
        if not attempt.batch:
            return list(attempt.taken[0])
        out = []
        for c, (dt, shape) in enumerate(zip(self.component_types, self.shapes)):
            values = [np.asarray(e[c]) for e in attempt.taken]
            dims = [
                max([v.shape[i] for v in values], default=0) if d is None else d
                for i, d in enumerate(shape)
            ]
            batch = np.empty([len(values)] + dims, dtype=dt.as_numpy_dtype)
            batch.fill(_padding(dt))
            for j, v in enumerate(values):
                batch[(j,) + tuple(slice(0, k) for k in v.shape)] = v
            out.append(batch)
        return out


def _padding(dt):
    if dt.name == "string":
        return b""
    return False if dt.name == "bool" else 0


class RandomShuffleQueue(QueueResource):
    """``RandomShuffleQueueV2`` (random_shuffle_queue_op.cc): a dequeue takes element
    ``sample % size`` (Philox samples keyed by the seeds; fresh seeds when both are 0) and moves
    the last element into the hole; while open, ``min_after_dequeue`` elements always stay."""

    type_name = "RandomShuffleQueue"

    def __init__(self, name, component_types, shapes, capacity, min_after_dequeue, seeds):
        super().__init__(name, component_types, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        self.seeds = tuple(seeds)  # as requested: (0, 0) stays (0, 0) for the sharing check
        seed, seed2 = seeds
        if seed == 0 and seed2 == 0:
            seed, seed2 = secrets.randbits(64), secrets.randbits(64)
        self._sample = PhiloxSampler(seed, seed2)
        self._items = []

    def _put(self, element):
        self._items.append(element)

    def _take(self):
        i = self._sample() % len(self._items)
        element = self._items[i]
        self._items[i] = self._items[-1]
        self._items.pop()
        return element

    def _available(self):
        if self.closed:
            return len(self._items)
        return max(0, len(self._items) - self.min_after_dequeue)

    def _restore(self, taken):
        self._items.extend(taken)  # TF pushes them back at the end


class PriorityQueue(QueueResource):
    """``PriorityQueueV2`` (priority_queue.cc): component 0 is an int64 priority, the smallest
    leaves first.  A dequeue_many waits for a whole batch (so it comes out sorted); TF's quirk
    is kept: ``dequeue_up_to(n)`` on a closed queue with 0 < k < n elements takes the k and then
    fails with ``(requested n-k, current size 0)``, losing them."""

    type_name = "PriorityQueue"
    whole_batches = True

    def __init__(self, name, component_types, shapes, capacity):
        super().__init__(name, component_types, shapes, capacity)
        self._items = []  # a heap of (priority, arrival, element)
        self._arrivals = itertools.count()

    def _put(self, element):
        heapq.heappush(self._items, (int(element[0]), next(self._arrivals), element))

    def _take(self):
        return heapq.heappop(self._items)[2]

    def _restore(self, taken):
        for element in taken:
            self._put(element)


def _cancelled(kind):
    what = "Dequeue" if kind == DEQUEUE else "Enqueue"
    return errors.CancelledError(None, None, "%s operation was cancelled" % what)


def _finish(done):
    for attempt, result, error in done:
        attempt.callback(result, error)
