"""A flood of silent connections to Lite's agent port: Lite's descriptors stay bounded,
its API keeps answering, a task already running finishes, and the descriptors return
to where they were once the flood is closed. Lite also starts with its soft open-files
limit raised to the hard one."""

from __future__ import annotations

import os
import resource
import socket
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from tests.e2e.conftest import LEOFLOW, REPO
from tests.support.lite_proc import start_lite, stop, wait
from tests.support.net import closed_by_peer, free_port

MAX_CONNECTIONS = 40
FLOOD = 300


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no 'Max open files' in /proc/PID/limits")


def _low_soft_limit() -> None:
    # What a login shell often gives: a low soft limit under a high hard one.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))


def _first_quiet_task(home: Path) -> tuple[str, int] | None:
    # The task of the first run, the one running through the flood: a start 70 s back
    # makes one or two runs due (two when the clock is in a minute's first 10 s).
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        row = db.execute(
            "select state, try_number from task_instances where dag_id='quiet' order by pk limit 1"
        ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def test_a_flood_of_silent_connections_leaves_lite_and_its_running_task_working(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    started, release = tmp_path / "started", tmp_path / "release"
    start = (datetime.now(UTC) - timedelta(seconds=70)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (folder / "quiet.yaml").write_text(
        f"dag_id: quiet\nschedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\n"
        "max_active_runs: 1\ntasks:\n"
        # Quiet for longer than the idle timeout: it waits for the test's signal.
        f"  wait: {{command: 'touch {started}; while [ ! -e {release} ]; do sleep 0.1; done; "
        "echo released'}\n"
    )
    api_port, agent_port = free_port(), free_port()
    proc = start_lite(
        env,
        folder,
        tmp_path / "lite.out",
        before=_low_soft_limit,
        LEOFLOW_API_LISTEN=f"127.0.0.1:{api_port}",
        LEOFLOW_AGENT_LISTEN=f"127.0.0.1:{agent_port}",
        LEOFLOW_AGENT_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
        LEOFLOW_AGENT_HANDSHAKE_TIMEOUT="1",
        LEOFLOW_AGENT_IDLE_TIMEOUT="0.5",
    )
    try:
        wait(started.exists, "the task to start")
        soft, hard = _limits(proc.pid)
        assert soft == hard != 256, "Lite did not raise its soft open-files limit to the hard one"
        baseline = _fds(proc.pid)

        flood = [socket.create_connection(("127.0.0.1", agent_port)) for _ in range(FLOOD)]
        try:
            for sock in flood:
                sock.setblocking(False)
            assert _fds(proc.pid) <= baseline + MAX_CONNECTIONS + 10
            answer = httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=30)
            assert answer.status_code == 200
            wait(lambda: all(closed_by_peer(s) for s in flood), "Lite to close every silent one")
        finally:
            for sock in flood:
                sock.close()
        # The task's agent kept its stream through the flood and past the idle timeout.
        release.touch()
        wait(lambda: _first_quiet_task(home) == ("success", 1), "the quiet task to succeed")
        wait(lambda: _fds(proc.pid) <= baseline + 5, "Lite's descriptors to return to baseline")
        assert httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=30).status_code == 200
    finally:
        stop(proc)


def test_leoflow_run_and_its_agent_raise_the_open_files_limit(
    env: dict[str, str], tmp_path: Path
) -> None:
    seen = tmp_path / "limit"
    dag = tmp_path / "limit.yaml"
    # A task inherits its agent's limit, which inherits the run's.
    dag.write_text(f"dag_id: limit\ntasks:\n  show: {{command: 'ulimit -Sn > {seen}'}}\n")
    done = subprocess.run(
        [LEOFLOW, "run", str(dag)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_low_soft_limit,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert seen.read_text().strip() in (str(hard), "unlimited")
