"""The FIFO queue a ``FIFOQueueV2`` op makes: a resource of its device, shared by name.

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
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from minitf.framework import errors

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


class FIFOQueue:
    """A bounded first-in first-out queue of tuples (``capacity`` < 0: unbounded)."""

    type_name = "FIFOQueue"

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
                self._items.append(head.elements.popleft())
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
        if not self._dequeues:
            return False
        head = self._dequeues[0]
        wanted = head.n - len(head.taken)
        if not self.closed or len(self._items) >= wanted:
            moved = False
            while len(head.taken) < head.n and self._items:
                head.taken.append(self._items.popleft())
                moved = True
            if len(head.taken) < head.n:
                return moved
            done.append((head, self._result(head), None))
        elif head.up_to and (head.taken or self._items):
            while len(head.taken) < head.n and self._items:
                head.taken.append(self._items.popleft())
            done.append((head, self._result(head), None))
        else:
            text = "%s '%s' is closed and has insufficient elements (requested %d, current size %d)"
            error = errors.OutOfRangeError(
                None, None, text % (self.type_name, self.name, wanted, len(self._items))
            )
            self._items.extendleft(reversed(head.taken))  # what it held goes back in front
            done.append((head, None, error))
        head.finished = True
        self._dequeues.popleft()
        return True

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
        return "%s '%s' is closed." % (self.type_name, self.name)


def _cancelled(kind):
    what = "Dequeue" if kind == DEQUEUE else "Enqueue"
    return errors.CancelledError(None, None, "%s operation was cancelled" % what)


def _finish(done):
    for attempt, result, error in done:
        attempt.callback(result, error)
