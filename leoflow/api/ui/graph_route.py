"""``/ui/graph``: a big DAG's graph, fetched by its page once the page has painted
(``grid_window.GRAPH_INLINE``), with the states of the run the page shows."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from leoflow.api.ui import pages, session, views
from leoflow.api.ui.respond import ctx_of, finish

router = APIRouter(include_in_schema=False)


@router.get("/ui/graph")
async def graph_fragment(
    request: Request, path: Annotated[str, Query(max_length=2000)] = "/"
) -> Response:
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    parts = urlsplit(path)
    found = pages.resolve(parts.path)
    if found is None or found[0].name != "dag":
        raise HTTPException(404, "no DAG page at that path")
    run_id = dict(parse_qsl(parts.query)).get("run") or None
    context = await views.graph_view(ctx, found[1][0], run_id)
    html = pages.ENV.get_template("graph_svg.html").render(context)
    response = HTMLResponse(html, headers={"Cache-Control": "no-store"})
    return finish(request, response, s)
