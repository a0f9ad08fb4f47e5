"""Real `leoflow scheduler` processes (no Kubernetes) on one PostgreSQL, and their logs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from leoflow.store import Store
from leoflow.store.rows import LeaseRow

LEOFLOW = str(Path(sys.executable).parent / "leoflow")


class Scheduler:
    """One `leoflow scheduler` subprocess, its JSON log in a file."""

    def __init__(self, name: str, url: str, root: Path, timings: dict[str, float]) -> None:
        self.name = name
        self.log_path = root / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        env.update(
            PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
            LEOFLOW_HOME=str(root / f"home-{name}"),
            LEOFLOW_DATABASE_URL=url,
            LEOFLOW_IDENTITY=name,
            LEOFLOW_EXECUTOR="agent",
            LEOFLOW_LOG_FORMAT="json",
            LEOFLOW_SCHEDULER_POLL_INTERVAL="0.2",
            LEOFLOW_AGENT_LISTEN="127.0.0.1:0",
            **{f"LEOFLOW_LEADER_ELECTION__{k.upper()}": str(v) for k, v in timings.items()},
        )
        self.process = subprocess.Popen(
            [LEOFLOW, "scheduler"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log_path, "wb"),  # noqa: SIM115 - closed with the process
        )

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, timeout: float = 60) -> int:
        for _ in range(int(timeout * 20)):
            code = self.process.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name} did not exit within {timeout}s:\n{self.tail()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def first_time(self, message_start: str) -> datetime | None:
        """When the process first logged a message beginning ``message_start``."""
        for record in self.records():
            if str(record.get("message", "")).startswith(message_start):
                return datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))
        return None

    async def wait_for(self, message_start: str, timeout: float = 30) -> datetime | None:
        """The first time of a message that may not be logged yet: a lease row changes
        before its holder logs what it did with it, so a test polls for the line."""
        for _ in range(int(timeout * 20)):
            found = self.first_time(message_start)
            if found is not None:
                return found
            await asyncio.sleep(0.05)
        return None

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


async def wait_holder(
    store: Store, holder: str, timeout: float = 90, *, log: Scheduler | None = None
) -> LeaseRow:
    row = await store.get_lease()
    for _ in range(int(timeout * 20)):
        row = await store.get_lease()
        if row.holder == holder:
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"{holder!r} never held the lease; last seen {row}" + (f"\n{log.tail()}" if log else "")
    )
