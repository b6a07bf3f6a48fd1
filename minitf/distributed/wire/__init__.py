"""The wire format of minitf's cluster: graphs and tensors as protocol buffers, and back.

Book section: "The Master and Worker Services".  Between a client, a master and its workers only
two kinds of things travel: *graphs* (the client's GraphDef to the master, one partition per
task from the master to each worker) and *tensors* (feeds, fetches, and every value a ``Send`` op
hands to a ``Recv`` op on another task).  This module turns both into the messages of
``protocol.proto`` and back.  It is pure functions: no sockets, no threads, no gRPC calls.
Its modules: ``limits`` (every cap in one place), ``tensors`` (one tensor, one message),
``chunks`` (streamed tensors and the named tensors of a step), ``graphs`` and ``messages``
(session configs, step stats, errors, client-streamed requests); this package exports the
public names of all five.

Tensors
    :func:`tensor_to_proto` / :func:`proto_to_tensor` for a tensor in one message;
    :func:`iter_tensor_chunks` / :func:`assemble_chunks` for a tensor streamed in pieces (so a
    64 MiB tensor moves although one gRPC message is capped at :data:`MAX_MESSAGE_BYTES`);
    :func:`split_named_tensors` / :class:`NamedTensorReceiver` for the feeds and fetches of a
    step (small ones inline, large ones in pieces).  The pieces are written and read by hand
    as protobuf lays them out (:func:`split_field`): their data is copied once per side, and
    a master forwards a worker's serialized responses as they are; :func:`coalesce` joins a
    step's small messages into one.
Graphs
    :func:`graph_to_proto` (a minitf Graph, or some of its ops, to a GraphDef),
    :func:`proto_to_node_records` (a GraphDef to plain records of minitf values),
    :func:`import_graph_def` (a GraphDef rebuilt as Operations in a minitf Graph; its checks
    alone: :func:`checked_nodes`), and
    :func:`iter_graph_def_chunks` / :func:`assemble_graph_def` to stream a large GraphDef.
Sessions and errors
    :func:`session_config_to_proto` / :func:`proto_to_session_config`,
    :func:`step_stats_to_proto` / :func:`proto_to_step_stats`,
    :func:`status_from_error` / :func:`error_from_status` (errors travel as gRPC status).

Safety rules for what is received (a server may be reachable by anyone on the network):

* nothing is unpickled or evaluated; dtypes are looked up by name in a fixed whitelist (never
  ``np.dtype(<received string>)``);
* every declared size is checked before memory is allocated for it: ranks above
  :data:`MAX_RANK`, negative dimensions, tensors above ``max_bytes`` (default
  :data:`MAX_TENSOR_BYTES`), content whose length does not match the shape, chunks out of order
  all raise :class:`minitf.errors.InvalidArgumentError`;
* decoded arrays are fresh, writable copies that share nothing with the message.

Byte order on the wire is little-endian; bools are one byte each (any non-zero byte reads as
True); string tensors are lists of ``bytes``.
"""

from minitf.distributed.wire.chunks import (
    NamedTensorReceiver,
    assemble_chunks,
    coalesce,
    decode_chunk,
    encode_chunk,
    iter_tensor_chunks,
    malformed,
    message_fields,
    serialize,
    split_field,
    split_named_tensors,
    with_parts,
)
from minitf.distributed.wire.graphs import (
    OUTPUT_SHAPES_ATTR,
    OUTPUT_TYPES_ATTR,
    NodeRecord,
    assemble_graph_def,
    attr_from_proto,
    attr_to_proto,
    check_graph_def,
    checked_nodes,
    graph_to_proto,
    import_graph_def,
    iter_graph_def_chunks,
    node_to_proto,
    proto_to_node_records,
    topological,
)
from minitf.distributed.wire.limits import (
    CONTROL_RPC_SECONDS,
    DEFAULT_CHUNK_BYTES,
    DEFAULT_STEP_SECONDS,
    GRPC_OPTIONS,
    INLINE_TENSOR_BYTES,
    MAX_ERROR_MESSAGE_BYTES,
    MAX_GRAPH_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_RANK,
    MAX_REQUEST_HEADS,
    MAX_TENSOR_BYTES,
    MAX_WAIT_SECONDS,
    SMALL_TENSOR_BYTES,
    STEP_SLACK_SECONDS,
    STREAM_CHUNK_BYTES,
    handler_seconds,
    kept_head,
    timeout_seconds,
)
from minitf.distributed.wire.messages import (
    CLEAR_REQUEST_MARKER,
    check_clear_request,
    clear_request,
    error_from_status,
    proto_to_session_config,
    proto_to_step_stats,
    read_graph_stream,
    read_tensor_stream,
    session_config_to_proto,
    status_from_error,
    step_stats_to_proto,
)
from minitf.distributed.wire.tensors import (
    TENSOR_DTYPE_NAMES,
    EncodedTensor,
    proto_to_tensor,
    tensor_to_proto,
)

__all__ = [
    "CLEAR_REQUEST_MARKER",
    "check_clear_request",
    "clear_request",
    "CONTROL_RPC_SECONDS",
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_STEP_SECONDS",
    "STEP_SLACK_SECONDS",
    "STREAM_CHUNK_BYTES",
    "GRPC_OPTIONS",
    "INLINE_TENSOR_BYTES",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_GRAPH_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_RANK",
    "MAX_REQUEST_HEADS",
    "MAX_TENSOR_BYTES",
    "MAX_WAIT_SECONDS",
    "handler_seconds",
    "kept_head",
    "timeout_seconds",
    "TENSOR_DTYPE_NAMES",
    "proto_to_tensor",
    "EncodedTensor",
    "tensor_to_proto",
    "NamedTensorReceiver",
    "assemble_chunks",
    "coalesce",
    "decode_chunk",
    "encode_chunk",
    "iter_tensor_chunks",
    "malformed",
    "message_fields",
    "serialize",
    "split_field",
    "split_named_tensors",
    "with_parts",
    "SMALL_TENSOR_BYTES",
    "OUTPUT_SHAPES_ATTR",
    "OUTPUT_TYPES_ATTR",
    "NodeRecord",
    "assemble_graph_def",
    "attr_from_proto",
    "attr_to_proto",
    "check_graph_def",
    "checked_nodes",
    "graph_to_proto",
    "import_graph_def",
    "iter_graph_def_chunks",
    "node_to_proto",
    "topological",
    "proto_to_node_records",
    "error_from_status",
    "proto_to_session_config",
    "proto_to_step_stats",
    "read_graph_stream",
    "read_tensor_stream",
    "session_config_to_proto",
    "status_from_error",
    "step_stats_to_proto",
]
