"""Who may drive Lite's API when no tokens file is configured (``owner_token``).

By default Lite accepts only its owner token (made once, kept in an owner-only file
the CLI reads) and prints at every start a one-time link that logs a browser in to
the web UI. ``api_open_on_loopback`` keeps the old open API on loopback, for a host
with one user, and says at every start what that allows.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from leoflow.api import owner_token
from leoflow.api.auth import Auth, Role, hash_token
from leoflow.api.context import ApiContext
from leoflow.settings import Settings

log = logging.getLogger("leoflow.api")

OPEN_SETTING = "api_open_on_loopback (LEOFLOW_API_OPEN_ON_LOOPBACK)"
OWNER = "lite-owner"
ONCE_PATH = "/login/once"


@dataclass(frozen=True)
class LiteAccess:
    auth: Auth
    owner_token: str | None = None  # the token to write and accept; None: not needed

    def install(self, ctx: ApiContext) -> None:
        """Before serving: web UI sessions are signed with a key derived from the owner
        token (when no token_signing_key is set), so they outlive a restart as it does."""
        if self.owner_token is not None:
            ctx.session_seed = self.owner_token

    def describe(self) -> str:
        if self.owner_token is not None:
            return "(owner token)"
        return "(bearer tokens)" if self.auth.enabled else "(no auth: open to every local user)"


def lite_access(settings: Settings, configured: Auth) -> LiteAccess:
    """``configured`` is what the settings alone give (a tokens file, or none)."""
    if configured.enabled or settings.api_open_on_loopback:
        return LiteAccess(configured)
    token = owner_token.load_or_create(settings.home)
    return LiteAccess(Auth.from_hashes([(OWNER, Role.ADMIN, hash_token(token))]), token)


def open_warning(settings: Settings) -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return (
        f"WARNING: the API on {settings.api_listen} takes requests without a token "
        f"({OPEN_SETTING}): every user of this host can run commands as {user} "
        f"(uid {os.geteuid()}) and read its secrets. Unset it unless this host has one user."
    )


def issue_login_link(ctx: ApiContext, token: str) -> str:
    """A code that logs one browser in as the owner, once; its hash is kept."""
    code = secrets.token_urlsafe(24)
    ctx.one_time_logins[hashlib.sha256(code.encode()).hexdigest()] = token
    return code


def take_login_code(ctx: ApiContext, code: str) -> str | None:
    """The token a one-time code stands for, the code spent; None if unknown or spent."""
    return ctx.one_time_logins.pop(hashlib.sha256(code.encode()).hexdigest(), None)


def announce(
    access: LiteAccess,
    ctx: ApiContext,
    url: str,
    say: Callable[[str], None],
) -> None:
    """Say how to reach the running API, and write the owner token where its CLI looks."""
    settings = ctx.settings
    say(f"leoflow api: {url}/api/v1 {access.describe()}")
    token = access.owner_token
    if token is None:
        if not access.auth.enabled:
            log.warning("%s", open_warning(settings))
            say(open_warning(settings))
        return
    path = owner_token.write(settings.home, url, token)
    code = issue_login_link(ctx, token)
    say(
        f"leoflow web UI: {url}{ONCE_PATH}?code={code} (a one-time link; later, log in "
        f"with the token in {path}, which the leoflow CLI of this user reads by itself)"
    )
