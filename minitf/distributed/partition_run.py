"""One step of a master session: its partitions run on their tasks at the same time.

Book section: "The Master and Worker Services" (TF's ``MasterSession::ReffedClientGraph::
RunPartitions``).  Each task whose partition the step needs gets one ``RunGraph`` request: the
values fed to its ``_Arg`` nodes, the tensors to answer (``recv_key``), the step's options.  The
master's own task runs its partition by a direct call; other tasks on an open ``RunGraphs``
call (``streams.py``) when the request fits in one message, else on a ``RunGraph`` call of its
own.  Their answers are forwarded to the client as they come.  The first failure cancels the
other partitions, and once all have stopped the step fails with a root cause (an error that is
not *derived* from another) rather than the errors it caused.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import wire
from minitf.distributed.worker import partition_answer
from minitf.distributed.worker_cache import rpc_error
from minitf.framework import errors

_DONE = object()


def step_options(options, remaining, config):
    """``(seconds the step may take, the RunStepOptions its partitions get)``: the client's
    deadline, the step's ``timeout_in_ms`` and the session's ``operation_timeout_in_ms``,
    whichever ends first (a partition on an open call learns it from its request)."""
    timeout = wire.handler_seconds(remaining, wire.DEFAULT_STEP_SECONDS)
    op_timeout = wire.timeout_seconds(options.timeout_in_ms) or wire.timeout_seconds(
        config.operation_timeout_in_ms
    )
    if op_timeout is not None:
        timeout = min(timeout, op_timeout)
    ms = int(math.ceil(timeout * 1000))
    if timeout < wire.DEFAULT_STEP_SECONDS and options.timeout_in_ms != ms:
        options = pb.RunStepOptions(trace_level=options.trace_level, timeout_in_ms=ms)
    return timeout, options


class PartitionRun:
    """The partitions of one step of ``sess`` (signature ``sig``) with the client's ``feeds``."""

    def __init__(self, master, sess, sig, step_id, feeds, options, remaining):
        self.master = master
        self.sess = sess
        self.sig = sig
        self.step_id = step_id
        self.feeds = feeds
        self.timeout, self.options = step_options(options, remaining, sess.config)
        self._lock = threading.Lock()
        self._calls = {}
        self._cancelled = False
        self._reason = "Step was cancelled"

    def messages(self, on_cancel):
        """Runs the partitions, yielding their response messages as they come: one partition is
        read on this thread (the master's own when it has one, else a remote one: no
        hand-off), the others on the master's pool."""
        tasks = self.sig.tasks
        if not tasks:  # only fed values fetched
            return
        here = self.master.task_name if self.master.task_name in tasks else tasks[0]
        others = [t for t in tasks if t != here]
        on_cancel(self.cancel_all)  # the client went away
        arrived = queue.SimpleQueue()
        # every remote partition's request goes out now, from this thread, before any answer
        # is read or the master's own partition runs (TF's master issues its RunGraph calls
        # first): handed to a pool thread, it waited for the GIL while the local one ran
        opened = {t: self._open(t) for t in others}
        for t in others:
            self.master.pool.submit(self._pump, t, arrived, opened[t])
        failures = []
        try:
            yield from self._partition(here)
        except Exception as e:  # noqa: BLE001 - reported once every partition stopped
            failures.append(e)
            self.cancel_all()
        yield from self._gather(arrived, len(others), failures)
        if failures:
            root = [e for e in failures if not getattr(e, "derived", False)]
            raise (root or failures)[0]

    def _gather(self, arrived, waiting, failures):
        while waiting:
            try:  # every partition ends by itself: calls have deadlines, local runs timeouts
                m = arrived.get(timeout=self.timeout + wire.CONTROL_RPC_SECONDS)
            except queue.Empty:
                self.cancel_all()
                raise errors.DeadlineExceededError(
                    None, None, "Timed out waiting for the partitions of step %d" % self.step_id
                ) from None
            if m is _DONE:
                waiting -= 1
            elif isinstance(m, Exception):
                waiting -= 1
                failures.append(m)
                self.cancel_all()
            elif not failures:
                yield m

    def _pump(self, task, arrived, opened):
        try:
            for m in self._remote(task, opened):
                arrived.put(m)
            arrived.put(_DONE)
        except Exception as e:  # noqa: BLE001
            # the first failure stops the others at once, the partition read on the step's
            # own thread too (it may run for long yet), as TF's master aborts a step's rendezvous
            if not getattr(e, "derived", False):
                self.cancel_all()
            arrived.put(e)

    def cancel_all(self, reason=None):
        """Cancels every partition's call; ``reason``: what the step reports (its session was
        closed), in place of what gRPC says of a call cancelled by its caller."""
        with self._lock:
            self._cancelled = True
            self._reason = reason or self._reason
            pending = list(self._calls.values())
        for c in pending:
            c.cancel()

    def _track(self, task, call):
        with self._lock:
            self._calls[task] = call
            if self._cancelled:
                call.cancel()

    # -- one partition -----------------------------------------------------------------------
    def _partition(self, task):
        if task == self.master.task_name:
            return self._local(task)
        return self._remote(task, self._open(task))

    def _local(self, task):
        """The master's own worker: a direct call, no RPC."""
        sends = {name: self.feeds[name] for name in self.sig.feed_at.get(task, ())}
        try:
            out, stats = self.master.server.worker.run_graph(
                self.sig.run_graph_request(task, self.sess.handle, self.options, self.step_id),
                sends,
                self.timeout,
                lambda step: self._track(task, step),
            )
        except errors.CancelledError:
            if not self._cancelled:
                raise
            err = errors.CancelledError(None, None, self._reason)  # as a remote call's
            err.derived = True
            raise err from None
        yield from partition_answer(out, stats)

    def _open(self, task):
        """Sends a remote partition's RunGraph request: ``(the call to read its answer from,
        None)``, or ``(None, the error sending it raised)``, which ``_remote`` reports as its
        own (a pair: a gRPC call object is itself an ``RpcError``)."""
        try:
            return self._send(task, self.master.server.worker.task_address(task)), None
        except Exception as e:  # noqa: BLE001 - raised again where the answer is read
            return None, e

    def _send(self, task, address):
        sends = [(name, self.feeds[name]) for name in self.sig.feed_at.get(task, ())]
        inline, parts = wire.split_named_tensors(
            sends, chunk_bytes=wire.STREAM_CHUNK_BYTES, wrap=(pb.RunGraphRequest, "send_part")
        )
        head = self.sig.run_graph_head(task, self.sess.handle, self.options)
        tail = pb.RunGraphRequest(step_id=self.step_id, send=inline).SerializeToString()
        first, rest = wire.with_parts(head + tail, parts)
        channels = self.master.channels
        # cancelling either kind of call does nothing once its step has ended (gRPC tells the
        # master of a RunStep's end after the client heard it)
        if rest is None:  # every send fits in the first message
            call = (
                channels.steps(address, "RunGraphs")
                .acquire()
                .step(first, self.timeout + wire.STEP_SLACK_SECONDS)
            )
        else:
            call = channels.worker(address).RunGraph(
                itertools.chain((first,), rest), timeout=self.timeout, metadata=channels.metadata
            )
        self._track(task, call)
        return call

    def _remote(self, task, opened):
        """A remote partition's answer messages, read on the call of ``opened`` (``_open``: its
        request sent already, or what sending it raised)."""
        address = self.master.server.worker.task_address(task)
        try:
            call, error = opened
            if error is not None:
                raise error
            yield from call
        except grpc.RpcError as e:
            self.master.channels.failed(address, e)
            raise self._call_error(e, task) from None

    def _call_error(self, e, task):
        if e.code() == grpc.StatusCode.CANCELLED and self._cancelled:
            err = errors.CancelledError(None, None, self._reason)
            err.derived = True
            return err
        err = rpc_error(e, task)  # (a call cut by its channel closing: UnavailableError)
        if isinstance(err, errors.CancelledError):  # the peer cancelled its partition: derived
            err = errors.UnavailableError(None, None, err.message)
            err.derived = True
        return err
