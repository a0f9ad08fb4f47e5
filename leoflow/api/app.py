"""The FastAPI application: ``create_app(store, settings, auth=...)``.

The API talks only to the store; the scheduler (another process in Pro, the same
one in Lite) polls it. ``notify`` is called after every write so an in-process
scheduler can wake at once instead of at its next poll.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from leoflow.api import (
    assets,
    backfills,
    dags,
    health,
    log_search,
    logs,
    marks,
    pools,
    runs,
    tasks,
    tries,
)
from leoflow.api.auth import Auth
from leoflow.api.context import ApiContext
from leoflow.api.guard import RequestGuard
from leoflow.api.live_streams import LiveStreams
from leoflow.api.metrics import MetricsMiddleware
from leoflow.api.ui import routes as web_ui
from leoflow.api.ui.gate import UiGate
from leoflow.domain.states import IllegalTransition
from leoflow.settings import Settings
from leoflow.store import Store, StoreUnavailable

API_VERSION = "1"


def create_app(
    store: Store,
    settings: Settings,
    *,
    auth: Auth,
    notify: Callable[[], None] | None = None,
    log_poll_interval: float = 0.5,
) -> FastAPI:
    app = FastAPI(
        title="Leoflow API",
        version=API_VERSION,
        description="DAGs, runs, task instances, logs and pools. Bearer tokens with roles "
        "viewer (every GET, logs included), operator (trigger, cancel, clear, pause) and admin "
        "(apply DAGs, pools). /healthz, /readyz and /metrics are open.",
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.leoflow = ApiContext(
        store=store,
        settings=settings,
        auth=auth,
        notify=notify,
        log_poll_interval=log_poll_interval,
        streams=LiveStreams.of(settings),
    )
    for module in (
        health,
        dags,
        runs,
        tasks,
        marks,
        tries,
        logs,
        log_search,
        pools,
        backfills,
        assets,
    ):
        app.include_router(module.router)
    app.include_router(web_ui.router)  # the web UI at /, its assets and calls under /ui

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # A browser that asks for a path nobody serves gets a page, not JSON.
        page = web_ui.browser_error(request, HTTPException(exc.status_code, exc.detail))
        if page is not None:
            return page
        return await http_exception_handler(request, exc)

    @app.exception_handler(IllegalTransition)
    async def _illegal(request: Request, exc: IllegalTransition) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(StoreUnavailable)
    async def _store_down(request: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse(
            {"detail": f"the database is unavailable; try again shortly ({exc})"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    # The guard wraps the whole app, so a router or a UI mounted later is covered
    # too; metrics wrap the guard, so its refusals are counted.
    app.add_middleware(
        RequestGuard,
        settings=settings,
        auth=auth,
        session_gate=UiGate(app.state.leoflow),
    )
    app.add_middleware(MetricsMiddleware)
    return app
