"""The agent's two small contracts for wrappers such as ``leoflow dbt-task``: a command's
own exit reason (``LEOFLOW_EXIT_REASON_FILE``) and ``leoflow`` run by the agent itself."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from .plane import Plane

PY = sys.executable


async def _run(plane: Plane, argv: list[str], **env: str) -> dict[str, object]:
    ti = plane.ti(1, argv=argv)
    proc = await plane.agent(
        env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti), **env)
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert ti.outcome is not None, err.decode()
    return {**ti.outcome, "log": bytes(ti.log).decode()}


async def test_a_failing_command_s_own_reason_leads_its_exit_description(
    plane: Plane, tmp_path: Path
) -> None:
    script = (
        "import os, sys\n"
        "path = os.environ['LEOFLOW_EXIT_REASON_FILE']\n"
        "print('reason file', path, flush=True)\n"
        "open(path, 'w').write('dbt model orders failed:\\n  Database Error')\n"
        "sys.exit(1)\n"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = await _run(plane, [PY, "-c", script], TMPDIR=str(scratch))
    assert outcome["message"] == "dbt model orders failed: Database Error (exited with code 1)"
    assert f"reason file {scratch}/leoflow-exit-reason-" in str(outcome["log"])
    assert list(scratch.iterdir()) == []  # the agent removed it


async def test_a_reason_from_a_command_that_succeeded_is_not_a_failure(
    plane: Plane, tmp_path: Path
) -> None:
    script = "import os\nopen(os.environ['LEOFLOW_EXIT_REASON_FILE'], 'w').write('fine')\n"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = await _run(plane, [PY, "-c", script], TMPDIR=str(scratch))
    assert (outcome["exit_code"], outcome["message"]) == (0, "")
    assert list(scratch.iterdir()) == []


async def test_leoflow_as_the_program_is_the_agent_s_own_not_the_path_s(
    plane: Plane, tmp_path: Path
) -> None:
    impostor = tmp_path / "leoflow"
    impostor.write_text("#!/bin/sh\necho impostor\nexit 9\n")
    impostor.chmod(0o755)
    # A task PATH whose first ``leoflow`` is not ours (a DAG image's, say).
    ti_env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    ti = plane.ti(1, argv=["leoflow", "dbt-task"], env=ti_env)
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    await asyncio.wait_for(proc.communicate(), 60)
    assert ti.outcome is not None
    log = bytes(ti.log).decode()
    assert "impostor" not in log
    assert "usage: leoflow dbt-task" in log and ti.outcome["exit_code"] == 2
