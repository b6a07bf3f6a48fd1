#!/bin/sh
# Regenerates minitf/lib/bundle_pb2.py from bundle.proto (the messages of TF's V2 checkpoint
# files).  Like minitf/distributed/regenerate_protocol.sh: the generated module is committed,
# it needs grpcio-tools (pip install grpcio-tools, the version pinned in pyproject.toml's dev
# extra), and the proto path is the repository root so the file registers as
# "minitf/lib/bundle.proto".  Run from anywhere:
#
#     sh minitf/lib/regenerate_bundle.sh
set -eu
cd "$(dirname "$0")/../.."
python3 -m grpc_tools.protoc -I . --python_out=. minitf/lib/bundle.proto
echo "regenerated minitf/lib/bundle_pb2.py"
