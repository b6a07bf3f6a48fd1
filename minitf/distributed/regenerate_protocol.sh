#!/bin/sh
# Regenerates minitf/distributed/protocol_pb2.py and protocol_pb2_grpc.py from protocol.proto.
#
# Book section: "The Master and Worker Services" (the messages servers exchange).
# The generated modules are committed, so installing minitf needs no protoc.  Run this after
# editing protocol.proto, from anywhere:
#
#     sh minitf/distributed/regenerate_protocol.sh
#
# It needs grpcio-tools (pip install grpcio-tools).  The generated code checks at import time
# that the installed runtimes are at least the versions that generated it: protobuf >= the
# "Protobuf Python Version" in protocol_pb2.py's header, grpcio >= GRPC_GENERATED_VERSION in
# protocol_pb2_grpc.py.  Keep the pins in pyproject.toml in step with them (regenerate with the
# oldest grpcio-tools you want to support).
#
# The proto path is the repository root (-I .), so the file registers in protobuf's global
# descriptor pool as "minitf/distributed/protocol.proto" (a bare "protocol.proto" could clash
# with another library's file of that name) and the grpc module imports its messages as
# `from minitf.distributed import protocol_pb2`, which needs no fixing up.
set -eu
cd "$(dirname "$0")/../.."
python3 -m grpc_tools.protoc -I . \
    --python_out=. --grpc_python_out=. \
    minitf/distributed/protocol.proto
grep -q '^from minitf.distributed import protocol_pb2 as ' minitf/distributed/protocol_pb2_grpc.py
echo "regenerated minitf/distributed/protocol_pb2.py and protocol_pb2_grpc.py"
