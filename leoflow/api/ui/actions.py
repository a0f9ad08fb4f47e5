"""The web UI's state-changing calls: log in, log out, and the actions.

Every action calls the API's own route functions with the session's principal,
after the UI's checks (same origin, JSON, CSRF, role); their 404/409 answers
come back as they are. The guard has already refused one without a valid
session (``gate``), before its body was read.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from leoflow.api import backfills as backfills_api
from leoflow.api import dags as dags_api
from leoflow.api import marks as marks_api
from leoflow.api import pools as pools_api
from leoflow.api import runs as runs_api
from leoflow.api import tasks as tasks_api
from leoflow.api.auth import Role
from leoflow.api.context import ApiContext
from leoflow.api.schemas import RUN_ID_PATTERN, PoolIn, PoolPatch, TriggerIn
from leoflow.api.ui import session
from leoflow.api.ui.respond import ctx_of, finish
from leoflow.api.ui.seen import unchanged

router = APIRouter(include_in_schema=False)

MAX_ACTION_BODY = 64 * 1024


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dag_id: str | None = Field(None, max_length=200)
    run_id: str | None = Field(None, max_length=250)
    task_id: str | None = Field(None, max_length=200)
    downstream: bool = False
    upstream: bool = False
    state: str | None = Field(None, max_length=20)
    # What the page showed when the button was pressed (run state; task "state:try"):
    # an action on a run or task that changed since says so instead of acting.
    seen_run: str | None = Field(None, max_length=40)
    seen_task: str | None = Field(None, max_length=60)
    conf: Any = None
    new_run_id: str | None = Field(None, pattern=RUN_ID_PATTERN)
    name: str | None = Field(None, max_length=200)
    slots: int | None = None
    description: str | None = None
    backfill: int | None = Field(None, ge=1)
    start: str | None = Field(None, max_length=40)
    end: str | None = Field(None, max_length=40)
    reprocess_failed: bool = False
    max_active_runs: int | None = None
    dry_run: bool = False


async def _body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    digits = declared is not None and declared.isascii() and declared.isdigit()
    if digits and int(declared or 0) > MAX_ACTION_BODY:
        raise HTTPException(413, f"the request body is over {MAX_ACTION_BODY} bytes")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_ACTION_BODY:
            raise HTTPException(413, f"the request body is over {MAX_ACTION_BODY} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "the body must be a JSON object")
    return data


def _need(value: str | None, name: str) -> str:
    if not value:
        raise HTTPException(422, f"{name}: required")
    return value


def _task_of(b: _Action) -> tuple[str, str, str]:
    return _need(b.dag_id, "dag_id"), _need(b.run_id, "run_id"), _need(b.task_id, "task_id")


@router.post("/ui/login")
async def login(request: Request) -> Response:
    ctx = ctx_of(request)
    session.check_same_origin(request)
    body = await _body(request)
    token = body.get("token")
    if not isinstance(token, str) or not token or len(token) > 4096:
        raise HTTPException(422, "token: expected the API token as a string")
    s = session.login(ctx, token)
    if s is None:
        raise HTTPException(401, "unknown token")
    return finish(
        request, JSONResponse({"user": s.principal.name, "role": s.principal.role.label}), s
    )


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    ctx = ctx_of(request)
    session.check_same_origin(request)
    s = session.current(request, ctx)
    if s is not None and not s.fresh:
        session.check_csrf(request, s)
        session.logout(ctx, s)
    response = JSONResponse({"ok": True})
    session.clear_cookie(request, response)
    return response


@router.post("/ui/actions/{action}")
async def act(action: str, request: Request) -> Response:
    """One state-changing call. Checks, in order, before reading the body: same
    origin and JSON, a session, its CSRF token, the role the action needs."""
    ctx = ctx_of(request)
    session.check_same_origin(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    if s.fresh:
        raise HTTPException(403, "missing or stale CSRF token: reload the page")
    session.check_csrf(request, s)
    role = Role.ADMIN if action.startswith("pool_") else Role.OPERATOR
    if action not in _ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    session.require(s, role)
    try:
        body = _Action.model_validate(await _body(request))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise HTTPException(422, problems) from None
    result = await _ACTIONS[action](ctx, s, body)
    return finish(request, JSONResponse(result), None)


async def _pause(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await dags_api.pause_dag(_need(b.dag_id, "dag_id"), ctx, s.principal)
    return {"paused": out.paused}


async def _unpause(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await dags_api.unpause_dag(_need(b.dag_id, "dag_id"), ctx, s.principal)
    return {"paused": out.paused}


async def _trigger(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    conf = {} if b.conf is None else b.conf
    if not isinstance(conf, dict):
        raise HTTPException(
            422, f'conf: expected a JSON object such as {{"key": 1}}, got {type(conf).__name__}'
        )
    response = await runs_api.trigger_run(
        _need(b.dag_id, "dag_id"), ctx, s.principal, TriggerIn(conf=conf, run_id=b.new_run_id)
    )
    data: dict[str, Any] = json.loads(bytes(response.body))
    return {"run_id": data["run_id"], "state": data["state"]}


async def _cancel(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    await unchanged(ctx, b)
    out = await runs_api.cancel_run(
        _need(b.dag_id, "dag_id"), _need(b.run_id, "run_id"), ctx, s.principal
    )
    return {"state": out.state.value}


async def _clear(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    await unchanged(ctx, b)
    out = await tasks_api.clear_task_instance(
        *_task_of(b),
        ctx,
        s.principal,
        Response(),
        downstream=b.downstream,
    )
    # pending: a running run's clear, which the scheduler applies on its next poll.
    return {"cleared": out.cleared, **({"pending": True} if out.pending else {})}


async def _mark(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    if b.state not in ("success", "failed"):
        raise HTTPException(422, f"state: expected 'success' or 'failed', got {b.state!r}")
    await unchanged(ctx, b)
    out = await marks_api.mark_task_instance(
        *_task_of(b),
        ctx,
        s.principal,
        Response(),
        state="success" if b.state == "success" else "failed",
        downstream=b.downstream,
        upstream=b.upstream,
    )
    return out.model_dump(include={"marked", "reopened", "state", "pending"})


async def _clear_failed(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    await unchanged(ctx, b)
    out = await marks_api.clear_failed_tasks(
        _need(b.dag_id, "dag_id"), _need(b.run_id, "run_id"), ctx, s.principal, Response()
    )
    return {"cleared": out.cleared, **({"pending": True} if out.pending else {})}


async def _pool_create(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    try:
        body = PoolIn(
            name=_need(b.name, "name"), slots=b.slots or 0, description=b.description or ""
        )
    except ValidationError as exc:
        raise HTTPException(422, str(exc.errors()[0]["msg"])) from None
    out = await pools_api.create_pool(body, ctx, s.principal)
    return {"name": out.name, "slots": out.slots}


async def _pool_resize(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    try:
        body = PoolPatch(slots=b.slots)
    except ValidationError as exc:
        raise HTTPException(422, "slots: " + str(exc.errors()[0]["msg"])) from None
    out = await pools_api.resize_pool(_need(b.name, "name"), body, ctx, s.principal)
    return {"name": out.name, "slots": out.slots}


async def _backfill_create(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    try:
        body = backfills_api.BackfillIn.model_validate(
            {
                "from": _need(b.start, "from"),
                "to": _need(b.end, "to"),
                "reprocess_failed": b.reprocess_failed,
                "max_active_runs": b.max_active_runs,
                "dry_run": b.dry_run,
            }
        )
    except ValidationError as exc:
        e = exc.errors()[0]
        raise HTTPException(422, f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}") from None
    response = await backfills_api.create(_need(b.dag_id, "dag_id"), body, ctx, s.principal)
    data: dict[str, Any] = json.loads(bytes(response.body))
    return data


async def _backfill_cancel(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    if b.backfill is None:
        raise HTTPException(422, "backfill: required")
    out = await backfills_api.cancel(b.backfill, ctx, s.principal)
    return {"pk": out.pk, "state": out.state}


_ACTIONS = {
    "pause": _pause,
    "unpause": _unpause,
    "trigger": _trigger,
    "cancel": _cancel,
    "clear": _clear,
    "mark": _mark,
    "clear_failed": _clear_failed,
    "backfill_create": _backfill_create,
    "backfill_cancel": _backfill_cancel,
    "pool_create": _pool_create,
    "pool_resize": _pool_resize,
}
