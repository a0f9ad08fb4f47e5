"""``leoflow dbt-task --task ID -- dbt <verb> --select ... [args]``: one dbt node as a task.

What a dbt task's command runs. It runs dbt itself (the executable named, found on
the task's PATH; dbt is never imported) and adds what dbt alone does not give:

- a target and log directory of this task's own under ``DBT_TARGET_PATH`` and
  ``DBT_LOG_PATH`` (which the DAG points at ``/tmp``). The directory is kept
  between runs of the task, so dbt's partial parse from the last run is reused; a
  second run of the same task at the same time gets a fresh one instead of racing
  the first for ``run_results.json``;
- an exit reason that names the node and dbt's own error line, read from
  ``run_results.json`` (or from dbt's output when dbt failed before running
  anything), written to ``LEOFLOW_EXIT_REASON_FILE`` for the agent to report.

Stdlib only: it starts once per task, in the agent's interpreter.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from typing import IO, Any

from leoflow.dbt import wave

USAGE = "usage: leoflow dbt-task --task TASK_ID -- DBT_EXECUTABLE VERB [ARGS...]"
EXIT_USAGE = 2
EXIT_NOT_FOUND = 127
_FAILED = frozenset({"error", "fail", "runtime error"})
REASON_LIMIT = 1000


def _strip_stamp(line: str) -> str:
    # dbt's console lines start "HH:MM:SS  "; the message is what follows.
    if len(line) > 10 and line[2] == ":" and line[5] == ":" and line[8:10] == "  ":
        return line[10:]
    return line


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


def reason_from_results(results: dict[str, Any]) -> str | None:
    """``<node> failed: <dbt's message>`` for each failed node, or None if none failed."""
    failed = []
    for result in results.get("results") or ():
        if str(result.get("status")) in _FAILED:
            uid = str(result.get("unique_id") or "?")
            message = str(result.get("message") or "").strip()
            # A compile or database error's message spans lines; its first names it.
            lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
            detail = " ".join(lines[:3]) if lines else str(result.get("status"))
            parts = uid.split(".")
            name = parts[2] if len(parts) >= 3 else parts[-1]
            failed.append(f"dbt {parts[0]} {name} failed: {detail}")
    return "; ".join(failed) if failed else None


def reason_from_output(lines: Sequence[str]) -> str | None:
    """dbt's own error when it stopped before running anything (profile, parse, connection)."""
    stripped = [_strip_stamp(line.rstrip()) for line in lines]
    stripped = [line.strip() for line in stripped if line.strip()]
    for index, line in enumerate(stripped):
        if line.startswith("Encountered an error"):
            return " ".join(stripped[index + 1 : index + 4]) or line
    errors = [line for line in stripped if "Error" in line or "error" in line]
    return errors[-1] if errors else None


def _dirs(task_id: str) -> tuple[str, str, IO[str] | None]:
    """This run's target and log directories, and the lock that makes them ours."""
    target_base = os.environ.get("DBT_TARGET_PATH") or os.path.join(
        tempfile.gettempdir(), "leoflow-dbt", task_id, "target"
    )
    log_base = os.environ.get("DBT_LOG_PATH") or os.path.join(os.path.dirname(target_base), "logs")
    os.makedirs(target_base, exist_ok=True)
    lock = open(os.path.join(target_base, ".leoflow-lock"), "a+")  # noqa: SIM115 - held for the run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        fresh = tempfile.mkdtemp(prefix="concurrent-", dir=target_base)
        return fresh, os.path.join(fresh, "logs"), None
    return target_base, log_base, lock


def _seed_partial_parse(target: str) -> None:
    """A first run starts from the load-time parse (dbt checks it and reparses what changed)."""
    mine = os.path.join(target, "partial_parse.msgpack")
    seed = os.environ.get("LEOFLOW_DBT_PARTIAL_PARSE")
    if seed and not os.path.exists(mine) and os.path.isfile(seed):
        with contextlib.suppress(OSError):
            shutil.copyfile(seed, mine)


def _invoke(task_id: str, args: list[str]) -> tuple[int, dict[str, Any] | None, list[str]]:
    """Run dbt in this task's own target dir: its exit code, run_results.json, output tail."""
    target, logs, lock = _dirs(task_id)
    os.makedirs(logs, exist_ok=True)
    _seed_partial_parse(target)
    results_path = os.path.join(target, "run_results.json")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(results_path)  # a stale one from the last run must not explain this one
    env = dict(os.environ)
    env["DBT_TARGET_PATH"] = target
    env["DBT_LOG_PATH"] = logs
    tail: deque[str] = deque(maxlen=40)
    try:
        child = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
    except FileNotFoundError:
        if lock is not None:
            lock.close()
        return EXIT_NOT_FOUND, None, []
    assert child.stdout is not None
    for line in child.stdout:
        sys.stdout.write(line)
        tail.append(line)
    sys.stdout.flush()
    code = child.wait()
    if lock is not None:
        lock.close()
    results: dict[str, Any] | None = None
    with contextlib.suppress(OSError, ValueError), open(results_path, encoding="utf-8") as handle:
        results = json.load(handle)
    return code, results, list(tail)


def run(argv: Sequence[str]) -> int:
    args = list(argv)
    task_id = ""
    if args[:1] == ["--task"] and len(args) >= 2:
        task_id = args[1]
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not task_id or len(args) < 2:
        print(USAGE, file=sys.stderr)
        return EXIT_USAGE
    states = wave.run_states(os.environ)
    batch = wave.load(task_id, os.environ)
    mode, leader = wave.begin(batch) if batch is not None else ("alone", None)
    if batch is not None and mode == "attach" and leader is not None:
        result = wave.attached_result(batch, leader)
        if result is not None:
            return _report_attached(task_id, leader, result, batch.states)
        print(f"leoflow dbt-task: no result for {task_id} in the batch of {leader}; running alone")
        batch.states.put(task_id, "running")
    elif states is not None and mode == "alone" and batch is None:
        states.put(task_id, "running")
    if batch is not None and mode == "lead":
        args = wave.batch_argv(batch, args)
        peers = ", ".join(batch.peers)
        print(f"leoflow dbt-task: {task_id} leads its wave in one dbt invocation with {peers}")
        wave.forget_old_runs(os.path.dirname(batch.states.folder), time.time())
    try:
        code, results, tail = _invoke(task_id, args)
        reason: str | None = None
        if batch is not None and mode == "lead":
            mine = wave.file_results(batch, results, reason_from_results).get(task_id)
            if mine is not None:  # our node's own result, whatever the peers' were
                code, reason = (0, None) if mine.ok else (code or 1, mine.reason)
    finally:
        if batch is not None:
            wave.release(batch)
    if states is not None:
        states.put(task_id, wave.SUCCESS if code == 0 else wave.FAILED)
    if code == 0:
        return 0
    if code == EXIT_NOT_FOUND and not tail:
        _say_reason(f"dbt executable {args[0]!r} not found on the task's PATH ({task_id})")
        return code
    if reason is None and results is not None:
        reason = reason_from_results(results)
    if reason is None:
        reason = reason_from_output(tail)
    _say_reason(reason or f"dbt exited with code {code} ({task_id})")
    return code


def _report_attached(task_id: str, leader: str, result: wave.Result, states: wave.RunStates) -> int:
    """A peer's end: the result the leader's dbt invocation filed for its node."""
    print(
        f"leoflow dbt-task: {task_id} ran in the wave batch of {leader} (its log has dbt's output)"
    )
    outcome = wave.SUCCESS if result.ok else wave.FAILED
    if (states.get(task_id) or {}).get("state") != outcome:
        states.put(task_id, outcome)  # else kept: its time is what later batches compare
    if result.ok:
        return 0
    _say_reason(result.reason or f"dbt failed {task_id} in the batch of {leader}")
    return 1


def _say_reason(reason: str) -> None:
    reason = reason if len(reason) <= REASON_LIMIT else reason[: REASON_LIMIT - 3] + "..."
    print(f"leoflow dbt-task: {reason}", file=sys.stderr, flush=True)
    path = os.environ.get("LEOFLOW_EXIT_REASON_FILE")
    if path:
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as handle:
            handle.write(reason)


def main() -> None:
    raise SystemExit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
