"""The rendezvous: where a step's ``_Send`` ops leave tensors for their ``_Recv`` ops.

Book sections: "Placing Operations on Devices" and "The Master and Worker Services".  When a
graph is split over devices or tasks (``runtime/graph_partition.py``), every edge that crosses
becomes a ``_Send`` on the producer's side and a ``_Recv`` on the consumer's, both naming the
same *key*: ``send_device;send_device_incarnation;recv_device;tensor_name;0:0`` (TF's format).
The ``_Send`` puts its tensor into the step's rendezvous under that key; the ``_Recv`` asks for
the key and is called back when the tensor is there, holding no thread while it waits.

:class:`LocalRendezvous` is the exchange of one step inside one process (TF's
``LocalRendezvousImpl``).  A worker keeps one per running step (``runtime/rendezvous_mgr.py``),
and the distributed runtime fetches tensors of keys sent on other tasks over gRPC
(``distributed/rpc_rendezvous.py``).  Aborting a step's rendezvous fails every waiting and
later ``_Recv`` with the abort's error, so one failure ends the whole step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from minitf.framework import errors

Done = Callable[[Any, "errors.OpError | None"], None]


def create_key(send_device: str, incarnation: int, recv_device: str, tensor_name: str) -> str:
    """TF's rendezvous key of one edge (frame and iteration always ``0:0`` here)."""
    return "%s;%016x;%s;%s;0:0" % (send_device, incarnation & (2**64 - 1), recv_device, tensor_name)


def parse_key(key: str) -> tuple[str, int, str, str]:
    """``(send device, incarnation, recv device, tensor name)`` of a key made by create_key;
    InvalidArgumentError for anything else."""
    parts = key.split(";")
    try:
        if len(parts) != 5:
            raise ValueError
        return parts[0], int(parts[1], 16), parts[2], parts[3]
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, "Invalid rendezvous key: %s" % key[:200]
        ) from None


class LocalRendezvous:
    """One step's tensors in transit inside one process: each key is sent once and received
    once, in either order."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._waiters: dict[str, Done] = {}
        self._error: errors.OpError | None = None
        self.created = time.monotonic()

    @property
    def aborted(self) -> errors.OpError | None:
        """The error the step was aborted with, or None."""
        return self._error

    def send(self, key: str, value: Any) -> None:
        """Leaves ``value`` under ``key`` (calls back its ``_Recv`` if it is waiting already);
        raises the abort error if the step was aborted."""
        with self._lock:
            if self._error is not None:
                raise self._error
            waiter = self._waiters.pop(key, None)
            if waiter is None:
                self._values[key] = value
        if waiter is not None:
            waiter(value, None)

    def recv_async(self, key: str, done: Done) -> None:
        """Calls ``done(value, None)`` once ``key`` was sent (at once if it was), or
        ``done(None, error)`` if the step is aborted first."""
        with self._lock:
            error = self._error
            if error is None:
                if key in self._values:
                    value = self._values.pop(key)
                else:
                    self._waiters[key] = done
                    return
        if error is not None:
            done(None, error)
        else:
            done(value, None)

    def recv(self, key: str, timeout: float) -> Any:
        """The value sent under ``key``, waiting at most ``timeout`` seconds
        (DeadlineExceededError after that; the abort error if the step is aborted)."""
        got = threading.Event()
        box: list = []

        def done(value, error):
            box.append((value, error))
            got.set()

        self.recv_async(key, done)
        if not got.wait(max(timeout, 0.0)):
            self.forget(key, done)
            if not got.is_set():
                raise errors.DeadlineExceededError(
                    None, None, "Timed out waiting for tensor %s" % key[:200]
                )
        value, error = box[0]
        if error is not None:
            raise error
        return value

    def abort(self, error: errors.OpError) -> None:
        """Fails every waiting and later receive (and later sends) with ``error``; the first
        abort wins."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            self._values.clear()
            waiters, self._waiters = list(self._waiters.values()), {}
        for done in waiters:
            done(None, error)

    def forget(self, key: str, done: Done) -> None:
        """Withdraws the receive of ``key`` that ``done`` waits for, if it still waits (its
        receiver gave up: a timeout, a cancelled call)."""
        with self._lock:
            if self._waiters.get(key) is done:
                del self._waiters[key]

    def pending(self) -> int:
        """Values sent but not yet received (a step that ended cleanly leaves none)."""
        with self._lock:
            return len(self._values)
