"""Tasks see only what they were given, through Lite's real paths.

The scheduler, the gRPC endpoint and one warm ``leoflow agent --pool`` (or direct
children for ``--executor subprocess``), with Lite's process environment holding the
control plane's secrets, as it does when a user exports them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import pwd
import signal
import sys
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.assembly import Runtime, open_runtime
from leoflow.runtime.dagfolder import record_dag
from leoflow.settings import load_settings

PY = sys.executable
# The documented base (README, "Using Lite"), written out again on purpose.
BASE = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR")
SIGNING_KEY = "control-plane-signing-key-0123456789"
CLIENT_TOKEN = "client-api-token-abcdef"
SECRET = "Tr0ub4dor&3/horse+battery"
DUMP = "import json, os; print(json.dumps(dict(os.environ)), flush=True)"


@pytest.fixture
def control_plane_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """What a user's shell holds when it starts Lite: settings, a client token, the rest."""
    values = {
        "LEOFLOW_TOKEN_SIGNING_KEY": SIGNING_KEY,
        "LEOFLOW_TOKEN": CLIENT_TOKEN,
        "LEOFLOW_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'leoflow.db'}",
        "LEOFLOW_LOG_LEVEL": "INFO",
        "UNRELATED_SHELL_VARIABLE": "from-the-users-shell",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[Runtime] = []

    async def open_with(text: str, executor: str = "agent", **overrides: Any) -> Runtime:
        (tmp_path / "secrets").mkdir(exist_ok=True)
        settings = load_settings(
            home=tmp_path,
            scheduler_poll_interval=0.2,
            secrets_dir=tmp_path / "secrets",
            **overrides,
        )
        rt = await open_runtime(settings, executor, solo=True)
        opened.append(rt)
        loaded = LoadedDag(parse_dag(text, tmp_path / "dag.yaml"), tmp_path / "dag.yaml", text)
        await record_dag(rt.store, loaded)
        await rt.scheduler.start()
        return rt

    yield open_with
    for rt in opened:
        await rt.close()


def _expected_base() -> dict[str, str]:
    env = {name: os.environ[name] for name in BASE if name in os.environ}
    env.update((k, v) for k, v in os.environ.items() if k.startswith("LC_"))
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


async def _run(rt: Runtime, dag_id: str) -> tuple[Any, dict[str, Any]]:
    row = await rt.scheduler.trigger(dag_id)
    final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 60)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    return final, tis


def _json_lines(log: bytes) -> list[dict[str, str]]:
    return [json.loads(line) for line in log.decode().splitlines() if line.startswith("{")]


async def test_agent_task_env_is_exactly_base_context_task_env_and_secrets(
    runtime: Any, control_plane_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "warehouse_password").write_text(SECRET)
    # The task dumps its own environment and its parent's: the pool agent's.
    parent = (
        "import json, os; raw = open(f'/proc/{os.getppid()}/environ', 'rb').read(); "
        "print(json.dumps(dict(e.decode().split('=', 1) for e in raw.split(b'\\0') if e)))"
    )
    rt = await runtime(
        f"""
dag_id: envdump
tasks:
  dump:
    env: {{GREETING: bonjour}}
    secrets: [warehouse_password]
    command: [{json.dumps(PY)}, "-c", {json.dumps(DUMP + "; " + parent)}]
"""
    )
    final, tis = await _run(rt, "envdump")
    assert final.state is RunState.SUCCESS
    task_env, agent_env = _json_lines(await rt.store.read_log(tis["dump"].pk, 1))
    # The agent offers every command a file to say why it failed in (dbt tasks do).
    assert "leoflow-exit-reason" in task_env.pop("LEOFLOW_EXIT_REASON_FILE")
    # ... and a file of its own to write its output to (README, "Outputs between tasks").
    assert task_env.pop("LEOFLOW_OUTPUT").endswith(".output.json")
    expected = {
        **_expected_base(),
        "GREETING": "bonjour",
        "LEOFLOW_DAG_ID": "envdump",
        "LEOFLOW_RUN_ID": final.run_id,
        "LEOFLOW_TASK_ID": "dump",
        "LEOFLOW_TRY_NUMBER": "1",
        # The value reached the task; printed, it is masked before it left the agent.
        "LEOFLOW_SECRET_WAREHOUSE_PASSWORD": "***",
    }
    assert task_env == expected
    # The agent process itself never holds the control plane's secrets either.
    leaked = [v for v in control_plane_env.values() if v in json.dumps(agent_env)]
    assert leaked == []
    assert "UNRELATED_SHELL_VARIABLE" not in agent_env
    assert agent_env["LEOFLOW_AGENT_ENDPOINT"]


async def test_subprocess_task_env_is_exactly_base_context_and_task_env(
    runtime: Any, control_plane_env: dict[str, str]
) -> None:
    rt = await runtime(
        f"""
dag_id: envdump
tasks:
  dump:
    env: {{GREETING: hallo}}
    command: [{json.dumps(PY)}, "-c", {json.dumps(DUMP)}]
""",
        executor="subprocess",
    )
    final, tis = await _run(rt, "envdump")
    assert final.state is RunState.SUCCESS
    (task_env,) = _json_lines(await rt.store.read_log(tis["dump"].pk, 1))
    assert task_env.pop("LEOFLOW_OUTPUT").endswith(".output.json")
    assert task_env == {
        **_expected_base(),
        "GREETING": "hallo",
        "LEOFLOW_DAG_ID": "envdump",
        "LEOFLOW_RUN_ID": final.run_id,
        "LEOFLOW_TASK_ID": "dump",
        "LEOFLOW_TRY_NUMBER": "1",
    }


async def test_secret_values_and_their_encodings_are_masked_in_the_stored_log(
    runtime: Any, tmp_path: Path
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api_key").write_text(SECRET)
    script = (
        "import base64, os, sys, time, urllib.parse\n"
        "v = os.environ['LEOFLOW_SECRET_API_KEY']\n"
        "print('raw', v)\n"
        "print('b64', base64.b64encode(v.encode()).decode())\n"
        "print('url', urllib.parse.quote(v, safe=''))\n"
        # Split across two writes (and two pipe reads): the agent must hold the first half.
        "sys.stdout.write('split ' + v[:7]); sys.stdout.flush(); time.sleep(0.3)\n"
        "sys.stdout.write(v[7:] + ' end\\n'); sys.stdout.flush()\n"
        "print('stderr', v, file=sys.stderr, flush=True)\n"
    )
    rt = await runtime(
        f"""
dag_id: masked
tasks:
  leak:
    secrets: [api_key]
    command: [{json.dumps(PY)}, "-c", {json.dumps(script)}]
"""
    )
    final, tis = await _run(rt, "masked")
    assert final.state is RunState.SUCCESS
    log = await rt.store.read_log(tis["leak"].pk, 1)
    forms = [
        SECRET,
        base64.b64encode(SECRET.encode()).decode(),
        urllib.parse.quote(SECRET, safe=""),
        SECRET[:7],  # not even the half that arrived first
    ]
    assert [f for f in forms if f.encode() in log] == []
    lines = log.decode().splitlines()
    for expected in ("raw ***", "b64 ***", "url ***", "split *** end", "stderr ***"):
        assert expected in lines, log


async def test_kill_9_of_the_pool_agent_kills_its_tasks_and_reruns_them_uncounted(
    runtime: Any, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = f"""
import os, subprocess, sys, time
marks = {str(marks)!r}
def running(pid):
    try:
        stat = open(f"/proc/{{pid}}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"
if os.environ["LEOFLOW_TRY_NUMBER"] == "1":
    child = subprocess.Popen(["sleep", "600"])
    with open(marks + "/try1.tmp", "w") as f:
        f.write(f"{{os.getpid()}} {{child.pid}}")
    os.rename(marks + "/try1.tmp", marks + "/try1")
    time.sleep(600)
else:
    pids = open(marks + "/try1").read().split()
    with open(marks + "/try2", "w") as f:
        f.write(" ".join(p for p in pids if running(int(p))))
"""
    rt = await runtime(
        f"""
dag_id: orphan
tasks:
  sleeper:
    retries: 0
    command: [{json.dumps(PY)}, "-c", {json.dumps(script)}]
"""
    )
    row = await rt.scheduler.trigger("orphan")
    for _ in range(3000):
        if (marks / "try1").exists():
            break
        await asyncio.sleep(0.01)
    task_pid, child_pid = (int(p) for p in (marks / "try1").read_text().split())
    agent = rt.executor._process
    scratch = rt.executor.scratch
    assert await asyncio.to_thread(os.listdir, scratch)  # the try's output directory
    os.kill(agent.pid, signal.SIGKILL)
    try:
        final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # leave no orphan when it fails
            os.killpg(task_pid, signal.SIGKILL)
    assert final.state is RunState.SUCCESS
    (ti,) = await rt.store.list_task_instances(run_pk=row.pk)
    assert ti.state is TaskState.SUCCESS and ti.try_number == 2
    # Try 2 started only once nothing of try 1 ran any more.
    assert (marks / "try2").read_text() == ""
    from leoflow.executor.process_groups import group_alive

    assert not group_alive(task_pid) and not group_alive(child_pid)
    # What the killed agent left on the disk went with it; the new agent has its own.
    assert not await asyncio.to_thread(os.path.exists, scratch)
    assert rt.executor.scratch != scratch


@pytest.mark.parametrize("executor", ["agent", "subprocess"])
async def test_task_user_runs_tasks_as_that_user(runtime: Any, executor: str) -> None:
    assert os.geteuid() == 0, "tests run as root here and in CI"
    nobody = pwd.getpwnam("nobody")
    rt = await runtime(
        """
dag_id: as_user
tasks:
  who: {command: ["/bin/sh", "-c", "id -u; id -g; echo $HOME $USER"]}
""",
        executor=executor,
        task_user="nobody",
    )
    final, tis = await _run(rt, "as_user")
    log = await rt.store.read_log(tis["who"].pk, 1)
    assert final.state is RunState.SUCCESS, log
    assert log.decode().splitlines() == [
        str(nobody.pw_uid),
        str(nobody.pw_gid),
        f"{nobody.pw_dir} nobody",
    ]


async def test_a_command_that_cannot_start_fails_at_once_naming_it(runtime: Any) -> None:
    rt = await runtime(
        "dag_id: enoent\ntasks:\n  t: {retries: 1, command: [/nonexistent/bin, arg]}\n",
        heartbeat_timeout=600,
    )
    final, tis = await _run(rt, "enoent")
    assert final.state is RunState.FAILED
    ti = tis["t"]
    # A real try that failed, and its retry too: both spent as normal failures.
    assert ti.try_number == 2 and ti.reason == "launch_failed"
    assert ti.message is not None and "'/nonexistent/bin'" in ti.message
