#!/bin/sh
# Regenerates the committed gRPC code from proto/ (`make proto`).
#
#   scripts/gen_proto.sh [OUT_DIR]    (default: the repository root)
#
# The include path maps proto/ to the virtual directory leoflow/protocol, so the
# generated modules land in OUT_DIR/leoflow/protocol/leoflow/agent/v1/ and import
# each other as `leoflow.protocol.leoflow.agent.v1` (no post-processing, and no
# clash with the real `leoflow.agent` package).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root}
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
cd "$root"
mkdir -p "$out"
"$python" -m grpc_tools.protoc \
  -Ileoflow/protocol=proto \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  proto/leoflow/agent/v1/agent.proto
