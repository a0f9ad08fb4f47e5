"""The committed gRPC code is what scripts/gen_proto.sh makes from proto/ today."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GENERATED = Path("leoflow/protocol/leoflow/agent/v1")
FILES = ("agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py")


def test_committed_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run(
        ["sh", str(ROOT / "scripts/gen_proto.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    stale = [
        name
        for name in FILES
        if (tmp_path / GENERATED / name).read_bytes() != (ROOT / GENERATED / name).read_bytes()
    ]
    assert not stale, f"stale generated code {stale}: run scripts/gen_proto.sh and commit"


def test_generated_modules_import_under_the_protocol_package() -> None:
    import importlib

    from leoflow.protocol.agent_v1 import SERVICE, pb

    agent_pb2_grpc = importlib.import_module("leoflow.protocol.leoflow.agent.v1.agent_pb2_grpc")

    assert pb.DESCRIPTOR.services_by_name["Agent"].full_name == SERVICE
    assert agent_pb2_grpc.AgentStub is not None
    chunk = pb.LogChunk(stream=pb.LogChunk.STDERR, data=b"x")
    assert pb.LogChunk.FromString(chunk.SerializeToString()) == chunk
