"""SIGTERM to a busy Lite: from the signal to the process's exit.

Three running tasks: two plain `sleep`-style loops, and one that ignores SIGTERM (so
it is the SIGKILL after the 1.5 s grace that ends it). For `leoflow lite` and for
`leoflow run` it reports the median seconds from SIGTERM to exit. Before the fix
this was 16 s for `leoflow lite` (the agents' Complete calls waited on a stopped
scheduler loop until the executor's 15 s grace ran out).

    python benchmarks/bench_stop.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

LEOFLOW = str(Path(sys.executable).parent / "leoflow")


def _dag(folder: Path, stubborn: bool, cron: bool) -> Path:
    start = (datetime.now(UTC) - timedelta(seconds=70)).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = "dag_id: stop\n"
    if cron:
        head += f"schedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\nmax_active_runs: 1\n"
    loop = "while true; do sleep 0.1; done"
    tasks = f"  a: {{command: '{loop}'}}\n  b: {{command: '{loop}'}}\n"
    trap = 'trap "" TERM; ' if stubborn else ""
    tasks += f"  c: {{command: '{trap}{loop}'}}\n"
    path = folder / "stop.yaml"
    path.write_text(head + "tasks:\n" + tasks)
    return path


def once(command: str, stubborn: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        dags = root / "dags"
        dags.mkdir()
        dag = _dag(dags, stubborn, cron=command == "lite")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
        env.update(LEOFLOW_HOME=str(home), LEOFLOW_SCHEDULER_POLL_INTERVAL="0.2")
        argv = (
            [LEOFLOW, "lite", "--dags", str(dags), "--no-api"]
            if command == "lite"
            else [LEOFLOW, "run", str(dag)]
        )
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
                        running = db.execute(
                            "SELECT count(*) FROM task_instances WHERE state = 'running'"
                        ).fetchone()[0]
                except sqlite3.OperationalError:
                    running = 0
                if running == 3:
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("the three tasks never ran")
            time.sleep(0.3)  # let the commands install their traps
            started = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            return time.perf_counter() - started
        finally:
            if proc.poll() is None:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for command in ("lite", "run"):
        for stubborn in (False, True):
            times = [once(command, stubborn) for _ in range(args.repeat)]
            key = f"{command}{'_sigterm_ignored' if stubborn else ''}_seconds"
            results[key] = round(statistics.median(times), 3)
    print(json.dumps({"sigterm_to_exit_median": results, "repeat": args.repeat}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
