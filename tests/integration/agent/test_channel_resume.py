"""A Channel broken mid-task resumes: no log line lost or stored twice, one Complete.

Both ways a stream breaks in production, over real sockets and a real agent process:
the connection reset under a running task (a proxy between agent and endpoint drops
it), and the endpoint itself stopped and started again on the same port (a replica
restart; the backend, like the store, keeps what was written).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from leoflow.scheduler.agent_endpoint import AgentEndpoint
from tests.support.proxy import CuttableProxy

from .plane import KEY, Plane


async def _until(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


def _script(go: Path) -> list[str]:
    # 200 numbered lines, a wait for the test's signal, 200 more.
    return [
        "sh",
        "-c",
        "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; "
        f"while [ ! -e {go} ]; do sleep 0.05; done; "
        "while [ $i -lt 400 ]; do echo line$i; i=$((i+1)); done",
    ]


EXPECTED = "".join(f"line{i}\n" for i in range(400)).encode()


async def test_a_reset_connection_resumes_without_losing_or_doubling_output(
    plane: Plane, tmp_path: Path
) -> None:
    host, _, port = plane.address.rpartition(":")
    proxy = CuttableProxy(host, int(port))
    await proxy.start()
    go = tmp_path / "go"
    ti = plane.ti(1, argv=_script(go))
    env = plane.agent_env(
        LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti),
        LEOFLOW_AGENT_ENDPOINT=f"127.0.0.1:{proxy.port}",
    )
    proc = await plane.agent(env=env)
    try:
        await _until(lambda: bytes(ti.log).endswith(b"line199\n"), "the first 200 lines")
        # Drops the agent's connection (new ones still get through): its stream
        # breaks, the agent opens another and resends whatever had no reply.
        await proxy.retarget(host, int(port))
        go.touch()
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proxy.stop()
    assert proc.returncode == 0, err.decode()
    assert bytes(ti.log) == EXPECTED, err.decode()
    assert ti.state == "success"
    assert [w[0] for w in plane.backend.writes_for(1)].count("complete") == 1


async def test_an_endpoint_restarted_mid_task_gets_every_line_once_and_one_completion(
    plane: Plane, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    ti = plane.ti(1, argv=_script(go), env={"AFTER": "x"})
    other = plane.ti(2, argv=["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; echo two"])
    stdin = asyncio.subprocess.PIPE
    proc = await plane.agent("--pool", "--events", env=plane.agent_env(), stdin=stdin)
    assert proc.stdin is not None
    for fake in (ti, other):
        line = f'{{"op":"run","key":"{fake.ti_pk}:1","ticket":"{plane.backend.ticket(fake)}"}}\n'
        proc.stdin.write(line.encode())
    await proc.stdin.drain()
    replacement = AgentEndpoint(plane.backend, KEY, heartbeat_interval=0.2)
    try:
        await _until(lambda: bytes(ti.log).endswith(b"line199\n"), "the first 200 lines")
        await _until(lambda: other.state == "running", "the second task to start")
        await plane.endpoint.stop(0)
        # Output written while no endpoint listens waits in the agent.
        go.touch()
        await asyncio.sleep(0.3)
        await replacement.start(plane.address)
        await _until(lambda: ti.state == "success" and other.state == "success", "both ends")
        proc.stdin.close()
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await replacement.stop(0)
    assert proc.returncode == 0, err.decode()
    assert bytes(ti.log) == EXPECTED, err.decode()
    assert bytes(other.log) == b"two\n"
    for ti_pk in (1, 2):
        writes = [w[0] for w in plane.backend.writes_for(ti_pk)]
        assert writes.count("complete") == 1 and writes.count("start") == 1, writes
