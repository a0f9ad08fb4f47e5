"""An action on what the page showed: a run cleared, finished or retried since the
page was drawn is said to the user instead of acted on (the page's buttons send
the run's state, and the task's state and try, as they showed them)."""

from __future__ import annotations

from typing import Protocol

from fastapi import HTTPException

from leoflow.api.context import ApiContext
from leoflow.api.lookup import run_or_404, task_or_404


class Seen(Protocol):
    dag_id: str | None
    run_id: str | None
    task_id: str | None
    seen_run: str | None
    seen_task: str | None


async def unchanged(ctx: ApiContext, b: Seen) -> None:
    """Refuse (409) when the run or task is not what the page showed."""
    if not b.dag_id or not b.run_id or (b.seen_run is None and b.seen_task is None):
        return
    if b.seen_task is not None and b.task_id:
        run, ti, _ = await task_or_404(ctx.store, b.dag_id, b.run_id, b.task_id)
        now = f"{ti.state.value}:{ti.try_number}"
        if now != b.seen_task:
            shown, _, tried = b.seen_task.partition(":")
            was = f"{shown} (try {tried})" if tried else shown
            raise HTTPException(
                409,
                f"task {b.task_id!r} changed since the page was drawn: it was {was}, "
                f"it is {ti.state.value} (try {ti.try_number}) now. Nothing was done; "
                "look again and retry",
            )
    else:
        run = await run_or_404(ctx.store, b.dag_id, b.run_id)
    if b.seen_run is not None and run.state.value != b.seen_run:
        raise HTTPException(
            409,
            f"run {b.run_id!r} changed since the page was drawn: it was {b.seen_run}, "
            f"it is {run.state.value} now{_why(run.message)}. Nothing was done; look again "
            "and retry",
        )


def _why(message: str | None) -> str:
    return f" ({message})" if message else ""
