"""The task side of ``dbt.batch: wave``: one dbt invocation for the ready members of a wave.

Every member of a wave is an ordinary task. The first to start (the *leader*) picks
the peers it can prove ready, runs ``dbt build --select <its node and theirs>`` once,
and files each node's result from ``run_results.json``. A peer started later finds
its result filed and reports it as its own (success, or failed with dbt's message)
without running dbt; a peer whose node has no result (dbt stopped early, or skipped
it) runs alone. A retry (try 2 or later) always runs alone.

A peer is proven ready when it has not started in this run, each of its dbt
upstreams has a ``success`` state filed in this run, and each of its other
upstreams is also an upstream of the leader (which the scheduler started, so they
succeeded). The states live in ``$LEOFLOW_DBT_RUNS/<run id>/``, shared by the
tasks of one host: waves batch in Lite; without ``LEOFLOW_DBT_RUNS`` (the
Kubernetes executor) every task runs alone.

Stdlib only, like ``leoflow.dbt.task``: it starts once per task.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

# Kept equal to leoflow.domain.dbt_waves (a unit test checks): no pydantic here.
ENV_PLAN = "LEOFLOW_DBT_WAVES"
ENV_WAVE = "LEOFLOW_DBT_WAVE"
ENV_RUNS = "LEOFLOW_DBT_RUNS"
SUCCESS = "success"
FAILED = "failed"
BATCHED = "batched"
_OK = frozenset({"success", "pass", "warn"})
_BAD = frozenset({"error", "fail", "runtime error"})
STALE_RUN_DIR_S = 7 * 24 * 3600


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


@contextlib.contextmanager
def flock(path: str) -> Iterator[None]:
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_json(path: str, data: Mapping[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class RunStates:
    """The states the dbt tasks of one run filed on this host."""

    folder: str

    def path(self, task_id: str) -> str:
        return os.path.join(self.folder, _safe(task_id) + ".state")

    def get(self, task_id: str) -> dict[str, Any] | None:
        return _read_json(self.path(task_id))

    def put(self, task_id: str, state: str, **extra: Any) -> None:
        _write_json(self.path(task_id), {"state": state, "at": time.time(), **extra})

    def filed_at(self, task_id: str) -> float | None:
        try:
            return os.stat(self.path(task_id)).st_mtime
        except OSError:
            return None


@dataclass
class Result:
    """One node's outcome in a batch: ``ok``, or failed with dbt's ``reason``."""

    ok: bool
    reason: str = ""


@dataclass
class Wave:
    task_id: str
    members: dict[str, dict[str, Any]]
    states: RunStates
    wave: str
    peers: list[str] = field(default_factory=list)
    # The leader holds it while dbt runs; peers wait on it for their results.
    held: IO[str] | None = None

    @property
    def me(self) -> dict[str, Any]:
        return self.members[self.task_id]

    def lock_path(self) -> str:
        return os.path.join(self.states.folder, f"wave-{_safe(self.wave)}.lock")

    def batch_path(self, leader: str, suffix: str) -> str:
        return os.path.join(self.states.folder, f"batch-{_safe(leader)}.{suffix}")

    def _ready(self, peer: str) -> bool:
        entry = self.members[peer]
        if self.states.get(peer) is not None:
            return False  # started already (alone, or in another batch)
        mine = set(self.me["dbt_deps"]) | set(self.me["other_deps"])
        for up in entry["dbt_deps"]:
            state = self.states.get(up)
            if up not in mine and (state is None or state.get("state") != SUCCESS):
                return False
        return set(entry["other_deps"]) <= mine


def load(task_id: str, env: Mapping[str, str]) -> Wave | None:
    """This task's wave, when it has one and may batch (first try, a run id, the files)."""
    plan_file, level, runs = env.get(ENV_PLAN), env.get(ENV_WAVE), env.get(ENV_RUNS)
    run_id = env.get("LEOFLOW_RUN_ID")
    if not (plan_file and level and runs and run_id) or env.get("LEOFLOW_TRY_NUMBER") != "1":
        return None
    plan = _read_json(plan_file)
    members = ((plan or {}).get("waves") or {}).get(level)
    if not isinstance(members, dict) or task_id not in members:
        return None
    folder = os.path.join(runs, _safe(run_id))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return Wave(task_id, members, RunStates(folder), level)


def run_states(env: Mapping[str, str]) -> RunStates | None:
    """Where this run's dbt tasks file their states, for any dbt task of a wave DAG."""
    runs, run_id = env.get(ENV_RUNS), env.get("LEOFLOW_RUN_ID")
    if not (runs and run_id):
        return None
    folder = os.path.join(runs, _safe(run_id))
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        return RunStates(folder)
    return None


def forget_old_runs(runs: str, now: float) -> None:
    """Run folders untouched for a week go: each holds a few small files."""
    with contextlib.suppress(OSError), os.scandir(runs) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_dir() and now - entry.stat().st_mtime > STALE_RUN_DIR_S:
                    shutil.rmtree(entry.path, ignore_errors=True)


def begin(wave: Wave) -> tuple[str, str | None]:
    """``("lead", None)`` (``wave.peers`` chosen), ``("attach", leader)`` or ``("alone", None)``."""
    with flock(wave.lock_path()):
        mine = wave.states.get(wave.task_id)
        if mine is not None:
            # Put in a batch by another (its result may be filed already): attach to it.
            leader = mine.get("leader")
            if leader and leader != wave.task_id and mine.get("state") != "running":
                return "attach", str(leader)
            return "alone", None
        wave.peers = [p for p in sorted(wave.members) if p != wave.task_id and wave._ready(p)]
        if not wave.peers:
            wave.states.put(wave.task_id, "running")
            return "alone", None
        wave.states.put(wave.task_id, "running", leader=wave.task_id)
        for peer in wave.peers:
            wave.states.put(peer, BATCHED, leader=wave.task_id)
        _write_json(wave.batch_path(wave.task_id, "json"), {"started": time.time(), "done": False})
        # Taken before the wave lock is let go: a peer that starts now waits for dbt.
        wave.held = open(wave.batch_path(wave.task_id, "lock"), "a+")  # noqa: SIM115
        fcntl.flock(wave.held, fcntl.LOCK_EX)
        return "lead", None


def batch_argv(wave: Wave, argv: list[str]) -> list[str]:
    """The leader's dbt command: ``build`` of every node of the batch, and no more.

    ``--indirect-selection empty``: the tests of these models are tasks of their own
    (or run at the end), so ``build`` must not add them.
    """
    select = argv.index("--select")
    end = select + 1
    while end < len(argv) and not argv[end].startswith("--"):
        end += 1
    nodes = [s for t in [wave.task_id, *wave.peers] for s in wave.members[t]["select"]]
    return [argv[0], "build", "--select", *nodes, "--indirect-selection", "empty", *argv[end:]]


def file_results(
    wave: Wave, results: Mapping[str, Any] | None, reason_of: Callable[[dict[str, Any]], str | None]
) -> dict[str, Result]:
    """Each batch member's result from ``run_results.json``, filed for the peers, who
    are let go (the batch lock) once it is written."""
    by_uid: dict[str, Mapping[str, Any]] = {}
    for entry in (results or {}).get("results") or ():
        by_uid[str(entry.get("unique_id"))] = entry
    filed: dict[str, dict[str, Any]] = {}
    out: dict[str, Result] = {}
    for task_id in [wave.task_id, *wave.peers]:
        entry = by_uid.get(wave.members[task_id]["uid"])
        status = str(entry.get("status")) if entry is not None else ""
        if status in _OK:
            out[task_id] = Result(True)
        elif status in _BAD and entry is not None:
            out[task_id] = Result(False, reason_of({"results": [entry]}) or status)
        else:
            continue  # not run (skipped, or dbt stopped first): the task runs alone
        filed[task_id] = {"ok": out[task_id].ok, "reason": out[task_id].reason}
        if task_id != wave.task_id:
            # Its node is built: a later wave may run on it before its task reports.
            wave.states.put(task_id, SUCCESS if out[task_id].ok else FAILED, leader=wave.task_id)
    path = wave.batch_path(wave.task_id, "json")
    started = (_read_json(path) or {}).get("started", 0.0)
    _write_json(path, {"started": started, "done": True, "results": filed})
    release(wave)
    return out


def release(wave: Wave) -> None:
    if wave.held is not None:
        wave.held.close()  # closing drops the lock
        wave.held = None


def attached_result(wave: Wave, leader: str) -> Result | None:
    """Wait for the leader's batch, then this task's result; None: run alone."""
    with flock(wave.batch_path(leader, "lock")):
        pass  # the leader holds it while dbt runs
    batch = _read_json(wave.batch_path(leader, "json")) or {}
    filed = (batch.get("results") or {}).get(wave.task_id)
    if not batch.get("done") or not isinstance(filed, dict):
        return None
    started = float(batch.get("started") or 0.0)
    for up in wave.me["dbt_deps"]:
        at = wave.states.filed_at(up)
        if at is not None and at > started:
            return None  # an upstream ran again after the batch: its data is newer
    return Result(bool(filed.get("ok")), str(filed.get("reason") or ""))
