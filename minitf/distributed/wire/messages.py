"""Session configs, step stats and errors (as gRPC status) as messages; reading a
client-streamed request.

Book section: "The Master and Worker Services".
"""

import re

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed.wire.chunks import NamedTensorReceiver
from minitf.distributed.wire.graphs import assemble_graph_def
from minitf.distributed.wire.limits import MAX_ERROR_MESSAGE_BYTES
from minitf.distributed.wire.tensors import _dims_from_proto, _shape_to_proto
from minitf.framework import errors

#: What a ResetRequest or CleanupAllRequest carries in ``marker`` ("minitf-1" as a number):
#: the sign of a request that was meant, not random bytes that happen to parse.
CLEAR_REQUEST_MARKER = 0x6D696E6974662D31
#: A container name as TF's resource managers accept it.
_CONTAINER_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$")

# -- session config and step stats -----------------------------------------------------------


def session_config_to_proto(config=None):
    """The :class:`SessionConfig` of a ``tf.ConfigProto`` (None: all defaults)."""
    msg = pb.SessionConfig()
    if config is None:
        return msg
    msg.allow_soft_placement = bool(config.allow_soft_placement)
    msg.log_device_placement = bool(config.log_device_placement)
    msg.operation_timeout_in_ms = int(config.operation_timeout_in_ms)
    msg.device_filters.extend(config.device_filters)
    msg.isolate_session_state = bool(config.isolate_session_state)
    return msg


def proto_to_session_config(msg):
    """A ``tf.ConfigProto`` with the fields a :class:`SessionConfig` carries."""
    from minitf.runtime.config_proto import ConfigProto

    return ConfigProto(
        allow_soft_placement=msg.allow_soft_placement,
        log_device_placement=msg.log_device_placement,
        operation_timeout_in_ms=msg.operation_timeout_in_ms,
        device_filters=list(msg.device_filters),
        isolate_session_state=msg.isolate_session_state,
    )


def step_stats_to_proto(stats):
    """A :class:`StepStatsProto` of ``run_metadata.step_stats`` (minitf.runtime.step_stats)."""
    msg = pb.StepStatsProto()
    for dev in stats.dev_stats:
        d = msg.dev_stats.add(device=dev.device)
        for ns in dev.node_stats:
            n = d.node_stats.add(
                node_name=ns.node_name,
                op_type=ns.op_type,
                all_start_micros=int(ns.all_start_micros),
                op_start_rel_micros=int(ns.op_start_rel_micros),
                op_end_rel_micros=int(ns.op_end_rel_micros),
                all_end_rel_micros=int(ns.all_end_rel_micros),
                scheduled_micros=int(ns.scheduled_micros or 0),
                thread_id=int(ns.thread_id),
                thread_name=ns.thread_name or "",
                pool=ns.pool or "",
                timeline_label=ns.timeline_label or "",
            )
            for out in ns.output:
                o = n.output.add(
                    slot=out.slot, dtype=out.dtype or "", requested_bytes=int(out.requested_bytes)
                )
                _shape_to_proto(out.shape, o.shape)
            for c in ns.chunks:
                n.chunks.add(
                    index=c.index,
                    thread_id=int(c.thread_id),
                    thread_name=c.thread_name or "",
                    start_micros=int(c.start_micros),
                    end_micros=int(c.end_micros),
                )
    for t in stats.transfers:
        msg.transfers.add(
            tensor_name=t.tensor_name,
            src_node=t.src_node,
            dst_node=t.dst_node,
            src_device=t.src_device,
            dst_device=t.dst_device,
            bytes=int(t.bytes),
            micros=int(t.micros),
            has_start_micros=t.start_micros is not None,
            start_micros=int(t.start_micros or 0),
        )
    return msg


def proto_to_step_stats(msg):
    """``config_proto.StepStats`` of the minitf record classes from a :class:`StepStatsProto`."""
    from minitf.runtime import step_stats as ss
    from minitf.runtime.config_proto import StepStats

    out = StepStats()
    for d in msg.dev_stats:
        nodes = []
        for n in d.node_stats:
            outputs = []
            for o in n.output:
                dims = _dims_from_proto(o.shape)
                outputs.append(
                    ss.TensorOutput(
                        o.slot, o.dtype, None if dims is None else tuple(dims), o.requested_bytes
                    )
                )
            chunks = [
                ss.ChunkStats(c.index, c.thread_id, c.thread_name, c.start_micros, c.end_micros)
                for c in n.chunks
            ]
            ns = ss.NodeExecStats(
                n.node_name,
                n.op_type,
                n.all_start_micros,
                n.all_end_rel_micros,
                n.thread_id,
                n.thread_name,
                n.pool,
                n.timeline_label,
                scheduled_micros=n.scheduled_micros,
                output=outputs,
                chunks=chunks,
            )
            ns.op_start_rel_micros = n.op_start_rel_micros
            ns.op_end_rel_micros = n.op_end_rel_micros
            nodes.append(ns)
        out.dev_stats.append(ss.DeviceStepStats(d.device, nodes))
    for t in msg.transfers:
        out.transfers.append(
            ss.TransferStats(
                t.tensor_name,
                t.src_node,
                t.dst_node,
                t.src_device,
                t.dst_device,
                t.bytes,
                t.micros,
                t.start_micros if t.has_start_micros else None,
            )
        )
    return out


# -- errors as gRPC status -------------------------------------------------------------------


def _cut_message(message):
    data = message.encode("utf-8", "replace")
    if len(data) <= MAX_ERROR_MESSAGE_BYTES:
        return message
    marker = " [... truncated]"
    keep = MAX_ERROR_MESSAGE_BYTES - len(marker)
    return data[:keep].decode("utf-8", "ignore") + marker


def status_from_error(exc):
    """``(grpc.StatusCode, details)`` for an exception a servicer caught: an OpError keeps its
    code; anything else (a bug of minitf's, not a failure of the step) is INTERNAL with
    ``"<Type>: <text>"``, whichever call (RunStep, RunSteps ...) reports it.  Use as
    ``context.abort(*wire.status_from_error(e))``."""
    import grpc

    exc = errors.as_op_error(exc)
    code, message = exc.error_code, exc.message
    by_number = {c.value[0]: c for c in grpc.StatusCode}
    status = by_number.get(code, grpc.StatusCode.UNKNOWN)
    if status is grpc.StatusCode.OK:
        status = grpc.StatusCode.UNKNOWN
    return status, _cut_message(message or "")


def error_from_status(code, details):
    """The minitf OpError for a failed RPC's status (``grpc.StatusCode`` or its number), e.g.
    ``raise wire.error_from_status(rpc_error.code(), rpc_error.details())``."""
    number = code.value[0] if hasattr(code, "value") else int(code)
    try:
        cls = errors.exception_type_from_error_code(number)
    except KeyError:  # OK or a code minitf does not know
        cls = errors.UnknownError
    return cls(None, None, _cut_message(details or ""))


# -- reading client-streamed requests ---------------------------------------------------------


def clear_request(containers=()):
    """The fields of a ResetRequest or CleanupAllRequest for ``containers`` (empty: each
    device's default container): ``pb.ResetRequest(**clear_request(names))``."""
    return {"container": list(containers), "marker": CLEAR_REQUEST_MARKER}


def check_clear_request(request, what):
    """Raises InvalidArgumentError unless ``request`` (ResetRequest, CleanupAllRequest) is well
    formed: the marker :func:`clear_request` sets and valid container names only."""
    if request.marker != CLEAR_REQUEST_MARKER:
        raise errors.InvalidArgumentError(
            None, None, "Malformed %s request: it lacks minitf's request marker." % what
        )
    for name in request.container:
        if not _CONTAINER_RE.match(name):
            raise errors.InvalidArgumentError(
                None, None, "Malformed %s request: bad container name %r." % (what, name[:100])
            )


def read_graph_stream(request_iterator, what):
    """(first message, GraphDef) of a streamed request whose messages carry
    ``graph_def_chunk`` pieces (CreateSession, ExtendSession, RegisterGraph)."""
    header, pieces = None, []
    for msg in request_iterator:
        if header is None:
            header = msg
        pieces.append(msg.graph_def_chunk)
    if header is None:
        raise errors.InvalidArgumentError(None, None, "Empty %s request." % what)
    return header, assemble_graph_def(pieces)


def read_tensor_stream(request_iterator, what, cls, tensors_field, parts_field):
    """(first message, {name: ndarray}) of a streamed request of serialized ``cls`` messages
    carrying inline NamedTensors in ``tensors_field`` and TensorParts in ``parts_field``
    (RunStep, RunGraph)."""
    header = None
    receiver = NamedTensorReceiver()
    for raw in request_iterator:
        msg = receiver.add_message(raw, cls, tensors_field, parts_field)
        if header is None:
            header = msg
    if header is None:
        raise errors.InvalidArgumentError(None, None, "Empty %s request." % what)
    return header, receiver.finish()
