#!/bin/sh
# Regenerates minitf/lib/protobuf/tf_protos_pb2.py from tf_protos.proto (TF's event, summary,
# graph and meta graph messages with TF's field numbers, in the package "minitf.tfproto").
#
# Book section: "Distributing TensorFlow" (event files and graphs for TensorBoard).
# The generated module is committed, so installing minitf needs no protoc.  Run this after
# editing tf_protos.proto, from anywhere:
#
#     sh minitf/lib/protobuf/regenerate.sh
#
# It needs grpcio-tools (pip install grpcio-tools, the `dev` extra).  As for
# minitf/distributed/regenerate_protocol.sh, the proto path is the repository root (-I .), so
# the file registers in protobuf's descriptor pool as "minitf/lib/protobuf/tf_protos.proto".
set -eu
cd "$(dirname "$0")/../../.."
"${PYTHON:-python3}" -m grpc_tools.protoc -I . \
    --python_out=. minitf/lib/protobuf/tf_protos.proto
echo "regenerated minitf/lib/protobuf/tf_protos_pb2.py"
