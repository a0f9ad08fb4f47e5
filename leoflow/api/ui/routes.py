"""HTTP routes of the web UI: the pages, the login page and the static assets;
with the live events (``live``), the logs (``log_routes``) and the calls that
change state (``actions``) included in ``router``.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from leoflow.api.ui import (
    actions,
    graph_route,
    live,
    live_delta,
    log_routes,
    once,
    pages,
    session,
)
from leoflow.api.ui.moved import Redirect
from leoflow.api.ui.present import Viewer
from leoflow.api.ui.redirects import same_origin_path
from leoflow.api.ui.respond import ctx_of, finish, page_context

router = APIRouter(include_in_schema=False)
for _part in (live, log_routes, actions, once, graph_route):
    router.include_router(_part.router)

_STATIC = {
    "ui.css": "text/css; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "prefs.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def _login_redirect(request: Request) -> Response:
    # The path re-encoded: ``next`` is checked as a link, whose spaces are encoded.
    path = quote(request.url.path, safe="/")
    target = path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


def _error_page(request: Request, s: session.Session | None, exc: HTTPException) -> Response:
    ctx = ctx_of(request)
    me = Viewer(s.principal, s.csrf, ctx.auth.enabled) if s else None
    html = pages.ENV.get_template("error.html").render(
        me=me, status=exc.status_code, detail=exc.detail, page_name="error"
    )
    return finish(request, HTMLResponse(html, status_code=exc.status_code), s)


def wants_html(request: Request) -> bool:
    """A browser navigating (its Accept puts HTML before JSON), not an API client."""
    accept = request.headers.get("accept", "").lower()
    html, json = accept.find("text/html"), accept.find("application/json")
    return request.method in ("GET", "HEAD") and html >= 0 and (json < 0 or html < json)


def browser_error(request: Request, exc: HTTPException) -> Response | None:
    """The UI's error page for a path no route knows (or a UI path's own 404) when a
    browser asks; ``None``: answer as the API does, in JSON."""
    unknown = "route" not in request.scope
    if not wants_html(request) or (request.url.path.startswith("/api/") and not unknown):
        return None
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    detail = "no such page" if unknown else exc.detail
    return _error_page(request, s, HTTPException(exc.status_code, detail))


async def _page(request: Request) -> Response:
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    if s is None:
        return _login_redirect(request)
    found = pages.resolve(request.url.path)
    if found is None:
        return _error_page(request, s, HTTPException(404, "no such page"))
    page, args = found
    try:
        context = await page_context(ctx, s, page, args, dict(request.query_params))
    except HTTPException as exc:
        return _error_page(request, s, exc)
    except Redirect as moved:
        target = same_origin_path(moved.url)
        return finish(request, RedirectResponse(target, status_code=303), s)
    # What the page is drawn with: its live updates start from there (``live_delta``).
    context["live_known"] = live_delta.known_of(page, context)
    response = HTMLResponse(pages.render_page(page, context))
    response.headers["Cache-Control"] = "no-store"
    return finish(request, response, s)


for _path in (
    "/",
    "/waiting",
    "/pools",
    "/assets",
    "/assets/one",
    "/assets/lineage",
    "/dags/{dag_id}",
    "/dags/{dag_id}/runs/{run_id}",
    "/runs",
    "/dags/{dag_id}/runs",
    "/dags/{dag_id}/backfills",
    "/dags/{dag_id}/backfills/{pk}",
    "/dags/{dag_id}/runs/{run_id}/tasks/{task_id}",
    "/dags/{dag_id}/runs/{run_id}/gantt",
):
    router.add_api_route(_path, _page, methods=["GET"], response_class=HTMLResponse)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/") -> Response:
    ctx = ctx_of(request)
    if not ctx.auth.enabled:
        return RedirectResponse("/", status_code=303)
    html = pages.ENV.get_template("login.html").render(
        me=None, next=same_origin_path(next), page_name="login"
    )
    return finish(request, HTMLResponse(html), None)


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    if name not in _STATIC:
        raise HTTPException(404, "no such asset")
    data = resources.files("leoflow.api.ui").joinpath("static", name).read_bytes()
    return Response(
        data,
        media_type=_STATIC[name],
        headers={"Cache-Control": "no-cache", "ETag": hashlib.sha256(data).hexdigest()[:16]},
    )
