"""SIGTERM to `leoflow lite` and `leoflow run` while tasks run: a prompt exit that says
what happened to them, no task process left behind, and (Lite) a next start that runs
them again without spending a retry."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.e2e.conftest import LEOFLOW, REPO
from tests.support.lite_proc import wait as _wait

# Far above the ~0.2 s it takes (benchmarks/bench_stop.py), so CPU contention cannot
# fail it; today's main took 16 s.
EXIT_BOUND = 10.0


def _query(home: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        return db.execute(sql).fetchall()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # A zombie still counts for kill(); it is gone once its new parent reaps it.
    stat = Path(f"/proc/{pgid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))


def _tasks(tmp_path: Path, release: Path) -> str:
    # Each task records its process group (its shell is the group leader), then waits
    # until `release` exists; `stubborn` ignores SIGTERM, so only SIGKILL stops it.
    # The pid file appears by rename, whole: a reader never sees it empty.
    def task(name: str, prefix: str = "") -> str:
        pidfile = tmp_path / f"pid-{name}"
        return (
            f"  {name}: {{command: '{prefix}echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; "
            f"while [ ! -e {release} ]; do sleep 0.1; done'}}\n"
        )

    return task("a") + task("b") + task("stubborn", 'trap "" TERM; ')


def _pgids(tmp_path: Path) -> list[int]:
    return [int((tmp_path / f"pid-{n}").read_text()) for n in ("a", "b", "stubborn")]


def _stop(proc: subprocess.Popen[str]) -> tuple[float, str]:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    return time.monotonic() - started, out


def test_sigterm_stops_lite_promptly_and_the_next_start_reruns_its_tasks(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    release = tmp_path / "release"
    start = (datetime.now(UTC) - timedelta(seconds=70)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (folder / "stop.yaml").write_text(
        f"dag_id: stop\nschedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\n"
        # retries: 0 — a try that spent a retry would fail the task instead of re-running.
        "max_active_runs: 1\ndefaults: {retries: 0}\ntasks:\n" + _tasks(tmp_path, release)
    )
    lite_env = {**env, "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"}
    argv = [LEOFLOW, "lite", "--dags", str(folder), "--no-api"]

    def lite() -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, env=lite_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip

    proc = lite()
    try:
        _wait(
            lambda: (
                _query(home, "SELECT count(*) FROM task_instances WHERE state='running'")[0][0] == 3
                and all((tmp_path / f"pid-{n}").exists() for n in ("a", "b", "stubborn"))
            ),
            "three running tasks",
        )
        pgids = _pgids(tmp_path)
        elapsed, out = _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert elapsed < EXIT_BOUND, out
    assert proc.returncode == 0, out
    assert (
        "leoflow lite: stopped; 3 running tasks killed (a, b, stubborn); the next start runs "
        "them again without spending a retry"
    ) in out, out
    assert "Traceback" not in out, out
    _wait(lambda: not any(_group_alive(g) for g in pgids), "the tasks' processes to be gone", 10)

    release.touch()
    proc = lite()
    try:
        _wait(
            lambda: _query(home, "SELECT state FROM dag_runs ORDER BY pk")[0][0] == "success",
            "the interrupted run to finish after the restart",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    rows = _query(
        home,
        "SELECT task_id, state, try_number FROM task_instances "
        "WHERE run_pk = (SELECT min(pk) FROM dag_runs) ORDER BY task_id",
    )
    assert rows == [("a", "success", 2), ("b", "success", 2), ("stubborn", "success", 2)]


def test_sigterm_stops_leoflow_run_promptly_and_fails_its_run(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    dag = tmp_path / "stop.yaml"
    dag.write_text("dag_id: stop\ntasks:\n" + _tasks(tmp_path, release))
    proc = subprocess.Popen(
        [LEOFLOW, "run", str(dag)], env=env, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait(
            lambda: all((tmp_path / f"pid-{n}").exists() for n in ("a", "b", "stubborn")),
            "three running tasks",
        )
        pgids = _pgids(tmp_path)
        elapsed, out = _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert elapsed < EXIT_BOUND, out
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "leoflow run: stopped; 3 running tasks killed (a, b, stubborn); run " in out, out
    assert "Traceback" not in out, out
    _wait(lambda: not any(_group_alive(g) for g in pgids), "the tasks' processes to be gone", 10)
    assert _query(home, "SELECT state FROM dag_runs") == [("failed",)]
    assert _query(home, "SELECT DISTINCT state, reason FROM task_instances") == [
        ("failed", "cancelled")
    ]


def _run_three_tasks(
    args: list[str], run_env: dict[str, str], tmp_path: Path, release: Path, err: Any
) -> subprocess.Popen[bytes]:
    """``leoflow run ARGS`` of a DAG of three tasks that wait for ``release``, once all
    three run."""
    dag = tmp_path / "three.yaml"
    dag.write_text("dag_id: three\ntasks:\n" + _tasks(tmp_path, release))
    proc = subprocess.Popen(
        [LEOFLOW, "run", *args, str(dag)], env=run_env, cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    try:
        _wait(
            lambda: all((tmp_path / f"pid-{n}").exists() for n in ("a", "b", "stubborn")),
            "three running tasks",
        )
    except BaseException:
        proc.kill()
        raise
    return proc


def _kill_9(proc: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """SIGKILL to ``leoflow run``; until its tasks' process groups are gone too."""
    pgids = _pgids(tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    _wait(lambda: not any(_group_alive(g) for g in pgids), "the tasks' processes to be gone")


def test_a_killed_leoflow_run_leaves_no_task_behind_even_one_that_ignores_sigterm(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    # SIGKILL gives leoflow run no chance to stop anything: its pool agent hears of
    # the death (PDEATHSIG, SIGTERM) and must SIGKILL what ignores SIGTERM itself.
    # It must not then spend its connect timeout (60 s here) dialing the dead run's
    # endpoint, and it leaves none of the run's directories behind in TMPDIR.
    release = tmp_path / "release"
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    run_env = {
        **env,
        "LEOFLOW_AGENT_KILL_GRACE": "1",
        "LEOFLOW_AGENT_CONNECT_TIMEOUT": "60",
        "TMPDIR": str(tmpdir),
    }
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        proc = _run_three_tasks([], run_env, tmp_path, release, err)
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1, children  # the pool agent
        agent = int(children[0])
        assert _alive(agent)
        assert sorted(p.name.split("-")[1] for p in tmpdir.iterdir()) == ["agent", "run"]
        _kill_9(proc, tmp_path)
        _wait(lambda: not _alive(agent), "the pool agent to be gone", timeout=30)
        _wait(lambda: not list(tmpdir.iterdir()), "the run's directories to be gone", timeout=10)
    finally:
        release.touch()  # whatever is left ends on its own
        if proc.poll() is None:
            proc.kill()
    said = stderr.read_text()
    assert "Traceback" not in said, said
    assert "started this agent" in said and "is gone" in said, said


def test_what_a_killed_run_left_in_tmpdir_the_next_start_removes(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    # --executor subprocess: the tries' files are Lite's own, in one directory Lite
    # holds. Killed, Lite leaves that directory; the next start finds nobody holding
    # it and removes it (while its own task waits to see it gone).
    release = tmp_path / "release"
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    run_env = {**env, "TMPDIR": str(tmpdir)}
    proc = _run_three_tasks(
        ["--executor", "subprocess"], run_env, tmp_path, release, subprocess.DEVNULL
    )
    try:
        _kill_9(proc, tmp_path)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
    (left,) = tmpdir.iterdir()
    assert left.name.startswith("leoflow-lite-"), left
    an_hour_ago = time.time() - 3600  # younger ones may be still being made: kept
    os.utime(left, (an_hour_ago, an_hour_ago))
    waiter = tmp_path / "waiter.yaml"
    waiter.write_text(
        "dag_id: waiter\ntasks:\n"
        f"  gone: {{command: 'for i in $(seq 600); do [ -e {left} ] || exit 0; sleep 0.1; done; "
        "exit 1'}\n"
    )
    done = subprocess.run(
        [LEOFLOW, "run", str(waiter)], env=run_env, cwd=REPO, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not left.exists()
    assert list(tmpdir.iterdir()) == []
