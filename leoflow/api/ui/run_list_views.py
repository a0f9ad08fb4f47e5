"""The runs pages: a DAG's runs (``/dags/{dag}/runs``) and every DAG's (``/runs``),
filtered by state (cancelled apart from failed), run type and a date range, paged
newest first by keyset, with "jump to date" (runs dated on or before a day).

A malformed filter is named in the page and left out; the page never fails on it.
Dates are days in UTC, as typed into the form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from leoflow.api.context import ApiContext
from leoflow.api.lookup import dag_or_404
from leoflow.api.ui.present import dag_url
from leoflow.domain.cancelled import CANCELLED, shown_run_state
from leoflow.domain.states import RunState
from leoflow.store.rows import RunRow
from leoflow.store.run_search import RunFilter, find_runs
from leoflow.store.runs import RUN_TYPES

RUNS_PAGE = 50
STATE_CHOICES = ("all", *(s.value for s in RunState), CANCELLED)
TYPE_CHOICES = ("all", *RUN_TYPES)
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class RunLine:
    row: RunRow

    @property
    def state(self) -> str:
        return shown_run_state(self.row.state, self.row.message)

    @property
    def date(self) -> float:
        return self.row.logical_date if self.row.logical_date is not None else self.row.created_at


def _day(query: Mapping[str, str], name: str, problems: list[str]) -> datetime | None:
    raw = (query.get(name) or "").strip()
    if not raw:
        return None
    try:
        day = datetime.strptime(raw[:10], "%Y-%m-%d") if len(raw) <= 10 else None
    except ValueError:
        day = None
    if day is None:
        problems.append(f"{name!r}: expected a date as YYYY-MM-DD, not {raw[:40]!r}; left out")
        return None
    return day.replace(tzinfo=UTC)


def _choice(
    query: Mapping[str, str], name: str, choices: tuple[str, ...], problems: list[str]
) -> str:
    raw = query.get(name) or "all"
    if raw not in choices:
        problems.append(
            f"{name!r}: expected one of {', '.join(choices)}, not {raw[:40]!r}; left out"
        )
        return "all"
    return raw


def _cursor(query: Mapping[str, str], problems: list[str]) -> int | None:
    raw = query.get("before") or ""
    if not raw:
        return None
    if raw.isascii() and raw.isdigit() and 0 < len(raw) < 19:
        return int(raw)
    problems.append(
        f"'before': expected a page cursor (a run number), not {raw[:40]!r}; first page shown"
    )
    return None


def _filter(
    dag_id: str | None, q: Mapping[str, str], problems: list[str]
) -> tuple[RunFilter, dict[str, str]]:
    state = _choice(q, "state", STATE_CHOICES, problems)
    kind = _choice(q, "type", TYPE_CHOICES, problems)
    start, end, at = _day(q, "from", problems), _day(q, "to", problems), _day(q, "at", problems)
    if start is not None and end is not None and end < start:
        problems.append("'to' is before 'from': no run can be in between; 'to' left out")
        end = None
    if at is not None:  # jump to date: the newest runs dated on or before that day
        end = at if end is None else min(end, at)
    stored: tuple[RunState, ...] = ()
    cancelled: bool | None = None
    if state == CANCELLED:
        stored, cancelled = (RunState.FAILED,), True
    elif state != "all":
        stored = (RunState(state),)
        cancelled = False if state == RunState.FAILED.value else None
    which = RunFilter(
        dag_id=dag_id,
        states=stored,
        cancelled=cancelled,
        run_types=() if kind == "all" else (kind,),
        date_from=None if start is None else start.timestamp(),
        date_to=None if end is None else (end + _DAY).timestamp(),
    )
    form = {
        "state": state,
        "type": kind,
        "from": "" if start is None else start.strftime("%Y-%m-%d"),
        "to": "" if end is None else end.strftime("%Y-%m-%d"),
    }
    return which, form


async def runs_view(ctx: ApiContext, dag_id: str | None, q: Mapping[str, str]) -> dict[str, Any]:
    dag = None if dag_id is None else await dag_or_404(ctx.store, dag_id)
    problems: list[str] = []
    which, form = _filter(dag_id, q, problems)
    before = _cursor(q, problems)
    rows = await find_runs(ctx.store, which, limit=RUNS_PAGE + 1, before=before)
    more = rows[RUNS_PAGE - 1].pk if len(rows) > RUNS_PAGE else None
    lines = [RunLine(r) for r in rows[:RUNS_PAGE]]
    base = "/runs" if dag_id is None else dag_url(dag_id) + "/runs"
    kept = urlencode({k: v for k, v in form.items() if v and v != "all"})
    return {
        "dag": dag,
        "lines": lines,
        "problems": problems,
        "form": form,
        "states": STATE_CHOICES,
        "types": TYPE_CHOICES,
        "base": base,
        "kept": kept,
        "first": before is not None,
        "older": more,
    }
