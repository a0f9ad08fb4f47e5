"""Liveness, readiness (the store answers) and Prometheus metrics — all open.

``/metrics`` is open on purpose: Prometheus scrapes without a token, and the API's
series are labelled by route template and status only (no DAG, run or token names).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from leoflow.api.context import Ctx
from leoflow.api.schemas import ErrorOut, Health

router = APIRouter(tags=["health"])

READY_TIMEOUT = 5.0


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": ErrorOut}})
async def readyz(ctx: Ctx) -> JSONResponse:
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await ctx.store.current_epoch()
    except Exception as exc:  # any failure to reach the store means not ready
        return JSONResponse(
            {"detail": f"store unreachable: {type(exc).__name__}: {exc}"}, status_code=503
        )
    return JSONResponse({"status": "ready"})


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
