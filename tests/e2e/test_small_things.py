"""What a newcomer reads in their first hour: a missing program named the same way in
both command forms and under both local executors, and `leoflow agent --help`."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Leoflow
from tests.e2e.test_cli_run import _row

MISSING = """\
dag_id: missing
tasks:
  argv: {command: [nosuch_prog_x, --flag]}
  shell: {command: 'nosuch_prog_x --flag'}
  assigned: {command: 'LANG=C nosuch_prog_x'}
  later: {command: 'true; nosuch_prog_y'}
"""


def test_a_missing_program_reads_the_same_in_argv_and_shell_form(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    dag = tmp_path / "missing.yaml"
    dag.write_text(MISSING)
    for executor in ("agent", "subprocess"):
        done = leoflow("run", str(dag), "--executor", executor)
        assert done.returncode == 1, done.stderr
        table = done.stdout.split("\n\n")[-2]
        for task in ("argv", "shell", "assigned"):
            assert _row(table, task)[-1] == "command not found: 'nosuch_prog_x'", (executor, table)
        # The first program exists: which one was missing, only the shell's stderr knows.
        assert _row(table, "later")[-1] == (
            "exited with code 127: a command the shell script runs was not found"
        ), table


def test_agent_help_is_help_text(leoflow: Leoflow) -> None:
    done = leoflow("agent", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: leoflow agent [--pool | --warm]")
    assert "\noptions:\n  --pool " in done.stdout
    assert "``" not in done.stdout  # not the module's reStructuredText docstring
