"""A task instance's tries, each with its own facts: ``GET .../tasks/{task}/tries``.

The latest try is the task instance row; earlier ones are kept in ``task_tries`` when
the next try begins or a clear resets the row. A row from before migration 0008 that
was retried has no earlier try kept: its list is its latest try alone.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from leoflow.api.auth import Viewer
from leoflow.api.context import Ctx
from leoflow.api.lookup import task_or_404
from leoflow.api.schemas import ErrorOut, Stamp
from leoflow.domain.task_instance import TaskInstance
from leoflow.store import Store
from leoflow.store.tries import TryRow

router = APIRouter(prefix="/api/v1/dags/{dag_id}/runs/{run_id}/tasks", tags=["task instances"])

_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}


def where_ran(executor_ref: str | None) -> dict[str, Any]:
    """``{"pod", "pod_kind", "pod_task", "host", "pid"}`` from a try's executor reference:
    ``pod_kind`` "warm" (``pod_task``: the pod's nth task) or "ephemeral" (a pod of its own)."""
    ref = executor_ref or ""
    where: dict[str, Any] = dict.fromkeys(("pod", "pod_kind", "pod_task", "host", "pid"))
    if ref.startswith("pod:"):
        head, warm, nth = ref.partition(";warm=")
        where["pod"] = head[4:].split("@", 1)[0]
        where["pod_kind"] = "warm" if warm else "ephemeral"
        where["pod_task"] = int(nth) if nth.isdigit() else None
    elif ref.startswith("proc:"):
        host, _, pid = ref[5:].rpartition(":")
        where["host"], where["pid"] = host or None, pid or None
    return where


async def tries_of(store: Store, ti: TaskInstance) -> list[TryRow]:
    """Every try of ``ti`` whose facts are known, oldest first, its latest last."""
    if ti.try_number < 1:
        return []
    kept = [t for t in await store.list_tries(ti.pk) if t.try_number < ti.try_number]
    latest = TryRow(
        ti.pk,
        ti.try_number,
        ti.state.value,
        ti.queued_at,
        ti.started_at,
        ti.ended_at,
        ti.exit_code,
        ti.reason,
        ti.message,
        ti.executor_ref,
    )
    return [*kept, latest]


class TryOut(BaseModel):
    """One try of a task instance."""

    model_config = ConfigDict(frozen=True)

    try_number: int
    latest: bool = Field(description="the task instance's current try")
    state: str = Field(
        description="for the latest try the task instance's state; for an earlier one, "
        "the state it ended in (up_for_retry, failed, success ...)"
    )
    queued_at: Stamp
    started_at: Stamp
    ended_at: Stamp
    exit_code: int | None
    reason: str | None
    message: str | None
    pod: str | None = Field(description="the pod it ran in (Kubernetes)")
    pod_kind: str | None = Field(
        None, description="warm (a pod shared by its DAG's tasks, one at a time) or ephemeral"
    )
    pod_task: int | None = Field(None, description="in a warm pod: the pod's nth task")
    host: str | None = Field(description="the host its agent ran on (Lite)")
    pid: str | None = Field(description="its agent's process id (Lite)")


class TryList(BaseModel):
    tries: list[TryOut]


def try_out(t: TryRow, latest: bool) -> TryOut:
    return TryOut(
        try_number=t.try_number,
        latest=latest,
        state=t.state,
        queued_at=t.queued_at,
        started_at=t.started_at,
        ended_at=t.ended_at,
        exit_code=t.exit_code,
        reason=t.reason,
        message=t.message,
        **where_ran(t.executor_ref),
    )


@router.get("/{task_id}/tries", response_model=TryList, responses=_ERRORS)
async def list_tries(dag_id: str, run_id: str, task_id: str, ctx: Ctx, who: Viewer) -> TryList:
    """Each try's start, end, exit code, reason and where it ran, oldest first."""
    _, ti, _ = await task_or_404(ctx.store, dag_id, run_id, task_id)
    tries = await tries_of(ctx.store, ti)
    return TryList(tries=[try_out(t, t.try_number == ti.try_number) for t in tries])
