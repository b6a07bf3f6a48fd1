#!/bin/sh
# Regenerates minitf/distributed/protocol_pb2.py from protocol.proto.  (The gRPC services need no
# generated module: minitf/distributed/services.py builds them from the descriptors.)
#
# Book section: "The Master and Worker Services" (the messages servers exchange).
# The generated modules are committed, so installing minitf needs no protoc.  Run this after
# editing protocol.proto, from anywhere:
#
#     sh minitf/distributed/regenerate_protocol.sh
#
# It needs grpcio-tools (pip install grpcio-tools).  The generated code checks at import time
# that the installed protobuf runtime is at least the "Protobuf Python Version" in
# protocol_pb2.py's header.  Keep the pin in pyproject.toml in step with it (regenerate with the
# oldest grpcio-tools you want to support).
#
# The proto path is the repository root (-I .), so the file registers in protobuf's global
# descriptor pool as "minitf/distributed/protocol.proto" (a bare "protocol.proto" could clash
# with another library's file of that name); Python imports it as
# `minitf.distributed.protocol_pb2`.
set -eu
cd "$(dirname "$0")/../.."
python3 -m grpc_tools.protoc -I . \
    --python_out=. minitf/distributed/protocol.proto
echo "regenerated minitf/distributed/protocol_pb2.py"
