"""Assets in Lite, end to end: ``leoflow assets emit`` triggers a DAG scheduled on the
asset, and a Lite killed with SIGKILL right after the event was recorded (before or
after it made the run: either) makes exactly one run of it once restarted."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests.e2e.conftest import Leoflow
from tests.support.lite_proc import start_lite, stop, wait
from tests.support.net import free_port

MARTS = """
dag_id: marts
schedule: {assets: [orders]}
tasks:
  build:
    command: 'echo "events: $LEOFLOW_TRIGGERING_ASSET_EVENTS"'
"""
# Proof that polls went on after marts' run: a second DAG on another asset.
PROBE = """
dag_id: probe
schedule: {assets: [probe_asset]}
tasks:
  build: {command: "true"}
"""


def _runs(home: Path, dag_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        rows = db.execute(
            "SELECT run_type, state FROM dag_runs WHERE dag_id = ? ORDER BY pk", (dag_id,)
        )
        return [(str(a), str(b)) for a, b in rows]


def _lite(env: dict[str, str], folder: Path, out: Path) -> subprocess.Popen[str]:
    """Lite on the port the CLI calls (``LEOFLOW_SERVER`` in ``env``), the same each time."""
    port = env["LEOFLOW_SERVER"].rsplit(":", 1)[1]
    return start_lite(env, folder, out, LEOFLOW_API_LISTEN=f"127.0.0.1:{port}")


def _ready(out: Path) -> None:
    wait(lambda: "Ctrl-C stops" in out.read_text(), f"Lite to say it is up ({out.name})")


def test_an_emitted_event_survives_a_kill_9_and_triggers_exactly_one_run(
    env: dict[str, str], home: Path, tmp_path: Path, leoflow: Leoflow
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "marts.yaml").write_text(MARTS)
    (folder / "probe.yaml").write_text(PROBE)
    env["LEOFLOW_SERVER"] = f"http://127.0.0.1:{free_port()}"  # the leoflow fixture's env too
    proc = _lite(env, folder, tmp_path / "lite1.out")
    try:
        _ready(tmp_path / "lite1.out")
        done = leoflow("assets", "emit", "orders")
        assert done.returncode == 0, done.stderr
        proc.kill()  # SIGKILL: no shutdown, whatever the poll was doing
        proc.wait(30)
        assert len(_runs(home, "marts")) <= 1
        proc = _lite(env, folder, tmp_path / "lite2.out")
        _ready(tmp_path / "lite2.out")
        wait(lambda: _runs(home, "marts") == [("asset", "success")], "marts' one run to succeed")
        done = leoflow("assets", "emit", "probe_asset")
        assert done.returncode == 0, done.stderr
        wait(lambda: _runs(home, "probe") == [("asset", "success")], "the probe's run")
        assert _runs(home, "marts") == [("asset", "success")]
        listed = leoflow("assets", "list")
        assert listed.returncode == 0, listed.stderr
        assert "orders" in listed.stdout and "marts" in listed.stdout
    finally:
        stop(proc)
