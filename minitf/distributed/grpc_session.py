"""``tf.Session("grpc://host:port")``: a session whose master is the task listening there.

Book section: "Opening a Session" (a session on any server of the cluster places and runs the
graph over all of it).

The client sends its graph (and extensions when it grew) to the master, which places, splits
and runs it over the cluster; feeds and fetches travel as raw bytes in chunks.  The master is
reached over gRPC, or directly when it is a server of this process (master_interface.py).
"""

import re
import threading

import grpc
import numpy as np

from minitf.distributed import master_interface, wire
from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire import (
    DEFAULT_STEP_SECONDS,
    STEP_SLACK_SECONDS,
    STREAM_CHUNK_BYTES,
)
from minitf.distributed.worker_cache import rpc_error
from minitf.framework import errors
from minitf.runtime.devices import DeviceAttributes

_OP_IN_MESSAGE = re.compile(r"\[\[(?:\{\{node )?([A-Za-z0-9_.\-/]+)")


def _raise(e, graph=None, timeout_hit=False):
    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        err = errors.DeadlineExceededError(None, None, e.details() or "Deadline Exceeded")
    else:  # (a call cut by another session closing the shared channel: UnavailableError)
        err = rpc_error(e)
    op = None
    if graph is not None:
        m = _OP_IN_MESSAGE.search(err.message)
        if m:
            try:
                op = graph.get_operation_by_name(m.group(1))
            except (KeyError, ValueError):
                op = None
    raise type(err)(op.node_def if op is not None else None, op, err.message) from None


class GrpcSession:
    """The ``GRPC_SESSION`` implementation behind ``tf.Session("grpc://...")``."""

    def __init__(self, target, graph, config):
        self._graph = graph
        self._config = config
        self._target = target
        self._closed = False
        self._handle = None
        self._sent_ops = 0
        self._synced_version = -1  # the graph's version when its ops were last sent
        self._heads = {}  # (fetches, targets, trace level, timeout) -> (request head, timeout)
        self._lock = threading.Lock()
        self._master = master_interface.for_target(target, config)

    def _op_timeout(self):
        return wire.timeout_seconds(self._config.operation_timeout_in_ms)

    def _sync_graph(self):
        version = self._graph.version  # grows with every op added: no copy of the op list
        if self._handle is not None and version == self._synced_version:
            return
        n = len(self._graph.get_operations())
        if self._handle is not None and n == self._sent_ops:
            self._synced_version = version
            return
        gdef = wire.graph_to_proto(self._graph, since_version=self._sent_ops)
        timeout = self._op_timeout() or wire.CONTROL_RPC_SECONDS
        try:
            if self._handle is None:
                first = [True]

                def reqs():
                    for piece in wire.iter_graph_def_chunks(gdef):
                        if first[0]:
                            first[0] = False
                            yield pb.CreateSessionRequest(
                                config=_session_config(self._config),
                                target=self._target,
                                graph_def_chunk=piece,
                            )
                        else:
                            yield pb.CreateSessionRequest(graph_def_chunk=piece)

                r = self._master.call("CreateSession", reqs(), timeout)
                self._handle = r.session_handle
            else:
                first = [True]

                def reqs():
                    for piece in wire.iter_graph_def_chunks(gdef):
                        if first[0]:
                            first[0] = False
                            yield pb.ExtendSessionRequest(
                                session_handle=self._handle,
                                current_graph_version=self._sent_ops,
                                graph_def_chunk=piece,
                            )
                        else:
                            yield pb.ExtendSessionRequest(graph_def_chunk=piece)

                self._master.call("ExtendSession", reqs(), timeout)
        except grpc.RpcError as e:
            self._master.failed(e)
            _raise(e)
        self._sent_ops = n
        self._synced_version = version

    def list_devices(self):
        try:
            r = self._master.call(
                "ListDevices",
                pb.ListDevicesRequest(session_handle=self._handle or ""),
                self._op_timeout() or wire.CONTROL_RPC_SECONDS,
            )
        except grpc.RpcError as e:
            self._master.failed(e)
            _raise(e)
        return [
            DeviceAttributes(d.name, d.device_type, d.memory_limit, d.incarnation)
            for d in list(r.local_device) + list(r.remote_device)
        ]

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._close_handle()  # (a run creating it meanwhile closes it when it sees _closed)

    def _close_handle(self):
        handle = self._handle
        if handle is not None:
            try:
                self._master.call(
                    "CloseSession", pb.CloseSessionRequest(session_handle=handle), 5.0
                )
            except grpc.RpcError as e:  # a master found gone: the next session reconnects
                self._master.failed(e)

    def run(self, fetch_tensors, target_ops, feed_tensors, feed_values, options, run_metadata):
        """Sends the graph if it grew, then runs one step on the master: the fetched values,
        one per tensor of ``fetch_tensors``."""
        with self._lock:
            self._sync_graph()
        if self._closed:  # closed while the graph was sent: no step on a closed session
            self._close_handle()
            raise errors.CancelledError(None, None, "Session has been closed.")
        fed = {t.name: v for t, v in zip(feed_tensors, feed_values)}
        head, timeout = self._request_head(fetch_tensors, target_ops, options, run_metadata)
        inline, parts = wire.split_named_tensors(
            list(fed.items()), chunk_bytes=STREAM_CHUNK_BYTES, wrap=(pb.RunStepRequest, "feed_part")
        )
        if inline:  # protobuf reads concatenated messages as one: the feeds follow the head
            head += pb.RunStepRequest(feed=inline).SerializeToString()
        first, rest = wire.with_parts(head, parts)
        values = self._step(first, rest, timeout, run_metadata)
        return [_fetched(values[t.name], t.name in fed) for t in fetch_tensors]

    def _request_head(self, fetch_tensors, target_ops, options, run_metadata):
        """The serialized RunStepRequest of a run without its feeds (session, fetches, targets,
        options), and how long the client waits for the step: made once per kind of run (a
        training loop sends the same head every step)."""
        trace = int(options.trace_level) if options is not None and run_metadata is not None else 0
        ms = int(options.timeout_in_ms) if options is not None else 0
        key = (tuple(fetch_tensors), tuple(target_ops), trace, ms)
        return wire.kept_head(
            self._heads, key, self._make_head, fetch_tensors, target_ops, trace, ms
        )

    def _make_head(self, fetch_tensors, target_ops, trace, ms):
        timeout = DEFAULT_STEP_SECONDS
        if ms > 0:
            timeout = wire.timeout_seconds(ms) + STEP_SLACK_SECONDS
        if self._op_timeout():
            timeout = min(timeout, self._op_timeout() + STEP_SLACK_SECONDS)
        head = pb.RunStepRequest(
            session_handle=self._handle,
            fetch=list(dict.fromkeys(t.name for t in fetch_tensors)),
            target=[op.name for op in target_ops],
            options=pb.RunStepOptions(trace_level=trace, timeout_in_ms=ms),
        ).SerializeToString()
        return head, timeout

    def _step(self, first, parts, timeout, run_metadata):
        """Runs the step on the master: ``{tensor name: value}``; its step stats (one part per
        task) go into ``run_metadata``."""
        receiver = wire.NamedTensorReceiver()
        stats = None
        try:
            for raw in self._master.run_step(first, parts, timeout):
                msg = receiver.add_message(raw, pb.RunStepResponse, "tensor", "tensor_part")
                if msg.HasField("step_stats"):  # one per task
                    if stats is None:
                        stats = pb.StepStatsProto()
                    stats.dev_stats.extend(msg.step_stats.dev_stats)
                    stats.transfers.extend(msg.step_stats.transfers)
        except grpc.RpcError as e:
            self._master.failed(e)
            _raise(e, self._graph)
        values = receiver.finish()
        if stats is not None and run_metadata is not None:
            s = wire.proto_to_step_stats(stats)
            run_metadata.step_stats.dev_stats[:] = s.dev_stats
            run_metadata.step_stats.transfers[:] = s.transfers
        return values


def _fetched(value, was_fed):
    """A fetched value as the client hands it back: a computed scalar as a numpy scalar, a
    string scalar as its bytes (a serialized summary; as a direct session gives it), while a fed
    one stays the 0-d array it was fed as, as in TF."""
    if not was_fed and isinstance(value, np.ndarray) and value.ndim == 0:
        if value.dtype != object or isinstance(value[()], bytes):
            return value[()]
    return value


def reset(target, containers=None, config=None):
    """``tf.Session.reset(target, containers)`` for a ``grpc://`` target."""
    master = master_interface.for_target(target, config)
    timeout = wire.CONTROL_RPC_SECONDS
    if config is not None and config.operation_timeout_in_ms > 0:
        timeout = wire.timeout_seconds(config.operation_timeout_in_ms)
    try:
        master.call("Reset", pb.ResetRequest(**wire.clear_request(containers or [])), timeout)
    except grpc.RpcError as e:
        master.failed(e)
        _raise(e)


def _session_config(config):
    """The SessionConfig the master gets: wire's fields and the dependency optimizer's
    rewrite options (``runtime/dependency_optimizer.py``; the master runs it)."""
    msg = wire.session_config_to_proto(config)
    rewrite = config.graph_options.rewrite_options
    msg.dependency_optimization = rewrite.dependency_optimization
    msg.disable_meta_optimizer = rewrite.disable_meta_optimizer
    return msg
