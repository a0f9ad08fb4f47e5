"""``leoflow dags next``: the next fire times of a DAG, in its time zone and UTC."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Leoflow

NIGHTLY = """\
dag_id: nightly
schedule: "30 2 * * *"
timezone: Europe/Berlin
tasks:
  a: {command: "true"}
"""


def test_next_fires_by_path_local_and_utc_across_spring_forward(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    path = tmp_path / "nightly.yaml"
    path.write_text(NIGHTLY)
    done = leoflow("dags", "next", str(path), "-n", "3", "--after", "2025-03-28T12:00:00Z")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "nightly: '30 2 * * *' in Europe/Berlin"
    assert lines[1:] == [
        "2025-03-29 02:30 Sat CET   (+0100)   2025-03-29 01:30 UTC",
        "2025-03-30 03:00 Sun CEST  (+0200)   2025-03-30 01:00 UTC",  # 02:30 skipped: at the jump
        "2025-03-31 02:30 Mon CEST  (+0200)   2025-03-31 00:30 UTC",
    ]


def test_next_fires_by_dag_id_in_a_folder(leoflow: Leoflow, tmp_path: Path) -> None:
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    done = leoflow("dags", "next", "nightly", "--dags", str(tmp_path), "--after", "2026-01-01")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + 5  # -n defaults to 5
    assert "2026-01-01 02:30 Thu CET   (+0100)   2026-01-01 01:30 UTC" in done.stdout


def test_unknown_dag_and_trigger_only_dag_are_errors(leoflow: Leoflow, tmp_path: Path) -> None:
    (tmp_path / "manual.yaml").write_text("dag_id: manual\ntasks:\n  a: {command: 'true'}\n")
    missing = leoflow("dags", "next", "nope", "--dags", str(tmp_path))
    assert missing.returncode == 1
    assert "no DAG 'nope'" in missing.stderr and "manual" in missing.stderr
    manual = leoflow("dags", "next", "manual", "--dags", str(tmp_path))
    assert manual.returncode == 1
    assert "has no schedule" in manual.stderr
    bad_n = leoflow("dags", "next", "manual", "--dags", str(tmp_path), "-n", "0")
    assert bad_n.returncode == 2


def test_a_schedule_at_the_edge_of_time_says_so_without_a_traceback(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    near = tmp_path / "near.yaml"
    near.write_text(
        "dag_id: near\nschedule: '0 0 29 2 *'\ntimezone: Pacific/Kiritimati\n"
        "start_date: 9998-12-31T00:00:00-12:00\ncatchup: true\ntasks: {a: {command: 'true'}}\n"
    )
    done = leoflow("dags", "next", str(near))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "no further fire times in the next years: 0 of 5" in done.stdout
    assert "Leoflow schedules nothing at or after 9999-01-01 UTC" in done.stdout
    done = leoflow("dags", "next", str(near), "--after", "9999-12-31T23:59:59-23:59")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    year1 = tmp_path / "year1.yaml"
    year1.write_text(
        "dag_id: year1\nschedule: '* * * * *'\nstart_date: 0001-01-01T00:00:00\ncatchup: true\n"
        "tasks: {a: {command: 'true'}}\n"
    )
    for command in ("next", "validate"):
        done = leoflow("dags", command, str(year1))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{year1}:3: start_date: 0001-01-01T00:00:00 is outside the dates" in (
            done.stdout + done.stderr
        )
