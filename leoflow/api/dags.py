"""DAGs: apply a YAML document, list, get, pause, unpause, delete."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from leoflow.api.auth import Admin, Operator, Viewer
from leoflow.api.context import Ctx
from leoflow.api.guard import YAML_TYPES
from leoflow.api.lookup import dag_or_404
from leoflow.api.schemas import (
    FILE_NAME_PATTERN,
    ApplyResult,
    DagDetail,
    DagList,
    DagSummary,
    DagValidationError,
    DagValidationResponse,
    ErrorOut,
    ImportError_,
    Problem,
    dag_detail,
    dag_summary,
)
from leoflow.dagfile.loader import load_options, parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.catalogue import CatalogueEntry
from leoflow.domain.states import RunState

router = APIRouter(prefix="/api/v1/dags", tags=["dags"])

_YAML_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the DAG document (leoflow.yaml), as text; a YAML media type "
        f"({', '.join(YAML_TYPES)}) is required (415 otherwise), at most "
        "api_dag_body_limit bytes (413 otherwise). A dbt: section arrives resolved "
        "(dbt.resolved, its nodes already tasks): `leoflow dags apply` resolves it "
        "against the project on disk, which the API does not have (422 otherwise)",
        "content": {t: {"schema": {"type": "string"}} for t in YAML_TYPES},
    }
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "no such DAG"},
}


_FILE_NAME = re.compile(FILE_NAME_PATTERN)


def _api_path(name: str) -> Path:
    return Path(f"<api>/{name}")


@router.post(
    "",
    response_model=ApplyResult,
    openapi_extra=_YAML_BODY,
    responses={
        201: {"model": ApplyResult, "description": "a new DAG"},
        413: {"model": ErrorOut},
        422: {"model": DagValidationResponse, "description": "the document is invalid"},
    },
    summary="Apply a DAG document (create or replace)",
)
async def apply_dag(
    request: Request,
    ctx: Ctx,
    who: Admin,
    name: Annotated[
        str, Query(description=f"file name errors are reported under ({FILE_NAME_PATTERN})")
    ] = "leoflow.yaml",
) -> JSONResponse:
    # Checked here, not by FastAPI, so that every 422 of this route has one shape.
    if not _FILE_NAME.fullmatch(name):
        message = f"expected a file name matching {FILE_NAME_PATTERN}, got {name[:80]!r}"
        return _invalid("<api>", [Problem(file="<api>", field="name", line=None, message=message)])
    # The guard (leoflow/api/guard.py) has checked the media type and the size.
    body = await request.body()
    file = str(_api_path(name))
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = Problem(file=file, field="", line=None, message=f"not UTF-8 text: {exc}")
        return _invalid(file, [problem])
    settings = ctx.settings
    store = ctx.store
    sizes = {**settings.pools, **{p.name: p.slots for p in await store.list_pools()}}
    known_pools = set(sizes)
    known_secrets = None
    if ctx.secret_names is not None:
        known_secrets = await asyncio.to_thread(ctx.secret_names)
    options = load_options(
        settings.executor,
        settings.task_pod_passthrough,
        known_pools=known_pools,
        pool_sizes=sizes,
        known_secrets=known_secrets,
        secrets_where=ctx.secrets_where,
    )
    try:
        spec = parse_dag(text, _api_path(name), options)
    except DagFileError as exc:
        problems = [
            Problem(file=file, field=p.field, line=p.line, message=p.message) for p in exc.problems
        ]
        return _invalid(file, problems)
    except RecursionError:
        problem = Problem(file=file, field="", line=None, message="the document nests too deeply")
        return _invalid(file, [problem])
    # Pools the file declares and nothing has yet (the settings' count, rowless).
    declared = {n: (p.slots, p.description) for n, p in spec.pools.items()}
    await store.add_missing_pools({n: p for n, p in declared.items() if n not in settings.pools})
    previous = await store.get_dag(spec.dag_id)
    entry = CatalogueEntry.of(spec, fileloc=f"api:{spec.dag_id}", source=text)
    fileloc = entry.fileloc
    changed = await store.upsert_dag(
        entry.dag_id,
        fileloc=fileloc,
        spec_json=entry.spec_json,
        spec_hash=entry.spec_hash,
        source=entry.source,
    )
    if changed:
        ctx.changed()
    result = ApplyResult(
        dag_id=spec.dag_id,
        created=previous is None,
        changed=changed,
        fileloc=fileloc,
        previous_fileloc=None if previous is None else previous.fileloc,
        task_count=len(spec.tasks),
    )
    return JSONResponse(
        result.model_dump(mode="json"), status_code=201 if previous is None else 200
    )


def _invalid(file: str, problems: list[Problem]) -> JSONResponse:
    error = DagValidationError(
        message=f"{file} is not a valid DAG: {len(problems)} problem(s); nothing was stored",
        file=file,
        problems=problems,
    )
    return JSONResponse({"detail": error.model_dump(mode="json")}, status_code=422)


@router.get("", response_model=DagList, summary="List DAGs and DAG files that failed to load")
async def list_dags(ctx: Ctx, who: Viewer) -> DagList:
    rows = await ctx.store.list_dags()
    errors = await ctx.store.list_dag_errors()
    return DagList(
        dags=[dag_summary(row) for row in rows],
        import_errors=[ImportError_(fileloc=f, error=e) for f, e in errors],
    )


@router.get("/{dag_id}", response_model=DagDetail, responses=_ERRORS)
async def get_dag(dag_id: str, ctx: Ctx, who: Viewer) -> DagDetail:
    return dag_detail(await dag_or_404(ctx.store, dag_id))


async def _set_paused(ctx: Ctx, dag_id: str, paused: bool) -> DagSummary:
    await dag_or_404(ctx.store, dag_id)
    await ctx.store.set_dag_paused(dag_id, paused)
    ctx.changed()
    return dag_summary(await dag_or_404(ctx.store, dag_id))


@router.post("/{dag_id}/pause", response_model=DagSummary, responses=_ERRORS)
async def pause_dag(dag_id: str, ctx: Ctx, who: Operator) -> DagSummary:
    return await _set_paused(ctx, dag_id, True)


@router.post("/{dag_id}/unpause", response_model=DagSummary, responses=_ERRORS)
async def unpause_dag(dag_id: str, ctx: Ctx, who: Operator) -> DagSummary:
    return await _set_paused(ctx, dag_id, False)


@router.delete(
    "/{dag_id}",
    response_model=DagSummary,
    responses={**_ERRORS, 409: {"model": ErrorOut, "description": "its file is loaded, or runs"}},
    summary="Delete a DAG: the scheduler deletes its task pods (the DAG's GC anchor)",
)
async def delete_dag(dag_id: str, ctx: Ctx, who: Admin) -> DagSummary:
    """The API records the deletion; the scheduler, seeing the DAG gone, deletes its GC
    anchor and the cluster's garbage collector its pods. Run history stays."""
    dag = await dag_or_404(ctx.store, dag_id)
    if dag.active and not dag.fileloc.startswith("api:"):
        raise HTTPException(
            409,
            f"DAG {dag_id!r} is loaded from {dag.fileloc}: remove the file from the DAG "
            f"folder first (the scheduler loads it again otherwise)",
        )
    live = await ctx.store.list_runs(
        dag_id=dag_id, states=[RunState.QUEUED, RunState.RUNNING], limit=1
    )
    if live:
        raise HTTPException(
            409,
            f"DAG {dag_id!r} has runs queued or running: cancel them first "
            f"(leoflow cancel {dag_id} RUN)",
        )
    await ctx.store.delete_dag(dag_id)
    ctx.changed()
    return dag_summary(dag)
