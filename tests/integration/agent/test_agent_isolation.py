"""The agent as a real subprocess: what its command inherits, and that it dies with it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from leoflow.executor.process_groups import group_alive

from .plane import ROOT, Plane

PY = sys.executable


async def _until(predicate: object, what: str) -> None:
    for _ in range(3000):
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def test_a_nul_byte_in_the_command_fails_the_try_at_once(plane: Plane) -> None:
    ti = plane.ti(1, argv=["echo", "a\x00b"])
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 5, err
    assert ti.outcome is not None and ti.outcome.get("not_started") is True
    assert "embedded null byte" in ti.outcome["message"]
    assert "'echo'" in ti.outcome["message"]


async def test_a_missing_executable_is_reported_as_not_started_naming_it(plane: Plane) -> None:
    ti = plane.ti(1, argv=["/nonexistent/bin"])
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 127
    assert ti.outcome is not None and ti.outcome.get("not_started") is True
    assert ti.outcome["message"] == "command not found: '/nonexistent/bin'"


async def test_a_pods_command_keeps_the_image_env_but_no_leoflow_variable(plane: Plane) -> None:
    script = "import json, os; print(json.dumps(dict(os.environ)))"
    ti = plane.ti(1, argv=[PY, "-c", script], env={"TARGET": "prod"})
    env = plane.agent_env(
        LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti),
        LEOFLOW_POD_NAME="pod-1",
        LEOFLOW_SOME_SETTING="not-for-the-task",
        JAVA_HOME="/opt/java",
    )
    proc = await plane.agent(env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    seen = json.loads(bytes(ti.log))
    assert seen["JAVA_HOME"] == "/opt/java" and seen["TARGET"] == "prod"
    # Only the agent's own offer: where the command may write why it failed.
    assert [name for name in seen if name.startswith("LEOFLOW_")] == ["LEOFLOW_EXIT_REASON_FILE"]


async def test_kill_9_of_a_single_agent_kills_its_command(plane: Plane, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    ti = plane.ti(1, argv=[PY, "-c", script])
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    await _until(lambda: pidfile.exists() and pidfile.read_text(), "the command wrote its pid")
    pid = int(pidfile.read_text())
    proc.kill()
    await proc.wait()
    try:
        await _until(lambda: not group_alive(pid), f"the command (pid {pid}) died with its agent")
    finally:
        _kill_group(pid)


async def test_the_direct_executors_children_die_with_it(tmp_path: Path) -> None:
    """``spawn`` (Lite's direct executor) in a process we then kill with SIGKILL."""
    helper = (
        "import asyncio\n"
        "from leoflow.executor.spawn import spawn\n"
        "async def main():\n"
        "    child = await spawn(['sleep', '600'], env={'PATH': '/usr/bin:/bin'})\n"
        "    print(child.pid, flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        PY, "-c", helper, env=env, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    pid = int(await asyncio.wait_for(proc.stdout.readline(), 60))
    assert group_alive(pid)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    try:
        await _until(lambda: not group_alive(pid), f"the child (pid {pid}) died with its parent")
    finally:
        _kill_group(pid)


def _kill_group(pgid: int) -> None:
    """Leave nothing behind when the assertion fails."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
