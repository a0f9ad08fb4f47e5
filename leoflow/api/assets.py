"""Assets: each with its producers, consumers and events; external events posted in.

An event posted for an asset no DAG names (no task produces or consumes it, no
schedule waits on it) is refused with 404, as Airflow 3 does: a typo in a producer's
URI would otherwise record events nothing ever reads, silently. A resent post with
the same ``idempotency_key`` returns the event the first one made (200, not 201).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response

from leoflow.api.auth import Operator, Viewer
from leoflow.api.backfills import UnprocessableOut
from leoflow.api.context import ApiContext, Ctx
from leoflow.api.lookup import spec_of
from leoflow.api.schemas import ErrorOut
from leoflow.domain.assets.events import extra_problem, extra_text
from leoflow.domain.assets.refs import CONSUMES, PRODUCES, SCHEDULE
from leoflow.domain.assets.uri import AssetUriError, normalize_uri
from leoflow.domain.assets.waiting import waiting_text
from leoflow.store.assets import AssetEventRow

router = APIRouter(prefix="/api/v1", tags=["assets"])
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
    422: {"model": UnprocessableOut},  # ours (a string) or FastAPI's (a list)
}
MAX_KEY_CHARS = 200
Uri = Annotated[str, Query(min_length=1, max_length=2000)]


def _uri(value: object) -> str:
    try:
        return normalize_uri(value)
    except AssetUriError as exc:
        raise HTTPException(422, f"uri: {exc}") from None


async def _assets(ctx: ApiContext, uri: str | None = None) -> list[dict[str, Any]]:
    by_uri: dict[str, dict[str, Any]] = {}
    for found, dag_id, role, task_id in await ctx.store.list_asset_refs(uri):
        entry = by_uri.setdefault(
            found, {"uri": found, "producers": [], "consumers": [], "scheduled_dags": []}
        )
        if role == SCHEDULE:
            entry["scheduled_dags"].append(dag_id)
        else:
            key = {PRODUCES: "producers", CONSUMES: "consumers"}[role]
            entry[key].append({"dag_id": dag_id, "task_id": task_id})
    last = await ctx.store.last_asset_events(list(by_uri))
    for found, entry in by_uri.items():
        event = last.get(found)
        entry["last_event"] = event.as_json() if event is not None else None
    return list(by_uri.values())


@router.get("/assets", responses=_ERRORS)
async def list_assets(ctx: Ctx, who: Viewer) -> dict[str, Any]:
    """Every asset a DAG names, with its producers, consumers, the DAGs scheduled on
    it and its last event."""
    return {"assets": await _assets(ctx)}


@router.get("/assets/events", responses=_ERRORS)
async def list_events(
    ctx: Ctx,
    who: Viewer,
    uri: Annotated[str | None, Query(max_length=2000)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
) -> dict[str, Any]:
    """Events newest first (of one asset with ``uri``); ``before``: the last id of a page."""
    wanted = None if uri is None else _uri(uri)
    rows = await ctx.store.list_asset_events(uri=wanted, limit=limit, before_pk=before)
    return {"events": [row.as_json() for row in rows]}


@router.post("/assets/events", status_code=201, responses=_ERRORS)
async def post_event(
    body: dict[str, Any], response: Response, ctx: Ctx, who: Operator
) -> dict[str, Any]:
    """Record an external producer's event (operator or admin). Body: ``uri``, and
    optionally ``extra`` (a JSON object, at most 16 KB) and ``idempotency_key``."""
    unknown = sorted(set(body) - {"uri", "extra", "idempotency_key"})
    if unknown:
        raise HTTPException(
            422, f"{unknown[0]}: unknown field; expected uri, extra, idempotency_key"
        )
    if "uri" not in body:
        raise HTTPException(422, "uri: required field is missing")
    uri = _uri(body["uri"])
    extra = body.get("extra")
    if extra is not None and (problem := extra_problem(extra, "extra")):
        raise HTTPException(422, problem)
    key = body.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS):
        raise HTTPException(422, f"idempotency_key: expected 1 to {MAX_KEY_CHARS} characters")
    if not await ctx.store.asset_known(uri):
        raise HTTPException(
            404,
            f"no DAG produces, consumes or is scheduled on asset {uri!r}; declare it in a "
            "DAG (produces:, consumes: or schedule: {assets: ...}) first",
        )
    text = None if extra is None else extra_text(extra)
    event, created = await ctx.store.add_asset_event(
        uri, extra=text, idempotency_key=key, created_by=who.name
    )
    if not created:
        if event.uri != uri or event.extra != (extra or None):
            raise HTTPException(
                409, f"idempotency_key {key!r} was used for another event (id {event.pk})"
            )
        response.status_code = 200
    else:
        ctx.changed()
    return {"event": event.as_json(), "created": created}


@router.get("/assets/one", responses=_ERRORS)
async def get_asset(
    uri: Uri,
    ctx: Ctx,
    who: Viewer,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """One asset (``?uri=``) with its producers, consumers and newest events."""
    wanted = _uri(uri)
    found = await _assets(ctx, wanted)
    if not found:
        raise HTTPException(404, f"no DAG names asset {wanted!r}")
    history = await ctx.store.list_asset_events(uri=wanted, limit=limit)
    return {**found[0], "events": [row.as_json() for row in history]}


@router.get("/dags/{dag_id}/runs/{run_id}/asset-events", responses=_ERRORS)
async def triggering_events(dag_id: str, run_id: str, ctx: Ctx, who: Viewer) -> dict[str, Any]:
    """The asset events that triggered a run (none for a run not asset-triggered)."""
    run = await ctx.store.find_run(dag_id, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r} of DAG {dag_id!r}")
    rows: list[AssetEventRow] = await ctx.store.run_asset_events(run.pk)
    return {"events": [row.as_json() for row in rows]}


@router.get("/dags/{dag_id}/asset-waiting", responses=_ERRORS)
async def asset_waiting(dag_id: str, ctx: Ctx, who: Viewer) -> dict[str, Any]:
    """Why an asset-scheduled DAG has no new run: the assets whose event it waits for,
    each with its last event's age (``waiting`` is None once the condition is met)."""
    row = await ctx.store.get_dag(dag_id)
    spec = spec_of(row) if row is not None else None
    if spec is None:
        raise HTTPException(404, f"no DAG {dag_id!r}")
    if spec.asset_schedule is None:
        return {"dag_id": dag_id, "assets": [], "fresh": [], "waiting": None}
    uris = spec.schedule_assets()
    state = (await ctx.store.asset_trigger_states([dag_id])).get(dag_id)
    newest = await ctx.store.newest_asset_event_pks(uris)
    fresh = [u for u in uris if state is not None and newest.get(u, 0) > state.cursor(u)]
    last = await ctx.store.last_asset_events(uris)
    text = waiting_text(
        spec.asset_schedule, fresh, {u: e.created_at for u, e in last.items()}, time.time()
    )
    return {
        "dag_id": dag_id,
        "condition": spec.asset_schedule,
        "assets": uris,
        "fresh": fresh,
        "paused": row is not None and row.paused,
        "waiting": text,
    }
