"""Collection is paused only while a process imports, and is always resumed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _python(source: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_settled_freezes_what_the_imports_made_and_resumes_collection() -> None:
    done = _python(
        """
        import gc
        from leoflow.agent import startup_gc
        startup_gc.pause()
        assert not gc.isenabled()
        import json, decimal  # the imports
        startup_gc.settled()
        print(gc.isenabled(), gc.get_freeze_count() > 0)
        startup_gc.settled()  # a second call changes nothing
        print(gc.isenabled())
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_settled_without_pause_leaves_collection_as_it_was() -> None:
    done = _python(
        """
        import gc
        from leoflow.agent import startup_gc
        gc.disable()
        startup_gc.settled()
        print(gc.isenabled(), gc.get_freeze_count())
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "0"]


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_the_leoflow_entry_point_runs_a_command_with_collection_on(tmp_path: Path) -> None:
    dag = tmp_path / "one.yaml"
    dag.write_text('dag_id: one\ntasks:\n  only:\n    command: ["true"]\n')
    done = _python(
        """
        import gc, sys
        from leoflow.commands import dags
        validate = dags.cmd_validate
        def spy(args):
            print("gc on:", gc.isenabled())
            return validate(args)
        dags.cmd_validate = spy
        from leoflow.commands.main import main
        sys.argv = ["leoflow", "dags", "validate", sys.argv[1]]
        raise SystemExit(main())
        """,
        str(dag),
    )
    assert done.returncode == 0, done.stderr
    assert "gc on: True" in done.stdout
