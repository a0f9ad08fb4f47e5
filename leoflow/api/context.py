"""What every route reaches through ``request.app.state.leoflow``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from leoflow.aio.waits import wait_set
from leoflow.api.auth import Auth
from leoflow.api.live_streams import LiveStreams
from leoflow.settings import Settings
from leoflow.store import Store

log = logging.getLogger("leoflow.api")


@dataclass
class ApiContext:
    store: Store
    settings: Settings
    auth: Auth
    notify: Callable[[], None] | None = None
    # How often a followed log looks for new bytes and for the end of its try.
    log_poll_interval: float = 0.5
    clock: Callable[[], float] = field(default=time.time)
    # The secret names a notify: webhook may use, when this process sees the secrets
    # the scheduler reads (Lite's in-process API); None in Pro's split API, whose pod
    # holds no secrets and never reaches Kubernetes: there the check is not made.
    secret_names: Callable[[], Collection[str]] | None = None
    secrets_where: str = "the secrets backend"
    # Set when the server starts to shut down: long-lived streams (the UI's live
    # events, a followed log) end at once instead of holding uvicorn's grace period.
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    # Lite's one-time login links (``lite_access``): SHA-256 of a code -> the owner token.
    one_time_logins: dict[str, str] = field(default_factory=dict)
    # What web UI sessions are signed from when token_signing_key is unset (Lite's owner
    # token); None: a random key per process.
    session_seed: str | None = None
    # The web UI's live streams: bounded, and ended at once when the server stops.
    streams: LiveStreams = field(default_factory=LiveStreams)

    def begin_closing(self) -> None:
        """The server is stopping: long-lived streams end now."""
        self.closing.set()
        self.streams.close_all()

    async def pause(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the server starts shutting down; True if it has."""
        return await wait_set(self.closing, seconds)

    def changed(self) -> None:
        """A write went to the store: let an in-process scheduler (Lite) wake now."""
        if self.notify is None:
            return
        try:
            self.notify()
        except Exception:  # the write is done; a failing wake-up must not turn it into a 500
            log.exception("the API's notify callback failed")


def _context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.leoflow
    return ctx


Ctx = Annotated[ApiContext, Depends(_context)]
