"""Every cap on what a minitf server or client sends and accepts, in one place.

Book section: "The Master and Worker Services" (a server reachable by anyone must bound what
it accepts; the package docstring lists the checks).
"""


#: Largest gRPC message a minitf server or client sends or accepts (both directions).
MAX_MESSAGE_BYTES = 4 << 20
#: gRPC channel/server options that apply :data:`MAX_MESSAGE_BYTES`.
GRPC_OPTIONS = (("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES))
#: Default cap on one received tensor (its bytes once decoded).
MAX_TENSOR_BYTES = 1 << 30
#: Default cap on one received (serialized) GraphDef.
MAX_GRAPH_BYTES = 1 << 30
#: Default size of the ``data`` of one TensorChunk and of one graph_def_chunk.
DEFAULT_CHUNK_BYTES = 1 << 20
#: :func:`split_named_tensors` sends tensors inline until they add up to this many bytes.
INLINE_TENSOR_BYTES = 1 << 20
#: Highest rank accepted for a received tensor or shape.
MAX_RANK = 32
#: Error messages are cut to this many UTF-8 bytes before they go into a gRPC status (gRPC
#: carries them in trailing metadata, whose default size limit is 8 KiB).
MAX_ERROR_MESSAGE_BYTES = 4096
