"""Lite with DAGs at the edges of time and numbers beside a good one: the good one
runs, Lite stays up, and a restart on the same home (with a poisoned spec stored as
an older version or the API could have left it) works."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.e2e.test_lite import StartLite, _cron_dag, _query, _wait, lite  # noqa: F401 - fixture

# Each of these stopped Lite (and stopped it again on every restart) before.
POISON = {
    "y9999.yaml": "dag_id: y9999\nschedule: '0 0 * * *'\nstart_date: 9999-12-31T00:00:00\n",
    "year1.yaml": (
        "dag_id: year1\nschedule: '* * * * *'\nstart_date: 0001-01-01T00:00:00\ncatchup: true\n"
    ),
    "leap.yaml": (
        "dag_id: leap\nschedule: '0 0 29 2 *'\nstart_date: 0001-01-01T00:00:00\ncatchup: true\n"
    ),
    "kiritimati.yaml": (
        "dag_id: kiritimati\nschedule: '0 0 * * *'\ntimezone: Pacific/Kiritimati\n"
        "start_date: 9999-12-31T20:00:00-10:00\n"
    ),
    "bigint.yaml": (
        "dag_id: bigint\nschedule: '* * * * *'\n"
        "tasks:\n  a: {command: 'true', priority: 123456789012345678901234567890}\n"
    ),
    "slots.yaml": (
        "dag_id: slots\nschedule: '* * * * *'\n"
        "tasks:\n  a: {command: 'true', pool_slots: 99999999999}\n"
    ),
    "wait.yaml": (
        "dag_id: wait\nschedule: '* * * * *'\n"
        "tasks:\n  a: {command: 'true', retry_delay: 99999999999d}\n"
    ),
}


def _stop(proc: object) -> None:
    import subprocess

    assert isinstance(proc, subprocess.Popen)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)


def _good_ran(home: Path, times: int) -> None:
    """Until the good DAG has more than ``times`` successful runs."""
    sql = "select count(*) from dag_runs where dag_id='good' and state='success'"
    _wait(lambda: _query(home, sql)[0][0] > times, f"run {times + 1} of the good DAG", 120)


def _folder(tmp_path: Path) -> Path:
    """The poisoned files and a good minutely DAG, side by side."""
    folder = tmp_path / "dags"
    folder.mkdir()
    files = {**POISON, "good.yaml": _cron_dag("good", "  a: {command: 'echo fine'}\n")}
    for name, text in files.items():
        body = text if "tasks:" in text else text + "tasks:\n  a: {command: 'true'}\n"
        (folder / name).write_text(body)
    return folder


def test_poisoned_dags_leave_lite_and_the_good_dag_running_across_a_restart(
    lite: StartLite,  # noqa: F811 - the fixture imported above
    home: Path,
    tmp_path: Path,
) -> None:
    proc = lite(folder := _folder(tmp_path))
    _good_ran(home, 0)
    out = tmp_path / "lite-0.out"
    assert proc.poll() is None, out.read_text()[-3000:]
    errors = dict(_query(home, "select fileloc, error from dag_import_errors"))
    assert sorted(Path(p).name for p in errors) == sorted(POISON)
    assert (
        "start_date: 9999-12-31T00:00:00 is outside the dates" in errors[str(folder / "y9999.yaml")]
    )
    assert (
        "tasks.a.priority: input should be less than or equal to 2147483647"
        in errors[str(folder / "bigint.yaml")]
    )
    assert "tasks.a.retry_delay:" in errors[str(folder / "wait.yaml")]
    _stop(proc)

    # A spec stored by an older version (or through the API before these checks):
    # it does not load any more, and must not stop the next start either.
    (spec_json,) = _query(home, "select spec_json from dags where dag_id='good'")[0]
    poisoned = json.loads(spec_json)
    poisoned.update(dag_id="stored", start_date="0001-01-01T00:00:00", catchup=True)
    poisoned["tasks"]["a"]["priority"] = 10**30
    _query(
        home,
        "insert into dags (dag_id, fileloc, spec_json, spec_hash, source, paused, active,"
        " updated_at) values ('stored', 'api:stored', ?, 'x', null, 0, 1, ?)",
        json.dumps(poisoned),
        time.time(),
    )
    (before,) = _query(home, "select count(*) from dag_runs where dag_id='good'")[0]
    proc = lite(folder)
    _good_ran(home, before)  # a minutely catchup: the restart owes it a run within a minute
    assert proc.poll() is None, (tmp_path / "lite-1.out").read_text()[-3000:]
    assert _query(home, "select count(*) from dag_runs where dag_id='stored'") == [(0,)]
    assert "stored spec of DAG stored does not load" in (tmp_path / "lite-1.out").read_text()
