"""The master service of a task: client sessions, their steps, and resetting the cluster.

Book sections: "Opening a Session" and "The Master and Worker Services" (TF's ``Master``).  A
client creates a session here with its graph (``CreateSession``), grows it
(``ExtendSession``) and runs steps (``RunStep``, or on an open ``RunSteps`` call): each session
is a :class:`~minitf.distributed.master_session.MasterSession` (placement over the cluster,
partitions per task), each step a :class:`~minitf.distributed.partition_run.PartitionRun`.
``Reset`` closes every session and clears resource containers on every task.
"""

import concurrent.futures
import itertools
import random
import threading

import grpc

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import streams, wire
from minitf.distributed.master_session import CLOSED_SESSION_STEP, MasterSession, RemoteDevice
from minitf.distributed.partition_run import PartitionRun
from minitf.distributed.worker_cache import rpc_error
from minitf.framework import errors
from minitf.runtime import device_name_utils as dnu


class Master:
    """The master service of one task."""

    def __init__(self, server):
        self.server = server
        self.channels = server.worker.channels
        self.task_name = server.worker.task_name
        self.sessions = {}
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="minitf-master")

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- helpers -----------------------------------------------------------------------------
    def tasks(self):
        spec = self.server.cluster_spec()
        return [
            (dnu.task_name(job, i), spec.task_address(job, i))
            for job in spec.jobs
            for i in spec.task_indices(job)
        ]

    def worker_stub(self, task):
        return self.channels.worker(self.server.worker.task_address(task))

    def register(self, task, session_handle, config, gdef):
        def requests():
            first = True
            for piece in wire.iter_graph_def_chunks(gdef):
                if first:
                    yield pb.RegisterGraphRequest(
                        session_handle=session_handle, config=config, graph_def_chunk=piece
                    )
                    first = False
                else:
                    yield pb.RegisterGraphRequest(graph_def_chunk=piece)

        try:
            return (
                self.worker_stub(task)
                .RegisterGraph(
                    requests(), timeout=wire.CONTROL_RPC_SECONDS, metadata=self.channels.metadata
                )
                .graph_handle
            )
        except grpc.RpcError as e:
            self.channels.failed(self.server.worker.task_address(task), e)
            raise rpc_error(e, task) from None

    def cluster_devices(self, config, timeout=None):
        tasks = self.tasks()
        filters = [dnu.parse_full_name(f) for f in getattr(config, "device_filters", ()) or ()]
        filters = [f for f in filters if f is not None]
        if filters:
            tasks = [
                (t, a)
                for t, a in tasks
                if t == self.task_name
                or any(
                    dnu.is_complete_specification(f, dnu.parse_full_name(t + "/device:CPU:0"))
                    or (f.job is not None and f.task is None and ("/job:%s/" % f.job) in t + "/")
                    for f in filters
                )
            ]
        op_timeout = wire.timeout_seconds(getattr(config, "operation_timeout_in_ms", 0) or 0)
        timeout = timeout or op_timeout or wire.CONTROL_RPC_SECONDS

        def status(task, address):
            for attempt in (0, 1):  # once more on a fresh channel: the task may be back
                try:
                    r = self.channels.worker(address).GetStatus(
                        pb.GetStatusRequest(), timeout=timeout, metadata=self.channels.metadata
                    )
                    break
                except grpc.RpcError as e:
                    self.channels.failed(address, e)
                    err = rpc_error(e, task)
                    if attempt or not isinstance(err, errors.UnavailableError):
                        raise err from None
            return [RemoteDevice(a) for a in r.device_attributes]

        futures = [self.pool.submit(status, t, a) for t, a in tasks]
        out = []
        for f in futures:
            out.extend(f.result())
        return out

    def _session(self, handle):
        with self.lock:
            s = self.sessions.get(handle)
        if s is None:
            raise errors.AbortedError(None, None, "Session %s is not found." % handle[:100])
        return s

    def _abort(self, context, exc):
        streams.abort(context, exc)

    # -- service methods ---------------------------------------------------------------------
    def CreateSession(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "CreateSession")
            config = wire.proto_to_session_config(header.config)
            rewrite = config.graph_options.rewrite_options  # read by dependency_optimizer.py
            rewrite.dependency_optimization = header.config.dependency_optimization
            rewrite.disable_meta_optimizer = header.config.disable_meta_optimizer
            default = self.server.config  # the server's config: defaults for its sessions
            config.allow_soft_placement |= bool(default.allow_soft_placement)
            config.log_device_placement |= bool(default.log_device_placement)
            if not config.operation_timeout_in_ms:
                config.operation_timeout_in_ms = default.operation_timeout_in_ms
            handle = "%016x" % random.getrandbits(64)
            sess = MasterSession(self, handle, config)
            sess.extend(gdef)
            sess.devices = self.cluster_devices(config)
            with self.lock:
                self.sessions[handle] = sess
            return pb.CreateSessionResponse(session_handle=handle, graph_version=sess.version)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def ExtendSession(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "ExtendSession")
            sess = self._session(header.session_handle)
            if header.current_graph_version != sess.version:
                raise errors.AbortedError(
                    None,
                    None,
                    "Current graph version %d does not match "
                    "the master's %d" % (header.current_graph_version, sess.version),
                )
            sess.extend(gdef)
            return pb.ExtendSessionResponse(new_graph_version=sess.version)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def RunStep(self, request_iterator, context):
        try:
            yield from self._step(request_iterator, context.time_remaining(), context.add_callback)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def RunSteps(self, request_iterator, context):
        return streams.serve_steps(
            request_iterator, context, lambda one, on_cancel: self._step(one, None, on_cancel)
        )

    def _step(self, request_iterator, remaining, on_cancel):
        """Runs one step: yields the fed values the client fetches, then every partition's
        fetched values and step stats as they come (a remote task's messages are forwarded
        unparsed: a RunGraphResponse's bytes are a RunStepResponse); small messages are
        joined (wire.coalesce).  ``remaining``: seconds the client waits (None: no limit but
        the configured ones); ``on_cancel(fn)``: ``fn()`` is to be called if the client goes
        away."""
        header, feeds = wire.read_tensor_stream(
            request_iterator, "RunStep", pb.RunStepRequest, "feed", "feed_part"
        )
        sess = self._session(header.session_handle)
        step_id = random.getrandbits(62)
        with sess.lock:
            sess.ensure_placed()
            sig = sess.signature(list(header.fetch), list(header.target), list(feeds))
        inline, parts = wire.split_named_tensors(
            [(n, feeds[n]) for n in header.fetch if n in feeds], chunk_bytes=wire.STREAM_CHUNK_BYTES
        )
        run = PartitionRun(self, sess, sig, step_id, feeds, header.options, remaining)
        with sess.runs_lock:
            sess.runs.add(run)
            if sess.closed:  # closed or reset while this step was starting
                run.cancel_all(CLOSED_SESSION_STEP)
        try:
            yield from wire.coalesce(
                itertools.chain(
                    [pb.RunStepResponse(step_id=step_id, tensor=inline)],
                    parts,
                    run.messages(on_cancel),
                )
            )
        finally:
            with sess.runs_lock:
                sess.runs.discard(run)

    def CloseSession(self, request, context):
        with self.lock:
            sess = self.sessions.pop(request.session_handle, None)
        if sess is not None:
            sess.end()
        return pb.CloseSessionResponse()

    def ListDevices(self, request, context):
        try:
            from minitf.runtime.config_proto import ConfigProto

            devs = self.cluster_devices(ConfigProto())
            local, remote = [], []
            for d in devs:
                a = pb.DeviceAttributes(
                    name=d.name,
                    device_type=d.device_type,
                    memory_limit=d.memory_limit,
                    incarnation=d.incarnation,
                )
                (local if d.task == self.task_name else remote).append(a)
            return pb.ListDevicesResponse(local_device=local, remote_device=remote)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def Reset(self, request, context):
        try:
            wire.check_clear_request(request, "Reset")
            with self.lock:
                sessions, self.sessions = list(self.sessions.values()), {}
            for s in sessions:  # their running steps too (a step blocked in a queue ends)
                s.end()
            containers = list(request.container)
            timeout = wire.handler_seconds(context.time_remaining(), wire.CONTROL_RPC_SECONDS)

            def cleanup(task, address):
                try:
                    self.channels.worker(address).CleanupAll(
                        pb.CleanupAllRequest(**wire.clear_request(containers)),
                        timeout=timeout,
                        metadata=self.channels.metadata,
                    )
                except grpc.RpcError as e:
                    raise rpc_error(e, task) from None

            futures = [self.pool.submit(cleanup, t, a) for t, a in self.tasks()]
            for f in futures:
                f.result()
            return pb.ResetResponse()
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)
