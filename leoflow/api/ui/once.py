"""``GET /login/once?code=…``: the one-time link ``leoflow lite`` prints logs this
browser in as Lite's owner and is spent; any other code is a 401 page that says
where the owner's token is."""

from __future__ import annotations

from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from leoflow.api import owner_token
from leoflow.api.lite_access import ONCE_PATH, take_login_code
from leoflow.api.ui import session
from leoflow.api.ui.respond import ctx_of, finish

router = APIRouter(include_in_schema=False)


@router.get(ONCE_PATH)
async def login_once(request: Request, code: str = "") -> Response:
    ctx = ctx_of(request)
    token = take_login_code(ctx, code) if 0 < len(code) <= 200 else None
    s = session.login(ctx, token) if token is not None else None
    if s is None:
        where = escape(str(owner_token.token_path(ctx.settings.home)))
        html = (
            "<!doctype html><title>Leoflow: link used</title><p>This login link is unknown "
            f"or was used already. Log in at <a href='/login'>/login</a> with the token in "
            f"<code>{where}</code> (readable by Lite's user only).</p>"
        )
        return finish(request, HTMLResponse(html, status_code=401), None)
    return finish(request, RedirectResponse("/", status_code=303), s)
