"""The worker service of a task: its devices, and the steps of the partitions masters register.

Book section: "The Master and Worker Services".  Every task runs one (TF's ``Worker``): masters
register the partitions of their sessions' graphs here (``graph_mgr.py``), then run steps of
them (``RunGraph``: feeding their ``_Arg`` nodes, answering the tensors asked for); peers take
the tensors this task's ``_Send`` ops left for them (``RecvTensors``: every key a partition
takes from this task in a step, in one request, which peers send on a ``RecvTensorsSteps``
call kept open between steps; ``RecvTensor``: one key; ``rendezvous_mgr.py``).
A server's ConfigProto sizes the worker's inter-op and intra-op pools
(``inter_op_parallelism_threads``, ``intra_op_parallelism_threads``).
Variables live in the resource managers of the task's devices and are shared by every graph
registered here (every session of every master) until ``CleanupAll`` (``Session.reset``).
"""

import concurrent.futures
import itertools
import random
import threading
import time

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import streams, wire
from minitf.distributed.graph_mgr import GraphMgr
from minitf.distributed.rendezvous_mgr import RendezvousMgr, RpcRendezvous, remote_keys
from minitf.distributed.worker_cache import Channels
from minitf.framework import errors
from minitf.framework.dead_tensor import DEAD
from minitf.runtime import device_name_utils as dnu
from minitf.runtime import executor, pools, step_run
from minitf.runtime.placer import attach_node
from minitf.runtime.step_stats import Tracer


def device_attributes(devices, incarnation):
    return [
        pb.DeviceAttributes(
            name=d.name,
            device_type=d.device_type,
            memory_limit=int(d.memory_limit or 0),
            physical_device_desc=d.description,
            incarnation=incarnation,
        )
        for d in devices
    ]


def partition_answer(out, stats):
    """The response messages of a partition step: its fetched ``(name, value)`` pairs (small
    ones inline, the others in parts), then its StepStatsProto if any.  They are
    RunGraphResponses, whose bytes read as RunStepResponses (the same field numbers): a master
    passes them on to its client as they are, its own partition's like a remote one's."""
    inline, parts = wire.split_named_tensors(
        out, chunk_bytes=wire.STREAM_CHUNK_BYTES, wrap=(pb.RunGraphResponse, "recv_part")
    )
    return itertools.chain(
        [pb.RunGraphResponse(recv=inline)],
        parts,
        [pb.RunGraphResponse(step_stats=stats)] if stats is not None else [],
    )


def _when_done(context):
    """``on_cancel(fn)`` of a call's handler: ``fn()`` once the call ends (at once if it has)."""

    def on_cancel(fn):
        if not context.add_callback(fn):
            fn()

    return on_cancel


def _derived(e):
    """A copy of failure ``e`` marked as caused by another task's (the step's own error object
    may be shared: the rendezvous keeps it for late callers)."""
    err = errors.as_op_error(e)
    copy = type(err)(None, None, err.message)
    copy.derived = True
    return copy


class StepState:
    """A step running on this worker, as the ones who may stop it see it: the master's call
    (the caller went away) or a failing partition elsewhere (``cancel``)."""

    def __init__(self, rendezvous):
        self.rendezvous = rendezvous  # the step's RpcRendezvous (None: it has no _Send/_Recv)
        self.lock = threading.Lock()
        self.aborted = None
        self.done = False
        self._stop = None  # stops the executor's run of the step

    def started(self, stop):
        with self.lock:
            self._stop = stop
            aborted = self.aborted
        if aborted is not None:
            stop(aborted)

    def finished(self):
        """The step ended: forget its executor run (it holds the step's values)."""
        with self.lock:
            self.done = True
            self._stop = None

    def cancel(self):
        """Stops the step from another thread; does nothing once the step has ended."""
        if self.done:
            return
        err = errors.CancelledError(None, None, "RunGraph was cancelled.")
        err.derived = True
        with self.lock:
            if self.aborted is None:
                self.aborted = err
            stop = self._stop
        if self.rendezvous is not None:
            self.rendezvous.abort(err)
        if stop is not None:
            stop(err)


class Worker:
    """The worker service of one task."""

    def __init__(self, server, devices, config=None):
        self.server = server
        self.devices = devices
        self.task_name = dnu.task_name(server.job_name, server.task_index)
        self.incarnation = random.getrandbits(63)
        for d in devices:  # the incarnation every rendezvous key names
            d.incarnation = self.incarnation
        self.rendezvous = RendezvousMgr()
        self._addresses = {}  # task name -> address (task_address)
        self.graph_mgr = GraphMgr(self.task_name, devices)
        self.channels = Channels(server.token, single_threaded_streams=True)
        inter = getattr(config, "inter_op_parallelism_threads", 0)
        intra = getattr(config, "intra_op_parallelism_threads", 0)
        # TF's worker runs the ops of every partition on one compute pool, sized from the
        # server's config as a session's inter-op pool is (a thread per core by default):
        # kernels that wait (queues, _Recv) are asynchronous and hold no thread while they do
        self.pool_set = pools.PoolSet(
            pools.default_threads(inter),
            pools.default_threads(intra) if intra else min(pools.schedulable_cores(), 4),
            pools.gpu_thread_mode(),
            pools.gpu_thread_count(),
        )
        # transport threads: each reads one RecvTensors call of a step (none of a step's threads)
        self.rpc_pool = concurrent.futures.ThreadPoolExecutor(
            256, thread_name_prefix="minitf-recv-%s-%d" % (server.job_name, server.task_index)
        )

    def task_address(self, task_name):
        """The address of a task of this server's cluster (fixed for the server's life, so each
        name is parsed once: a step asks for each remote partition's task)."""
        address = self._addresses.get(task_name)
        if address is None:
            p = dnu.parse_full_name(task_name)
            if p is None or p.job is None or p.task is None:
                raise errors.InvalidArgumentError(None, None, "Bad task name %s" % task_name[:200])
            address = self._addresses[task_name] = self.server.task_address(p.job, p.task)
        return address

    def close(self):
        self.rendezvous.abort_all(errors.CancelledError(None, None, "Server has stopped."))
        self.channels.close()
        self.pool_set.close()
        self.rpc_pool.shutdown(wait=False, cancel_futures=True)

    # -- service methods ---------------------------------------------------------------------
    def GetStatus(self, request, context):
        return pb.GetStatusResponse(
            device_attributes=device_attributes(self.devices, self.incarnation)
        )

    def RegisterGraph(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "RegisterGraph")
            handle = self.graph_mgr.register(
                header.session_handle, gdef, header.config.isolate_session_state
            )
            return pb.RegisterGraphResponse(graph_handle=handle)
        except Exception as e:  # noqa: BLE001
            streams.abort(context, e)

    def DeregisterGraph(self, request, context):
        """Drops one partition, or, without a graph handle, every partition of the session
        and its isolated state (the session ended)."""
        self.graph_mgr.deregister(request.session_handle, request.graph_handle)
        return pb.DeregisterGraphResponse()

    def RunGraph(self, request_iterator, context):
        try:
            yield from self._graph_step(
                request_iterator, context.time_remaining(), context.add_callback
            )
        except Exception as e:  # noqa: BLE001
            streams.abort(context, e, getattr(e, "derived", False))

    def RunGraphs(self, request_iterator, context):
        return streams.serve_steps(
            request_iterator, context, lambda one, on_cancel: self._graph_step(one, None, on_cancel)
        )

    def _graph_step(self, request_iterator, remaining, on_cancel):
        """The response messages of one RunGraph step (raises an OpError if it fails);
        ``on_cancel(fn)``: ``fn()`` is to be called if the caller goes away."""
        header, sends = wire.read_tensor_stream(
            request_iterator, "RunGraph", pb.RunGraphRequest, "send", "send_part"
        )
        out, stats = self.run_graph(header, sends, remaining, lambda step: on_cancel(step.cancel))
        yield from wire.coalesce(partition_answer(out, stats))

    def run_graph(self, header, sends, remaining=None, on_step=None):
        """Runs a registered partition for one step: ``([(name, value)], StepStatsProto or
        None)``; failures raise an OpError prefixed with this task's name."""
        step = None
        try:
            item = self.graph_mgr.get(header.graph_handle)
            eplan = item.plan(list(header.recv_key))
            args = item.args_from(sends)
            timeout_s = wire.handler_seconds(remaining, wire.DEFAULT_STEP_SECONDS)
            if header.options.timeout_in_ms > 0:
                timeout_s = min(timeout_s, wire.timeout_seconds(header.options.timeout_in_ms))
            rendezvous = (
                RpcRendezvous(self, header.step_id, time.monotonic() + timeout_s)
                if eplan.has_rendezvous
                else None
            )
            step = StepState(rendezvous)
            if on_step is not None:
                on_step(step)
            if rendezvous is not None:
                rendezvous.prefetch(remote_keys(eplan, self.task_name))
            tracer = Tracer(eplan) if header.options.trace_level > 0 else None
            ctx = executor.StepContext(args, rendezvous, tracer)
            vals = step_run.run_step(
                eplan, ctx, self.pool_set, int(timeout_s * 1000), on_start=step.started
            )
            return self._answer(header, eplan, vals), self._stats(tracer)
        except Exception as e:  # noqa: BLE001 - every failure becomes an OpError
            raise self._step_error(e, header, step) from None
        finally:  # (an interrupted direct call ends here too: KeyboardInterrupt)
            if step is not None:
                step.finished()
            self.rendezvous.finish(header.step_id)

    @staticmethod
    def _answer(header, eplan, vals):
        out = []
        for name, (s, k) in zip(header.recv_key, eplan.fetch_slots):
            if vals[s][k] is DEAD:  # on the side of a tf.cond not taken (TF's text)
                raise errors.InvalidArgumentError(
                    None, None, "The tensor returned for %s was not valid." % name
                )
            try:
                out.append((name, executor.host_value(vals[s][k], eplan.device_of_node(s))))
            except errors.OpError as e:
                op_name, _, index = name.rpartition(":")
                raise type(e)(
                    None, None, attach_node(e.message, "_send_%s_%s" % (op_name, index))
                ) from None
        return out

    def _stats(self, tracer):
        if tracer is None:
            return None
        return wire.step_stats_to_proto(tracer.step_stats([d.name for d in self.devices]))

    def _step_error(self, e, header, step):
        """The OpError a failed step reports: ``From <task>:``, derived when it only follows
        from another failure; the step's rendezvous is aborted with it."""
        e = errors.as_op_error(e)
        derived = e.derived or (isinstance(e.__cause__, errors.OpError) and e.__cause__.derived)
        if step is not None and step.aborted is not None:
            derived = True
        msg = e.message
        if not msg.startswith("From /job:"):
            msg = "From %s:\n%s" % (self.task_name, msg)
        err = type(e)(None, None, msg)
        err.derived = derived
        self.rendezvous.abort(header.step_id, err)
        return err

    def RecvTensor(self, request, context):
        try:
            timeout = wire.handler_seconds(context.time_remaining(), wire.CONTROL_RPC_SECONDS)
            value = self.rendezvous.recv(request.step_id, request.rendezvous_key, timeout)
            for chunk in wire.iter_tensor_chunks(value, wire.STREAM_CHUNK_BYTES):
                yield chunk
        except Exception as e:  # noqa: BLE001
            streams.abort(context, e, derived=True)

    def RecvTensors(self, request, context):
        """Several tensors of a step, each in the first answer message after it was sent."""
        try:
            deadline = time.monotonic() + wire.handler_seconds(
                context.time_remaining(), wire.CONTROL_RPC_SECONDS
            )
            for m in self._recv_answer(request, deadline, _when_done(context)):
                yield m.message if type(m) is streams.Last else m
        except Exception as e:  # noqa: BLE001
            streams.abort(context, e, derived=True)

    def RecvTensorsSteps(self, request_iterator, context):
        """RecvTensors of many steps on one open call (streams.serve_steps), each request
        bounded by its ``timeout_ms`` as a one-step call is by its deadline."""
        return streams.serve_steps(request_iterator, context, self._recv_step, hold=False)

    def _recv_step(self, requests, on_cancel):
        try:
            request = pb.RecvTensorsRequest()
            try:
                request.MergeFromString(next(requests))
            except Exception:  # noqa: BLE001 - protobuf's DecodeError
                raise wire.malformed("RecvTensorsRequest") from None
            seconds = wire.timeout_seconds(request.timeout_ms) or wire.CONTROL_RPC_SECONDS
            yield from self._recv_answer(request, time.monotonic() + seconds, on_cancel)
        except Exception as e:  # noqa: BLE001 - the step's failure, reported in its StepEnd
            raise _derived(e) from None

    def _recv_answer(self, request, deadline, on_cancel):
        """The answer messages of a RecvTensors request, the last one marked
        (:class:`streams.Last`)."""
        keys = list(request.rendezvous_key)
        left = len(keys)
        for ready in self.rendezvous.recv_many(request.step_id, keys, deadline, on_cancel):
            left -= len(ready)
            inline, parts = wire.split_named_tensors(
                ready,
                chunk_bytes=wire.STREAM_CHUNK_BYTES,
                wrap=(pb.RecvTensorsResponse, "part"),
            )
            messages = wire.coalesce(
                itertools.chain([pb.RecvTensorsResponse(tensor=inline)], parts)
            )
            if left:
                yield from messages
            else:  # the last batch (all sent already): its last message is marked
                last = next(messages)
                for m in messages:
                    yield last
                    last = m
                yield streams.Last(last)

    def CleanupAll(self, request, context):
        try:
            wire.check_clear_request(request, "CleanupAll")
        except errors.OpError as e:
            streams.abort(context, e)
        containers = list(request.container)
        for d in self.devices:
            for c in containers or [d.job]:
                d.resource_manager.cleanup(c)
        self.graph_mgr.reset_kernels()
        return pb.CleanupAllResponse()
