"""What a run's page shows: its facts, its task instances counted by state over the
whole run (not the page shown), and one page of them filtered by state, by a search
over task ids, or to the items of one mapped task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import HTTPException

from leoflow.api.context import ApiContext
from leoflow.api.lookup import run_or_404, spec_of
from leoflow.api.ui.present import deadline_of, run_url
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.store.run_tasks import TaskFilter

TASKS_PAGE = 100
SEARCH_CHARS = 200

# The state filter offers each state and these groups of them.
STATE_GROUPS: dict[str, frozenset[TaskState]] = {
    "unfinished": frozenset(
        {
            TaskState.NONE,
            TaskState.SCHEDULED,
            TaskState.QUEUED,
            TaskState.RUNNING,
            TaskState.UP_FOR_RETRY,
        }
    ),
    "waiting": frozenset({TaskState.NONE, TaskState.SCHEDULED, TaskState.QUEUED}),
    "problems": frozenset({TaskState.FAILED, TaskState.UPSTREAM_FAILED, TaskState.UP_FOR_RETRY}),
}
STATE_CHOICES: tuple[str, ...] = ("", *STATE_GROUPS, *(s.value for s in TaskState))


def task_filter_of(query: Mapping[str, str]) -> TaskFilter:
    """The filter a run page's query asks for; a malformed one is a 400 naming it."""
    state = query.get("state", "")
    if state not in STATE_CHOICES:
        choices = ", ".join(c for c in STATE_CHOICES if c)
        raise HTTPException(400, f"query parameter 'state': expected one of {choices}")
    states = None
    if state:
        states = STATE_GROUPS.get(state) or frozenset({TaskState(state)})
    contains = query.get("q", "").strip()
    if len(contains) > SEARCH_CHARS:
        raise HTTPException(400, f"query parameter 'q': at most {SEARCH_CHARS} characters")
    mapped = query.get("mapped", "").strip() or None
    return TaskFilter(states, contains or None, mapped)


def _query_of(f: TaskFilter, state: str) -> str:
    pairs = [("state", state), ("q", f.contains or ""), ("mapped", f.items_of or "")]
    return urlencode([(k, v) for k, v in pairs if v])


async def run_view(
    ctx: ApiContext, dag_id: str, run_id: str, after: int | None, query: Mapping[str, str]
) -> dict[str, Any]:
    store = ctx.store
    run = await run_or_404(store, dag_id, run_id)
    task_filter = task_filter_of(query)
    tis, matching = await store.run_task_page(
        run.pk, task_filter, limit=TASKS_PAGE + 1, after_pk=after
    )
    more = tis[TASKS_PAGE - 1].pk if len(tis) > TASKS_PAGE else None
    tis = tis[:TASKS_PAGE]
    counts = await store.count_run_task_states(run.pk)
    dag = await store.get_dag(dag_id)
    spec = spec_of(dag) if dag is not None else None
    state = query.get("state", "")
    filter_query = _query_of(task_filter, state)
    return {
        "run": run,
        "deadline": deadline_of(run, spec),
        "tis": tis,
        "more": more,
        "after": after,
        "spec": spec,
        "run_over": run.state in RUN_TERMINAL,
        # A running run's tasks can be cleared in any state: the scheduler stops a
        # live try and runs the task again (the API answers 202, pending).
        "run_live": run.state is RunState.RUNNING,
        "terminal": TASK_TERMINAL,
        "counts": {s.value: n for s, n in counts.items()},
        "total": sum(counts.values()),
        "matching": matching,
        "task_filter": task_filter,
        "state_filter": state,
        "state_choices": STATE_CHOICES,
        "filter_query": filter_query,
        "page_url": run_url(dag_id, run_id) + (f"?{filter_query}" if filter_query else ""),
    }
