"""A worker's rendezvous: each running step's tensors in transit, and fetching a peer's.

Book section: "The Master and Worker Services".  A worker keeps one
:class:`~minitf.framework.rendezvous.LocalRendezvous` per step it runs (:class:`RendezvousMgr`,
TF's ``BaseRendezvousMgr``): its partitions' ``_Send`` ops leave tensors there, for ``_Recv``
ops of its own devices and for peers, whose ``RecvTensor`` calls take them.  The step's kernels
see it through an :class:`RpcRendezvous` (TF's ``RpcRemoteRendezvous``): a key sent on this
task is received locally; a key sent on another task is fetched from that task with a
``RecvTensor`` call, on a transport thread, so the waiting ``_Recv`` holds none of the step's.
Aborting a step fails its local waits and cancels its calls, and a late ``RecvTensor`` for it
gets the abort's error: a failure spreads through the cluster instead of leaving steps hanging.
"""

from __future__ import annotations

import threading
import time

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire
from minitf.distributed.worker_cache import closed_channel_error, rpc_error
from minitf.framework import errors
from minitf.framework.rendezvous import LocalRendezvous, parse_key
from minitf.runtime import device_name_utils as dnu

_STALE_SECONDS = 600.0


class RendezvousMgr:
    """The :class:`LocalRendezvous` of every step a worker runs, by step id.  A step's table
    goes once the step has ended here and peers took everything it sent; tables of steps
    aborted (or never taken from) are swept after a while."""

    def __init__(self):
        self._lock = threading.Lock()
        self._steps: dict[int, LocalRendezvous] = {}
        self._ended: set[int] = set()
        self._last_sweep = time.monotonic()

    def find(self, step_id: int) -> LocalRendezvous:
        """The step's rendezvous (made on first use: a peer may ask before the step starts)."""
        with self._lock:
            r = self._steps.get(step_id)
            if r is None:
                r = self._steps[step_id] = LocalRendezvous()
            return r

    def recv(self, step_id: int, key: str, timeout: float):
        """What ``RecvTensor`` answers: the value sent under ``key`` in that step."""
        r = self.find(step_id)
        try:
            return r.recv(key, timeout)
        finally:
            self._drop_if_empty(step_id, r)

    def abort(self, step_id: int, error: errors.OpError) -> None:
        self.find(step_id).abort(error)

    def finish(self, step_id: int) -> None:
        """The step ended here: its table goes once peers took everything it sent; stale
        tables are swept."""
        with self._lock:
            r = self._steps.get(step_id)
            if r is not None:
                self._ended.add(step_id)
        if r is not None:
            self._drop_if_empty(step_id, r)
        now = time.monotonic()
        if now - self._last_sweep < 10.0:
            return
        with self._lock:
            self._last_sweep = now
            for s in [s for s, t in self._steps.items() if now - t.created > _STALE_SECONDS]:
                del self._steps[s]
                self._ended.discard(s)

    def _drop_if_empty(self, step_id, r):
        with self._lock:
            if (
                step_id in self._ended
                and self._steps.get(step_id) is r
                and r.pending() == 0
                and r.aborted is None
            ):
                del self._steps[step_id]
                self._ended.discard(step_id)

    def abort_all(self, error: errors.OpError) -> None:
        with self._lock:
            steps = list(self._steps.values())
        for r in steps:
            r.abort(error)


class RpcRendezvous:
    """One step's rendezvous as its kernels on a worker see it (``ctx.rendezvous``)."""

    def __init__(self, worker, step_id: int, deadline: float):
        self.worker = worker
        self.step_id = step_id
        self.deadline = deadline
        self.local = worker.rendezvous.find(step_id)
        self._lock = threading.Lock()
        self._calls = []
        self._aborted = None

    def send(self, key, value):
        self.local.send(key, value)

    def recv_async(self, key, done):
        send_device = parse_key(key)[0]
        task = dnu.task_name_of(send_device)
        if task == self.worker.task_name:
            self.local.recv_async(key, done)
        else:
            self.worker.rpc_pool.submit(self._fetch, task, key, done)

    def _fetch(self, task, key, done):
        """Runs on a transport thread: a ``RecvTensor`` call to ``task`` for ``key``."""
        try:
            value = self._call(task, key)
        except Exception as e:  # noqa: BLE001 - handed to the _Recv
            done(None, e)
            return
        done(value, None)

    def _call(self, task, key):
        address = self.worker.task_address(task)
        channels = self.worker.channels
        timeout = max(self.deadline - time.monotonic(), 0.001)
        try:
            call = channels.worker(address).RecvTensor(
                pb.RecvTensorRequest(step_id=self.step_id, rendezvous_key=key),
                timeout=timeout,
                metadata=channels.metadata,
            )
        except ValueError:  # the channel closed meanwhile: another call found the peer gone
            raise closed_channel_error(task, address) from None
        with self._lock:
            if self._aborted is not None:
                call.cancel()
                raise self._aborted
            self._calls.append(call)
        try:
            return wire.assemble_chunks(call)
        except grpc.RpcError as e:
            channels.failed(address, e)
            if self._aborted is not None:
                raise self._aborted from None
            err = rpc_error(e, task)
            err.derived = True  # the peer's failure (or its absence) caused this one
            raise err from None
        finally:
            with self._lock:
                if call in self._calls:
                    self._calls.remove(call)

    def abort(self, error):
        """Ends the step's waits: local ones fail with ``error``, calls to peers are cancelled."""
        with self._lock:
            if self._aborted is None:
                self._aborted = error
            calls, self._calls = list(self._calls), []
        for c in calls:
            c.cancel()
        self.worker.rendezvous.abort(self.step_id, error)
