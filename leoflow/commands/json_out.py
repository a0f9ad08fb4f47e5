"""The ``--json`` documents of the commands that read files or the store here (``run``,
``dags validate``, ``dags next``, ``logs``): one JSON object on stdout, its shape
documented in the README ("JSON output"); the API's commands print the API's JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leoflow.dagfile.loader import FolderLoad
    from leoflow.store.rows import RunRow, TaskInstanceRow


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")


def run_document(
    row: RunRow, tis: Sequence[TaskInstanceRow], order: Sequence[str]
) -> dict[str, Any]:
    """``leoflow run --json``: the run and each task instance, in the DAG's order."""
    position = {task_id: i for i, task_id in enumerate(order)}
    ordered = sorted(tis, key=lambda t: (position.get(t.task_id, len(position)), t.task_id))
    return {
        "dag_id": row.dag_id,
        "run_id": row.run_id,
        "state": row.state.value,
        "message": row.message,
        "tasks": [
            {
                "task_id": ti.task_id,
                "state": ti.state.value,
                "try_number": ti.try_number,
                "max_tries": ti.max_tries,
                "started_at": _iso(ti.started_at),
                "ended_at": _iso(ti.ended_at),
                "duration_seconds": (
                    ti.ended_at - ti.started_at
                    if ti.started_at is not None and ti.ended_at is not None
                    else None
                ),
                "exit_code": ti.exit_code,
                "reason": ti.reason,
                "message": ti.message,
            }
            for ti in ordered
        ],
    }


def validate_document(result: FolderLoad) -> dict[str, Any]:
    """``leoflow dags validate --json``: the DAGs that load and every problem found."""
    return {
        "valid": not result.errors and bool(result.dags),
        "dags": [
            {"dag_id": dag_id, "file": str(loaded.path), "tasks": len(loaded.spec.tasks)}
            for dag_id, loaded in sorted(result.dags.items())
        ],
        "problems": [
            {"file": str(error.path), "line": p.line, "field": p.field, "message": p.message}
            for error in result.errors
            for p in error.problems
        ],
    }


def log_document(
    dag_id: str, run_id: str, task_id: str, try_number: int, data: bytes
) -> dict[str, Any]:
    """``leoflow logs --json``: one try's whole log (UTF-8; invalid bytes replaced)."""
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "try_number": try_number,
        "log": data.decode("utf-8", errors="replace"),
    }
