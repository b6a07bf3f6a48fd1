"""``tf.train.QueueRunner``: threads that keep a queue filled.

Book section: "Multithreaded readers using a Coordinator and a QueueRunner" (Figure 12-10).  A
runner holds a queue and the ops that enqueue into it; ``create_threads`` starts one thread per
enqueue op, each running it in a loop until the coordinator stops or the input runs out
(OutOfRangeError: the last thread to see it closes the queue, so its consumers can drain it).
With a coordinator, one more thread waits for the stop and then closes the queue cancelling
pending enqueues, which frees threads blocked on a full queue.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from minitf.framework import errors
from minitf.framework.graph import GraphKeys, get_default_graph, get_default_session

logger = logging.getLogger("minitf")


class QueueRunner:
    """A queue and the ops that fill it, run by threads (``create_threads``)."""

    def __init__(
        self,
        queue: Any = None,
        enqueue_ops: list | None = None,
        close_op: Any = None,
        cancel_op: Any = None,
        queue_closed_exception_types: tuple | None = None,
        queue_runner_def: Any = None,
        import_scope: str | None = None,
    ) -> None:
        if queue_runner_def is not None:
            raise ValueError("minitf builds QueueRunners from a queue and ops, not from a proto")
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        if queue_closed_exception_types is None:
            queue_closed_exception_types = (errors.OutOfRangeError,)
        types = tuple(queue_closed_exception_types)
        if not types or not all(
            isinstance(t, type) and issubclass(t, errors.OpError) for t in types
        ):
            raise TypeError(
                "queue_closed_exception_types, when provided, must be a tuple of "
                "tf.error types, but saw: %s" % (queue_closed_exception_types,)
            )
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        self._queue_closed_exception_types = types
        self._lock = threading.Lock()
        self._runs_per_session: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._exceptions_raised: list[BaseException] = []

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: self._enqueue_ops)
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    queue_closed_exception_types = property(lambda self: self._queue_closed_exception_types)
    exceptions_raised = property(lambda self: self._exceptions_raised)

    @property
    def name(self) -> str:
        return self._queue.name

    def _run(self, sess, enqueue_op, coord=None):
        """One enqueue thread: runs ``enqueue_op`` until the stop or the input runs out."""
        decremented = False
        try:
            while coord is None or not coord.should_stop():
                try:
                    sess.run(enqueue_op)
                except self._queue_closed_exception_types:
                    with self._lock:  # the last thread of this session closes the queue
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        if self._runs_per_session[sess] == 0:
                            try:
                                sess.run(self._close_op)
                            except Exception as e:  # noqa: BLE001 - TF logs and goes on
                                logger.info("Ignored exception: %s", e)
                        return
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, as TF does
            if coord:
                coord.request_stop(e)
            else:
                logger.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess, coord):
        """Waits for the stop, then closes the queue cancelling blocked enqueues."""
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception as e:  # noqa: BLE001 - the session may be closing: nothing to do
            logger.info("Ignored exception: %s", e)

    def create_threads(
        self, sess: Any, coord: Any = None, daemon: bool = False, start: bool = False
    ) -> list[threading.Thread]:
        """One thread per enqueue op (and one that closes the queue on ``coord``'s stop),
        registered with ``coord``; none when this session's threads still run."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [
            threading.Thread(
                target=self._run,
                args=(sess, op, coord),
                name="QueueRunnerThread-%s-%s" % (self.name, op.name),
            )
            for op in self._enqueue_ops
        ]
        if coord:
            name = "QueueRunnerThread-%s-close_on_stop" % self.name
            threads.append(
                threading.Thread(target=self._close_on_stop, args=(sess, coord), name=name)
            )
        for t in threads:
            if coord:
                coord.register_thread(t)
            t.daemon = daemon
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds ``qr`` to the graph's collection of queue runners (what
    ``start_queue_runners`` starts)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(
    sess: Any = None,
    coord: Any = None,
    daemon: bool = True,
    start: bool = True,
    collection: str = GraphKeys.QUEUE_RUNNERS,
) -> list[threading.Thread]:
    """Starts the threads of every queue runner of the graph's collection (daemon threads)."""
    from minitf.runtime.session import BaseSession

    if sess is None:
        sess = get_default_session()
        if not sess:
            raise ValueError(
                "Cannot start queue runners: No default session is registered. Use "
                "`with sess.as_default()` or pass an explicit session to "
                "tf.start_queue_runners(sess=sess)"
            )
    if not isinstance(sess, BaseSession):
        if type(sess).__name__ in ("MonitoredSession", "SingularMonitoredSession"):
            return []  # they start their own
        raise TypeError(
            "sess must be a `tf.Session` object. Given class: {}".format(sess.__class__)
        )
    runners = sess.graph.get_collection(collection)
    if not runners:
        logger.warning(
            "`tf.train.start_queue_runners()` was called when no queue runners were defined. "
            "You can safely remove the call to this deprecated function."
        )
    threads = []
    for qr in runners:
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
