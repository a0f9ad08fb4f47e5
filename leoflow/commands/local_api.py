"""The API over this machine's store, for ``runs`` and ``tasks`` run with no server
named (no ``--server``, no LEOFLOW_SERVER): like ``logs``, they read what ``leoflow
run`` and ``leoflow lite`` wrote under LEOFLOW_HOME, whether a Lite is up or not.

The same routes answer as over HTTP, so a table or ``--json`` reads the same either
way: the API is served on a loopback port for the command's duration, and answers only
a token made for this command and known to it alone (loopback is no boundary between
local users: without it, another user could drive the store through that port).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leoflow.settings import Settings

START_TIMEOUT = 60.0  # opening the store may migrate it first


class LocalApiError(Exception):
    """The local store could not be opened or served."""


@contextmanager
def local_api(settings: Settings) -> Iterator[tuple[str, str]]:
    """The base URL of the API over the local store and the token it answers, until the
    block ends."""
    import secrets

    token = secrets.token_urlsafe(32)
    told: queue.Queue[tuple[str, asyncio.AbstractEventLoop, asyncio.Event] | BaseException]
    told = queue.Queue()

    async def serve() -> None:
        from leoflow.api.app import create_app
        from leoflow.api.auth import Auth, Role, hash_token
        from leoflow.api.server import start_server
        from leoflow.store import Store

        try:
            store = await Store.open(settings.resolved_database_url)
        except Exception as exc:
            told.put(exc)
            return
        try:
            app = create_app(
                store, settings, auth=Auth.from_hashes([("cli", Role.ADMIN, hash_token(token))])
            )
            running = await start_server(app, "127.0.0.1", 0)
            done = asyncio.Event()
            told.put((running.url, asyncio.get_running_loop(), done))
            await done.wait()
            await running.close()
        except Exception as exc:
            told.put(exc)
        finally:
            await store.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="local-api")
    thread.start()
    try:
        answer = told.get(timeout=START_TIMEOUT)
    except queue.Empty:
        raise LocalApiError("the local store did not open in time") from None
    if isinstance(answer, BaseException):
        thread.join()
        raise LocalApiError(
            f"cannot read the local store ({settings.resolved_database_url}): {answer}"
        ) from answer
    url, loop, done = answer
    try:
        yield url, token
    finally:
        loop.call_soon_threadsafe(done.set)
        thread.join()
