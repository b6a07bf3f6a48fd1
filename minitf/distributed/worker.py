"""The worker service of a task: its devices, registered partitions, RunGraph and RecvTensor.

Variables live in the resource managers of the task's devices and are shared by every graph
registered here (every session of every master) until ``CleanupAll`` (``Session.reset``).
"""

import itertools
import os
import random
import threading
import time

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # no INFO lines (GOAWAY ...) in notebooks
import grpc  # noqa: E402

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import rendezvous as rdv
from minitf.distributed import services
from minitf.distributed import streams
from minitf.distributed import wire
from minitf.framework import errors
from minitf.framework.graph import Graph
from minitf.runtime import executor, pools
from minitf.runtime.placer import Placement, attach_node
from minitf.runtime.resource_mgr import ResourceMgr
from minitf.runtime.step_stats import TransferStats

TOKEN_HEADER = "minitf-cluster-token"
CONTROL_RPC_SECONDS = 30.0      # deadline of every RPC that does not run a step
DEFAULT_STEP_SECONDS = 3600.0   # deadline of a step when no timeout is configured
STEP_SLACK_SECONDS = 1.0        # a caller waits this much past a step's deadline (the peer's
                                # DeadlineExceededError, with its message, comes first)
# pieces of streamed tensors (each in its own message, capped at wire.MAX_MESSAGE_BYTES):
# 512 KiB pipelines best through a master between two processes (bench_cluster: 64 MiB via
# w0's master at ~1.2 GB/s, against ~0.9 with 4 MiB pieces and ~1.1 with 256 KiB)
STREAM_CHUNK_BYTES = 512 << 10


def client_metadata(token=None):
    token = token if token is not None else os.environ.get("MINITF_CLUSTER_TOKEN")
    return ((TOKEN_HEADER, token),) if token else ()


_RECONNECT_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100),
                      ("grpc.min_reconnect_backoff_ms", 100),
                      ("grpc.max_reconnect_backoff_ms", 1000),
                      ("grpc.use_local_subchannel_pool", 1))


class Channels:
    """One gRPC channel (and stubs, and pools of open step calls) per peer address, made on
    first use.

    ``single_threaded_streams``: unary-stream calls (RecvTensor) are read on the calling thread
    instead of through a "channel spin" thread that gRPC starts for every call when the channel
    has no other call in flight: about 100-200 us less per call.  A failing step still cancels
    them from another thread (``call.cancel()``), which ends the reader's wait with CANCELLED
    (the fault tests in test_distributed.py do it).
    """

    def __init__(self, token=None, single_threaded_streams=False):
        self._lock = threading.Lock()
        self._channels = {}
        self._stubs = {}
        self._pools = {}
        self._token = token
        self._options = wire.GRPC_OPTIONS + _RECONNECT_OPTIONS
        if single_threaded_streams:
            from grpc import experimental
            self._options += ((experimental.ChannelOptions.SingleThreadedUnaryStream, 1),)

    @property
    def metadata(self):
        return client_metadata(self._token)

    def _stub(self, address, service):
        stub = self._stubs.get((address, service))
        if stub is None:
            with self._lock:
                ch = self._channels.get(address)
                if ch is None:
                    ch = self._channels[address] = grpc.insecure_channel(
                        address, options=self._options)
                stub = self._stubs[address, service] = services.Stub(ch, service)
        return stub

    def worker(self, address):
        """The worker service of the task at ``address`` (a services.Stub)."""
        return self._stub(address, "WorkerService")

    def master(self, address):
        """The master service of the task at ``address`` (a services.Stub)."""
        return self._stub(address, "MasterService")

    def steps(self, address, method):
        """The :class:`streams.StreamPool` of ``method`` ("RunSteps" of the master service,
        "RunGraphs" of the worker service) to the task at ``address``."""
        pool = self._pools.get((address, method))
        if pool is None:
            stub = self._stub(address, services.SERVICE_OF[method])
            start, metadata = getattr(stub, method), self.metadata
            with self._lock:
                pool = self._pools.get((address, method))
                if pool is None:
                    pool = self._pools[address, method] = streams.StreamPool(
                        lambda requests: start(requests, metadata=metadata))
        return pool

    def failed(self, address, e):
        """Drops the channel to a peer that did not answer, so that a restarted task is
        reached at once rather than after the channel's reconnect backoff.  A failure the peer
        reported itself (even UNAVAILABLE: some task behind it is down) says nothing about the
        channel, which other calls may be using."""
        if e.code() == grpc.StatusCode.UNAVAILABLE and not streams.is_reported(e):
            self.forget(address)

    def forget(self, address):
        with self._lock:
            ch = self._channels.pop(address, None)
            self._stubs = {k: v for k, v in self._stubs.items() if k[0] != address}
            pools = [p for k, p in self._pools.items() if k[0] == address]
            self._pools = {k: p for k, p in self._pools.items() if k[0] != address}
        for p in pools:
            p.close()
        if ch is not None:
            ch.close()

    def close(self):
        with self._lock:
            chans, self._channels, self._stubs = list(self._channels.values()), {}, {}
            pools, self._pools = list(self._pools.values()), {}
        for p in pools:
            p.close()
        for ch in chans:
            ch.close()


def rpc_error(e, task=None):
    """The OpError of a failed RPC (``From <task>:`` prefixed when the peer is known and the
    message does not name a task yet)."""
    err = wire.error_from_status(e.code(), e.details())
    if task and not err.message.startswith("From /job:"):
        err = type(err)(None, None, "From %s:\n%s" % (task, err.message))
    return err


def device_attributes(devices, incarnation):
    return [pb.DeviceAttributes(name=d.name, device_type=d.device_type,
                                memory_limit=int(d.memory_limit or 0),
                                physical_device_desc=d.description, incarnation=incarnation)
            for d in devices]


class _Feeds(list):
    """The fed values of a step plus the step itself, for the _Send/_Recv kernels."""
    step = None


def partition_answer(out, stats):
    """The response messages of a partition step: its fetched ``(name, value)`` pairs (small
    ones inline, the others in parts), then its StepStatsProto if any.  They are
    RunGraphResponses, whose bytes read as RunStepResponses (the same field numbers): a master
    passes them on to its client as they are, its own partition's like a remote one's."""
    inline, parts = wire.split_named_tensors(out, chunk_bytes=STREAM_CHUNK_BYTES,
                                             wrap=(pb.RunGraphResponse, "recv_part"))
    return itertools.chain([pb.RunGraphResponse(recv=inline)], parts,
                           [pb.RunGraphResponse(step_stats=stats)] if stats is not None else [])


class _StepState:
    def __init__(self, worker, step_id, deadline, trace):
        self.worker = worker
        self.step_id = step_id
        self.deadline = deadline
        self.trace = trace
        self.transfers = []
        self.calls = []
        self.lock = threading.Lock()
        self.aborted = None
        self.done = False
        self._stop = None    # stops the executor's run of the step

    def started(self, stop):
        with self.lock:
            self._stop = stop
            aborted = self.aborted
        if aborted is not None:
            stop(aborted)

    def finished(self):
        """The step ended: forget its executor run (which holds the step's values, and holds
        this object through its feeds: without this, that cycle would keep every tensor of the
        step alive until Python's cycle collector runs)."""
        with self.lock:
            self.done = True
            self._stop = None

    def send(self, key, value):
        self.worker.rendezvous.send(self.step_id, key, value)

    def recv(self, send_task, key, tensor_name, src_node, src_device, dst_node, dst_device,
             control):
        address = self.worker.task_address(send_task)
        stub = self.worker.channels.worker(address)
        start = time.time_ns() // 1000
        timeout = max(self.deadline - time.monotonic(), 0.001)
        call = stub.RecvTensor(pb.RecvTensorRequest(step_id=self.step_id, rendezvous_key=key),
                               timeout=timeout, metadata=self.worker.channels.metadata)
        with self.lock:
            if self.aborted is not None:
                call.cancel()
                raise self.aborted
            self.calls.append(call)
        try:
            value = wire.assemble_chunks(call)
        except grpc.RpcError as e:
            self.worker.channels.failed(address, e)
            if self.aborted is not None:
                raise self.aborted from None
            err = rpc_error(e, send_task)
            err._minitf_derived = True
            raise err from None
        finally:
            with self.lock:
                if call in self.calls:
                    self.calls.remove(call)
        if self.trace:
            end = time.time_ns() // 1000
            self.transfers.append(TransferStats(tensor_name, src_node, dst_node, src_device,
                                                dst_device, int(getattr(value, "nbytes", 0)),
                                                end - start, start))
        return value

    def cancel(self):
        """Stops the step from another thread (a failing partition elsewhere, a caller gone
        away); does nothing once the step has ended."""
        if not self.done:
            err = errors.CancelledError(None, None, "RunGraph was cancelled.")
            self.abort(err)
            self.worker.rendezvous.abort(self.step_id, err)

    def abort(self, error):
        with self.lock:
            if self.aborted is None:
                self.aborted = error
            calls, stop = list(self.calls), self._stop
        for c in calls:
            c.cancel()
        if stop is not None:
            stop(self.aborted)


class _SessionDevice:
    """A device as the partitions of one session with isolated state see it
    (``config.isolate_session_state``, TF's RenamedDevice of a WorkerSession): its own
    resource manager, so its variables are not those of other sessions; all else is the
    device's own."""

    def __init__(self, device):
        self._device = device
        self.resource_manager = ResourceMgr(device.resource_manager.default_container)

    def __getattr__(self, name):
        return getattr(self._device, name)


class _Partition:
    def __init__(self, session_handle, graph, placement, devices):
        self.session_handle = session_handle
        self.graph = graph
        self.placement = placement
        self.devices = devices
        self.plans = {}
        self.kernels = executor.KernelCache()
        self.lock = threading.Lock()

    def plan(self, recv_keys, send_names):
        key = (tuple(recv_keys), tuple(send_names))
        ep = self.plans.get(key)
        if ep is not None:
            return ep
        with self.lock:
            ep = self.plans.get(key)
            if ep is not None:
                return ep
            g = self.graph
            try:
                fetches = [g.get_tensor_by_name(n) for n in recv_keys]
                feeds = [g.get_tensor_by_name(n) for n in send_names]
            except (KeyError, ValueError, TypeError) as e:
                raise errors.InvalidArgumentError(None, None, "Unknown tensor in RunGraph: %s"
                                                  % str(e)[:200]) from None
            ops = g.get_operations()
            consumed = set()
            for op in ops:
                consumed.update(t.op for t in op.inputs)
                consumed.update(op.control_inputs)
            targets = [op for op in ops if op not in consumed]
            ep = executor.build(ops, self.placement, self.devices[0].name, fetches, targets,
                                feeds, self.kernels)
            if not any(op.type == rdv.SEND_OP for op in ops):
                # A partition that sends nothing cannot be waited on by a peer: its blocking
                # _Recv may run inline (serial executor, no thread hand-offs).  A partition
                # with both keeps them on the pools, so a Recv never blocks a local Send.
                ep.expensive = [e and not (o is not None and o.type == rdv.RECV_OP)
                                for e, o in zip(ep.expensive, ep.ops)]
                ep.any_expensive = any(ep.expensive)
            self.plans[key] = ep
            return ep

    def reset_kernels(self):
        with self.lock:
            self.plans.clear()
            self.kernels.clear()


class Worker:
    """The worker service of one task."""

    def __init__(self, server, devices):
        self.server = server
        self.devices = devices
        self.task_name = "/job:%s/replica:0/task:%d" % (server.job_name, server.task_index)
        self.incarnation = random.getrandbits(63)
        self.rendezvous = rdv.Rendezvous()
        self.channels = Channels(server.token, single_threaded_streams=True)
        self.pool_set = pools.PoolSet(32, max(1, min(os.cpu_count() or 1, 4)))
        self._partitions = {}
        self._isolated = {}     # session handle -> its devices, for sessions with isolated state
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def task_address(self, task_name):
        from minitf.runtime import device_name_utils as dnu
        p = dnu.parse_full_name(task_name)
        if p is None or p.job is None or p.task is None:
            raise errors.InvalidArgumentError(None, None, "Bad task name %s" % task_name[:200])
        addr = self.server.task_address(p.job, p.task)
        return addr

    def close(self):
        self.rendezvous.abort_all(errors.CancelledError(None, None, "Server has stopped."))
        self.channels.close()
        self.pool_set.close()

    # -- service methods ---------------------------------------------------------------------
    def _abort(self, context, exc, derived=False):
        streams.abort(context, exc, derived)

    def GetStatus(self, request, context):
        return pb.GetStatusResponse(device_attributes=device_attributes(self.devices,
                                                                        self.incarnation))

    def RegisterGraph(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "RegisterGraph")
            graph = Graph()
            ops = wire.import_graph_def(gdef, graph)
            devices = self.devices
            if header.config.isolate_session_state:
                with self._lock:
                    devices = self._isolated.get(header.session_handle)
                    if devices is None:
                        devices = self._isolated[header.session_handle] = [
                            _SessionDevice(d) for d in self.devices]
            by_name = {d.name: d for d in devices}
            device_of = {}
            for op in ops:
                d = by_name.get(op.device)
                if d is None:
                    raise errors.InvalidArgumentError(None, None, "Node %s is assigned to %s, "
                                                      "which is not a device of %s" % (
                                                          op.name, op.device[:200],
                                                          self.task_name))
                device_of[op] = d
            part = _Partition(header.session_handle, graph, Placement(ops, device_of, []),
                              devices)
            handle = "%s/g%d" % (header.session_handle[:100], next(self._ids))
            with self._lock:
                self._partitions[handle] = part
            return pb.RegisterGraphResponse(graph_handle=handle)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def DeregisterGraph(self, request, context):
        """Drops one partition, or, without a graph handle, every partition of the session
        and its isolated state (the session ended)."""
        with self._lock:
            if request.graph_handle:
                self._partitions.pop(request.graph_handle, None)
            else:
                for h in [h for h, p in self._partitions.items()
                          if p.session_handle == request.session_handle]:
                    del self._partitions[h]
                self._isolated.pop(request.session_handle, None)
        return pb.DeregisterGraphResponse()

    def RunGraph(self, request_iterator, context):
        try:
            yield from self._graph_step(request_iterator, context.time_remaining(),
                                        context.add_callback)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e, getattr(e, "_minitf_derived", False))

    def RunGraphs(self, request_iterator, context):
        return streams.serve_steps(request_iterator, context,
                                   lambda one, on_cancel: self._graph_step(one, None, on_cancel))

    def _graph_step(self, request_iterator, remaining, on_cancel):
        """The response messages of one RunGraph step (raises an OpError if it fails);
        ``on_cancel(fn)``: ``fn()`` is to be called if the caller goes away."""
        header, sends = wire.read_tensor_stream(request_iterator, "RunGraph",
                                                pb.RunGraphRequest, "send", "send_part")
        out, stats = self.run_graph(header, sends, remaining,
                                    lambda step: on_cancel(step.cancel))
        yield from wire.coalesce(partition_answer(out, stats))

    def run_graph(self, header, sends, remaining=None, on_step=None):
        """Runs a registered partition for one step: ``([(name, value)], StepStatsProto or
        None)``; failures raise an OpError prefixed with this task's name."""
        step = None
        try:
            with self._lock:
                part = self._partitions.get(header.graph_handle)
            if part is None:
                raise errors.AbortedError(None, None, "Graph handle is not found: %s. Possibly, "
                                          "this worker just restarted."
                                          % header.graph_handle[:200])
            names = list(sends)
            eplan = part.plan(list(header.recv_key), names)
            timeout_s = DEFAULT_STEP_SECONDS if remaining is None else remaining
            if header.options.timeout_in_ms > 0:
                timeout_s = min(timeout_s, header.options.timeout_in_ms / 1000.0)
            trace = header.options.trace_level > 0
            step = _StepState(self, header.step_id, time.monotonic() + timeout_s, trace)
            if on_step is not None:
                on_step(step)
            feeds = _Feeds(sends[n] for n in names)
            feeds.step = step
            tracer = executor.Tracer(eplan) if trace else None
            vals = executor.run_step(eplan, feeds, self.pool_set, tracer,
                                     int(timeout_s * 1000), on_start=step.started)
            out = []
            for i, (name, (s, k)) in enumerate(zip(header.recv_key, eplan.fetch_slots)):
                try:
                    out.append((name, executor.host_value(vals[s][k],
                                                          eplan.device_of_node(s))))
                except errors.OpError as e:
                    op_name, _, index = name.rpartition(":")
                    raise type(e)(None, None, attach_node(
                        e.message, "_send_%s_%s" % (op_name, index))) from None
            stats_proto = None
            if trace:
                stats = tracer.step_stats([d.name for d in self.devices])
                kept = [t for t in stats.transfers if not t.src_node.startswith("_arg_")]
                kept.extend(step.transfers)
                del stats.transfers[:]
                stats.transfers.extend(kept)
                stats_proto = wire.step_stats_to_proto(stats)
            return out, stats_proto
        except Exception as e:  # noqa: BLE001 - every failure becomes an OpError
            e = errors.as_op_error(e)
            derived = bool(getattr(e, "_minitf_derived", False)) or isinstance(
                e.__cause__, errors.OpError) and getattr(e.__cause__, "_minitf_derived", False)
            if not derived and step is not None and step.aborted is not None:
                derived = True
            msg = e.message
            if not msg.startswith("From /job:"):
                msg = "From %s:\n%s" % (self.task_name, msg)
            err = type(e)(None, None, msg)
            err._minitf_derived = derived
            self.rendezvous.abort(header.step_id, err)
            raise err from None
        finally:   # (an interrupted direct call ends here too: KeyboardInterrupt)
            if step is not None:
                step.finished()
            self.rendezvous.finish(header.step_id)

    def RecvTensor(self, request, context):
        try:
            remaining = context.time_remaining()
            timeout = CONTROL_RPC_SECONDS if remaining is None else remaining
            value = self.rendezvous.take(request.step_id, request.rendezvous_key, timeout)
            for chunk in wire.iter_tensor_chunks(value, STREAM_CHUNK_BYTES):
                yield chunk
        except Exception as e:  # noqa: BLE001
            self._abort(context, e, derived=True)

    def CleanupAll(self, request, context):
        containers = list(request.container)
        for d in self.devices:
            for c in (containers or [d.job]):
                d.resource_manager.cleanup(c)
        with self._lock:
            parts = list(self._partitions.values())
        for p in parts:
            p.reset_kernels()
        return pb.CleanupAllResponse()
