"""A real agent endpoint on a real socket over the fake backend, and helpers to poke it."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from leoflow.domain.credentials import new_claims, sign_session
from leoflow.protocol.agent_v1 import method_path, pb
from leoflow.scheduler.agent_endpoint import AgentEndpoint

from .fake_backend import FakeBackend, FakeTI

KEY = b"test-signing-key-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Plane:
    """A real endpoint on a real socket, over the fake backend."""

    backend: FakeBackend
    endpoint: AgentEndpoint
    address: str
    channel: Any
    secrets_dir: Path

    def ti(self, ti_pk: int, **kw: Any) -> FakeTI:
        kw.setdefault("dag_id", "dag")
        kw.setdefault("run_id", "run1")
        kw.setdefault("task_id", f"t{ti_pk}")
        return self.backend.add(FakeTI(ti_pk, **kw))

    def token(self, ti_pk: int, try_number: int = 1, *, key: bytes = KEY, ttl: float = 60) -> str:
        import time

        return sign_session(new_claims(ti_pk, try_number, now=time.time(), ttl=ttl), key)

    async def unary(self, method: str, request: Any, token: str | None = None) -> Any:
        response_type = {
            "Exchange": pb.ExchangeResponse,
            "Start": pb.StartResponse,
            "Heartbeat": pb.HeartbeatResponse,
            "Complete": pb.CompleteResponse,
            "ResolveSecret": pb.ResolveSecretResponse,
        }[method]
        call = self.channel.unary_unary(
            method_path(method),
            request_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        metadata = () if token is None else (("authorization", f"Bearer {token}"),)
        return await call(request, metadata=metadata, timeout=10)

    def logs_call(self, token: str | None) -> Any:
        call = self.channel.stream_unary(
            method_path("Logs"),
            request_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
            response_deserializer=pb.LogsAck.FromString,
        )
        metadata = () if token is None else (("authorization", f"Bearer {token}"),)
        return call(metadata=metadata, timeout=30)

    def agent_env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
        env["LEOFLOW_AGENT_ENDPOINT"] = self.address
        env["LEOFLOW_AGENT_CONNECT_TIMEOUT"] = "10"
        env["LEOFLOW_AGENT_KILL_GRACE"] = "2"
        env["PYTHONPATH"] = str(ROOT)
        env.update(extra)
        return env

    async def agent(
        self, *args: str, env: dict[str, str], stdin: int | None = None
    ) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "leoflow.agent",
            *args,
            env=env,
            stdin=stdin if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )


async def status(awaitable: Any) -> grpc.StatusCode:
    try:
        await awaitable
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK
