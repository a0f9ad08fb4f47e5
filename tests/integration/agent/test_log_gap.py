"""A log stream that breaks mid-task is reopened, and the stored log says where."""

from __future__ import annotations

import asyncio
from pathlib import Path

from leoflow.agent.logship import GAP_MARKER
from tests.support.proxy import CuttableProxy

from .plane import Plane


async def _until(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


async def test_a_broken_log_stream_leaves_a_marker_where_output_may_be_missing(
    plane: Plane, tmp_path: Path
) -> None:
    host, _, port = plane.address.rpartition(":")
    proxy = CuttableProxy(host, int(port))
    await proxy.start()
    go = tmp_path / "go"
    ti = plane.ti(
        1,
        argv=[
            "sh",
            "-c",
            f"echo before; while [ ! -e {go} ]; do sleep 0.05; done; printf after",
        ],
    )
    env = plane.agent_env(
        LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti),
        LEOFLOW_AGENT_ENDPOINT=f"127.0.0.1:{proxy.port}",
    )
    proc = await plane.agent(env=env)
    try:
        await _until(lambda: bytes(ti.log) == b"before\n", "the first line to arrive")
        # Reset the agent's connection (new ones still get through): its open Logs
        # stream breaks with UNAVAILABLE at its next write.
        await proxy.retarget(host, int(port))
        go.touch()
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proxy.stop()
    assert proc.returncode == 0, err.decode()
    assert bytes(ti.log) == b"before\n" + GAP_MARKER + b"after", err.decode()
    assert "log stream interrupted" in err.decode()
    assert ti.state == "success"
