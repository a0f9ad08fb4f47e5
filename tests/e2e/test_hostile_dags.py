"""Hostile DAG files in a Lite folder, and a task's hostile output on the terminal."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.e2e.conftest import LEOFLOW, REPO, Leoflow
from tests.e2e.test_lite import StartLite, _cron_dag, _query, _wait, lite  # noqa: F401 - the fixture

LAUGHS = (
    "dag_id: laughs\ntasks: {t: {command: echo}}\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n"
        for i in range(8)
    )
)


def test_hostile_files_are_reported_and_the_other_dags_keep_running(
    lite: StartLite,  # noqa: F811 - the fixture imported above
    home: Path,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "good.yaml").write_text(_cron_dag("good", "  a: {command: 'echo fine'}\n"))
    (folder / "laughs.yaml").write_text(LAUGHS)
    (folder / "nul.yaml").write_text('dag_id: nul\ntasks:\n  a: {command: "echo \\0"}\n')
    (folder / "dup.yaml").write_text("dag_id: dup\ntasks:\n  a: {command: x}\n  a: {command: y}\n")
    (folder / "nest.yaml").write_text("dag_id: nest\ntasks: " + "[" * 5000 + "]" * 5000 + "\n")
    # t0 depends on t1 ... on t2999: walked from t0, the chain is 3,000 deep.
    chain = "".join(f"  t{i}: {{command: echo, depends_on: [t{i + 1}]}}\n" for i in range(2999))
    last = "  t2999: {command: echo}\n"
    (folder / "deep.yaml").write_text("dag_id: deep\ntasks:\n" + chain + last)
    proc = lite(folder)
    _wait(
        lambda: ("success",) in _query(home, "select state from dag_runs where dag_id='good'"),
        "a run of the good DAG",
    )
    assert proc.poll() is None, (tmp_path / "lite-0.out").read_text()[-3000:]
    errors = dict(_query(home, "select fileloc, error from dag_import_errors"))
    assert sorted(Path(p).name for p in errors) == [
        "dup.yaml",
        "laughs.yaml",
        "nest.yaml",
        "nul.yaml",
    ]
    assert "aliases expand this document beyond" in errors[str(folder / "laughs.yaml")]
    assert "tasks.a.command: control character U+0000 (NUL)" in errors[str(folder / "nul.yaml")]
    assert "also set at line 3" in errors[str(folder / "dup.yaml")]
    assert "nest" in errors[str(folder / "nest.yaml")]
    # A 3,000-task chain is a valid DAG, not a crash.
    assert _query(home, "select active from dags where dag_id='deep'") == [(1,)]


HOSTILE_TASK = """\
dag_id: noisy
tasks:
  shout:
    command: >-
      printf '\\033[31mred\\033[0m \\033]0;owned\\007 \\033[2J done\\n';
      i=0; while [ $i -lt 40000 ]; do echo "line $i"; i=$((i+1)); done
"""


def _run_noisy(leoflow: Leoflow, tmp_path: Path) -> str:
    dag = tmp_path / "noisy.yaml"
    dag.write_text(HOSTILE_TASK)
    done = leoflow("run", str(dag), "--executor", "subprocess", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"run (\S+) of noisy: success", done.stdout)
    assert found, done.stdout
    return found.group(1)


def test_logs_into_a_closed_pipe_exit_quietly(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    run_id = _run_noisy(leoflow, tmp_path)
    # What `| head` leaves once head has exited: a pipe nobody reads. Closing the read
    # end first makes the very first write fail, whatever the pipe's capacity.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [LEOFLOW, "logs", "noisy", run_id, "shout"],
            env=env,
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr
    assert done.returncode == 141


def test_logs_into_a_pipe_are_the_stored_bytes(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    run_id = _run_noisy(leoflow, tmp_path)
    piped = subprocess.run(
        f"'{LEOFLOW}' logs noisy '{run_id}' shout | head -n 2",
        shell=True,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert piped.stderr == "", piped.stderr
    assert piped.stdout.splitlines()[1] == "line 0"
    # A pipe gets the stored bytes unchanged, escape sequences included.
    assert "\x1b]0;owned\x07" in piped.stdout


def test_logs_on_a_terminal_keep_colours_and_escape_other_sequences(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    run_id = _run_noisy(leoflow, tmp_path)
    primary, secondary = os.openpty()
    try:
        proc = subprocess.Popen(
            [LEOFLOW, "logs", "noisy", run_id, "shout"],
            env=env,
            cwd=REPO,
            stdout=secondary,
            stderr=subprocess.PIPE,
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(60)
    finally:
        os.close(primary)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "\x1b[31mred\x1b[0m" in shown
    assert "\\x1b]0;owned\\x07" in shown and "\x1b]" not in shown
    assert "\\x1b[2J done" in shown and "\x1b[2J" not in shown
    assert "line 39999" in shown


def test_validate_says_when_catchup_will_be_held_back(leoflow: Leoflow, tmp_path: Path) -> None:
    dag = tmp_path / "backlog.yaml"
    dag.write_text(
        "dag_id: backlog\nschedule: '*/5 * * * *'\ncatchup: true\n"
        "start_date: 2020-01-01T00:00:00Z\ntasks: {a: {command: echo}}\n"
    )
    done = leoflow("dags", "validate", str(dag))
    assert done.returncode == 0, done.stderr
    assert "ok  backlog" in done.stdout
    assert "note: backlog catches up from 2020-01-01T00:00:00+00:00: more than 100 runs" in (
        done.stderr
    )
    dag.write_text(dag.read_text().replace("catchup: true", "catchup: false"))
    assert "note:" not in leoflow("dags", "validate", str(dag)).stderr
