"""The reference pages under docs/reference/ are what scripts/gen_reference.py writes from
today's code: a new option, setting, DAG field, API route or chart value that the docs
do not show fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
REFERENCE = REPO / "docs" / "reference"


def test_the_committed_reference_is_what_the_code_generates(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_reference.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    fresh = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in REFERENCE.iterdir()}
    assert set(fresh) == set(committed), "run `make reference` and commit docs/reference/"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"stale reference pages {stale}: run `make reference` and commit"


def test_every_command_setting_and_route_is_in_the_reference() -> None:
    """Spot checks that the pages are built from the code, not written by hand."""
    from leoflow.commands.main import build_parser
    from leoflow.settings import Settings

    cli = (REFERENCE / "cli.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:  # type: ignore[union-attr]
        assert f"## `leoflow {name}`" in cli, name
    settings = (REFERENCE / "settings.md").read_text()
    for name in Settings.model_fields:
        assert f"`LEOFLOW_{name.upper()}`" in settings, name
    api = (REFERENCE / "http-api.md").read_text()
    assert "## `POST /api/v1/dags/{dag_id}/backfills`" in api
    values = (REFERENCE / "helm-values.md").read_text()
    assert "| `scheduler.leaderElection.leaseDuration` |" in values
