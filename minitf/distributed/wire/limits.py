"""Every cap on what a minitf server or client sends and accepts, in one place.

Book section: "The Master and Worker Services" (a server reachable by anyone must bound what
it accepts; the package docstring lists the checks).
"""

#: Largest gRPC message a minitf server or client sends or accepts (both directions).
MAX_MESSAGE_BYTES = 4 << 20
#: gRPC channel/server options that apply :data:`MAX_MESSAGE_BYTES`.
GRPC_OPTIONS = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)
#: Default cap on one received tensor (its bytes once decoded).
MAX_TENSOR_BYTES = 1 << 30
#: Default cap on one received (serialized) GraphDef.
MAX_GRAPH_BYTES = 1 << 30
#: Default size of the ``data`` of one TensorChunk and of one graph_def_chunk.
DEFAULT_CHUNK_BYTES = 1 << 20
#: :func:`split_named_tensors` sends tensors inline until they add up to this many bytes.
INLINE_TENSOR_BYTES = 1 << 20
#: A tensor larger than this goes as hand-written TensorParts, never as a TensorProto inside a
#: NamedTensor: protobuf copies a bytes field into each message that holds it (the proto, the
#: NamedTensor, the request, the serialized bytes), which made a 400 KB tensor cost ~1.6 ms to
#: encode against ~0.04 ms as parts (bench_queues: a FIFOQueue on a ps task).
SMALL_TENSOR_BYTES = 16 << 10
#: Highest rank accepted for a received tensor or shape.
MAX_RANK = 32
#: Error messages are cut to this many UTF-8 bytes before they go into a gRPC status (gRPC
#: carries them in trailing metadata, whose default size limit is 8 KiB).
MAX_ERROR_MESSAGE_BYTES = 4096
#: Pieces of streamed tensors (each in its own message): 512 KiB pipelines best through a master
#: between two processes (bench_cluster: 64 MiB via w0's master at ~1.2 GB/s, against ~0.9 with
#: 4 MiB pieces and ~1.1 with 256 KiB).
STREAM_CHUNK_BYTES = 512 << 10
#: Deadline of every RPC that does not run a step.
CONTROL_RPC_SECONDS = 30.0
#: Deadline of a step when no timeout is configured.
DEFAULT_STEP_SECONDS = 3600.0
#: A caller waits this much past a step's deadline (the peer's DeadlineExceededError, with its
#: message, comes first).
STEP_SLACK_SECONDS = 1.0
#: Serialized request heads a session keeps (one per kind of run) and a signature keeps (one per
#: partition and options): a training loop has a few, but a step with a client deadline has
#: options of its own, so the caches are bounded (:func:`kept_head`).
MAX_REQUEST_HEADS = 64
#: Longest wait minitf hands to gRPC: a longer timeout (``operation_timeout_in_ms`` of 2**63-1)
#: is cut to it, which is as good as none (gRPC reads a far larger one as a deadline passed).
MAX_WAIT_SECONDS = 30 * 24 * 3600.0


def timeout_seconds(ms: int) -> float | None:
    """The seconds of a TF timeout in milliseconds: None where it is <= 0 ("no timeout", as TF
    reads ``operation_timeout_in_ms`` and ``timeout_in_ms``), at most :data:`MAX_WAIT_SECONDS`."""
    return min(ms / 1000.0, MAX_WAIT_SECONDS) if ms > 0 else None


def handler_seconds(remaining: float | None, default: float) -> float:
    """How long a handler waits for its caller: the call's time remaining, or ``default`` where
    the caller set no deadline (gRPC then reports about 9.2e18 s remaining: any deadline past
    :data:`MAX_WAIT_SECONDS` is taken as none)."""
    if remaining is None or remaining > MAX_WAIT_SECONDS:
        return default
    return remaining


def kept_head(heads: dict, key, make, *args):
    """``heads[key]``, made by ``make(*args)`` the first time; ``heads`` never holds more than
    :data:`MAX_REQUEST_HEADS` (it is emptied when full: the kinds of run of a loop are few)."""
    head = heads.get(key)
    if head is None:
        if len(heads) >= MAX_REQUEST_HEADS:
            heads.clear()
        head = heads[key] = make(*args)
    return head
