"""A worker's rendezvous: each running step's tensors in transit, and fetching a peer's.

Book section: "The Master and Worker Services".  A worker keeps one
:class:`~minitf.framework.rendezvous.LocalRendezvous` per step it runs (:class:`RendezvousMgr`,
TF's ``BaseRendezvousMgr``): its partitions' ``_Send`` ops leave tensors there, for ``_Recv``
ops of its own devices and for peers, whose ``RecvTensor`` calls take them.  The step's kernels
see it through an :class:`RpcRendezvous` (TF's ``RpcRemoteRendezvous``): a key sent on this
task is received locally; the keys sent on another task are fetched from that task on a
transport thread, so a waiting ``_Recv`` holds none of the step's threads.  A partition's keys
are fixed when it is planned (:func:`remote_keys`), so at the step's start it asks each peer
for all of its keys with ONE ``RecvTensors`` request, answered tensor by tensor as the peer's
``_Send`` ops leave them (TF makes one ``RecvTensor`` call per key; in Python a call costs
about as much CPU as a small model's step moves, so minitf pays one per peer instead).  The
request goes on a ``RecvTensorsSteps`` call kept open to that peer from step to step
(``streams.py``, as the master's ``RunGraphs``): opening a call cost each side about as much
again as its messages (bench/README.md, "Data parallelism figures").
Aborting a step fails its local waits and cancels its calls (a cancelled call is not reused;
a peer's death breaks the open call at once: UnavailableError), and a late ``RecvTensor`` for it
gets the abort's error: a failure spreads through the cluster instead of leaving steps hanging.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import streams, wire
from minitf.distributed.worker_cache import rpc_error
from minitf.framework import errors
from minitf.framework.rendezvous import LocalRendezvous, parse_key
from minitf.kernels.sendrecv_kernels import edge_key
from minitf.runtime import device_name_utils as dnu

_STALE_SECONDS = 600.0
#: Aborted steps whose error a late peer still gets (the newest ones); their tables are gone.
_ABORTED_KEPT = 1024


class RendezvousMgr:
    """The :class:`LocalRendezvous` of every step a worker runs, by step id.  A step's table
    goes once the step has ended here and peers took everything it sent, or at once when the
    step ended aborted (TF's worker cleans up an aborted step's rendezvous): then only its
    error stays, among the last :data:`_ABORTED_KEPT` aborted steps', so that a peer asking
    late fails with it instead of waiting.  Tables never taken from are swept after a while."""

    def __init__(self):
        self._lock = threading.Lock()
        self._steps: dict[int, LocalRendezvous] = {}
        self._ended: set[int] = set()
        # step id -> (error class, message, derived), oldest first: not the error itself, which
        # once raised holds the failed step's frames (and their tensors) in its traceback
        self._aborted: dict[int, tuple] = {}
        self._last_sweep = time.monotonic()

    def find(self, step_id: int) -> LocalRendezvous:
        """The step's rendezvous (made on first use: a peer may ask before the step starts;
        made aborted for a step that ended aborted)."""
        with self._lock:
            r = self._steps.get(step_id)
            if r is None:
                r = self._steps[step_id] = LocalRendezvous()
                kept = self._aborted.get(step_id)
                if kept is not None:
                    error = kept[0](None, None, kept[1])
                    error.derived = kept[2]
                    r.abort(error)
                    self._ended.add(step_id)  # it goes when this late caller is done
            return r

    def recv(self, step_id: int, key: str, timeout: float):
        """What ``RecvTensor`` answers: the value sent under ``key`` in that step."""
        parse_key(key)  # a malformed key (InvalidArgumentError) is never sent: no waiting
        r = self.find(step_id)
        try:
            return r.recv(key, timeout)
        finally:
            self._drop_if_empty(step_id, r)

    def recv_many(self, step_id: int, keys: list, deadline: float, on_cancel):
        """What ``RecvTensors`` answers: lists of ``(key, value)`` of the step's ``keys``, each
        list holding those sent since the previous one, until every key came.  A key's failure
        (the step aborted) raises its error; ``deadline`` passing DeadlineExceededError;
        ``on_cancel(fn)`` asks for ``fn()`` when the call ends (then it stops waiting)."""
        if len(set(keys)) != len(keys):
            raise errors.InvalidArgumentError(None, None, "RecvTensors got a key twice.")
        for k in keys:
            parse_key(k)
        r = self.find(step_id)
        got: queue.SimpleQueue = queue.SimpleQueue()
        waits = {k: (lambda v, e, k=k: got.put((k, v, e))) for k in keys}
        on_cancel(lambda: got.put(None))
        try:
            for k, done in waits.items():
                r.recv_async(k, done)
            left = len(keys)
            while left:
                batch = [_next_arrival(got, deadline, keys)]
                while not got.empty():
                    batch.append(got.get_nowait())
                if None in batch:
                    raise errors.CancelledError(None, None, "RecvTensors was cancelled.")
                for _, _, e in batch:
                    if e is not None:
                        raise e
                left -= len(batch)
                yield [(k, v) for k, v, _ in batch]
        finally:
            for k, done in waits.items():
                r.forget(k, done)
            self._drop_if_empty(step_id, r)

    def abort(self, step_id: int, error: errors.OpError) -> None:
        self.find(step_id).abort(error)
        with self._lock:
            self._aborted.setdefault(
                step_id, (type(error), error.message, getattr(error, "derived", False))
            )
            while len(self._aborted) > _ABORTED_KEPT:
                del self._aborted[next(iter(self._aborted))]
        self._drop_if_empty(step_id, self._steps.get(step_id))

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
                and (r.pending() == 0 or r.aborted is not None)
            ):
                del self._steps[step_id]
                self._ended.discard(step_id)

    def abort_all(self, error: errors.OpError) -> None:
        with self._lock:
            steps = list(self._steps.values())
        for r in steps:
            r.abort(error)


def _next_arrival(got, deadline, keys):
    try:
        return got.get(timeout=max(deadline - time.monotonic(), 0.0))
    except queue.Empty:
        raise errors.DeadlineExceededError(
            None, None, "Timed out waiting for tensors %s" % ", ".join(keys)[:200]
        ) from None


_REMOTE_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def remote_keys(eplan, task_name: str) -> dict:
    """``{peer task: [keys]}``: what the ``_Recv`` ops of a partition's plan take from other
    tasks (known once the plan is built: every key names its step's frame ``0:0``)."""
    keys = _REMOTE_KEYS.get(eplan)
    if keys is None:
        keys = {}
        for n in eplan.nodes:
            if n.type == "_Recv":
                key = edge_key(n)
                task = dnu.task_name_of(parse_key(key)[0])
                if task != task_name:
                    keys.setdefault(task, []).append(key)
        _REMOTE_KEYS[eplan] = keys
    return keys


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
        self._ahead: set = set()  # keys fetched ahead (prefetch), kept in self._arrived
        self._arrived = LocalRendezvous()

    def send(self, key, value):
        self.local.send(key, value)

    def prefetch(self, keys_by_task: dict) -> None:
        """Asks each peer, with one ``RecvTensors`` request, for every key the step will take
        from it; their ``_Recv`` ops then find the tensors here as they arrive."""
        for task, keys in keys_by_task.items():
            self._ahead.update(keys)
            self.worker.rpc_pool.submit(self._fetch_many, task, keys)

    def recv_async(self, key, done):
        if key in self._ahead:
            self._arrived.recv_async(key, done)
            return
        send_device = parse_key(key)[0]
        task = dnu.task_name_of(send_device)
        if task == self.worker.task_name:
            self.local.recv_async(key, done)
            return
        self.prefetch({task: [key]})  # a key the step's plan did not list (none do)
        self._arrived.recv_async(key, done)

    def _fetch_many(self, task, keys):
        """Runs on a transport thread: a ``RecvTensors`` request to ``task`` for ``keys``, each
        tensor handed on as it completes; a failure fails every key not yet there."""
        wanted = set(keys)
        receiver = wire.NamedTensorReceiver(max_total_bytes=len(keys) * wire.MAX_TENSOR_BYTES)
        try:
            for raw in self._stream(task, keys):
                receiver.add_message(raw, pb.RecvTensorsResponse, "tensor", "part")
                for key, value in receiver.take().items():
                    if key not in wanted:
                        raise wire.malformed("RecvTensorsResponse")
                    wanted.discard(key)
                    self._arrived.send(key, value)
            receiver.finish()
            if wanted:
                raise errors.UnavailableError(
                    None, None, "%s ended the call before sending every tensor." % task
                )
        except Exception as e:  # noqa: BLE001 - handed to the _Recv ops still waiting
            self._arrived.abort(errors.as_op_error(e))

    def _stream(self, task, keys):
        """The answer messages of a step's ``RecvTensors`` to ``task`` for ``keys``, on one of
        the calls kept open to that peer (``RecvTensorsSteps``, a :class:`streams.StreamPool`:
        no call set-up per step), which abort() cancels; a failed call raises the OpError of
        its status (derived: the peer's failure)."""
        address = self.worker.task_address(task)
        channels = self.worker.channels
        timeout = max(self.deadline - time.monotonic(), 0.001)
        request = pb.RecvTensorsRequest(
            step_id=self.step_id, rendezvous_key=keys, timeout_ms=max(int(timeout * 1000), 1)
        ).SerializeToString()
        step = None
        try:
            with self._lock:
                if self._aborted is not None:
                    raise self._aborted
            step = channels.steps(address, "RecvTensorsSteps").acquire().step(request, timeout)
            with self._lock:
                aborted = self._aborted
                if aborted is None:
                    self._calls.append(step)
            if aborted is not None:
                step.cancel()
                streams.watchdog.unwatch(step)  # (its answer was never read)
                raise aborted
            yield from step
        except grpc.RpcError as e:
            channels.failed(address, e)
            if self._aborted is not None:
                raise self._aborted from None
            err = rpc_error(e, task)
            err.derived = True  # the peer's failure (or its absence) caused this one
            raise err from None
        finally:
            if step is not None:
                step.close()  # (a no-op once it ended) a reader that stops early cancels it
                with self._lock:
                    if step in self._calls:
                        self._calls.remove(step)

    def abort(self, error):
        """Ends the step's waits: local ones fail with ``error``, calls to peers are cancelled."""
        with self._lock:
            if self._aborted is None:
                self._aborted = error
            calls, self._calls = list(self._calls), []
        for c in calls:
            c.cancel()
        self._arrived.abort(error)
        self.worker.rendezvous.abort(self.step_id, error)
