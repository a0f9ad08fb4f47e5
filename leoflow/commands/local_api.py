"""The API over this machine's store, for ``runs`` and ``tasks`` run with no server
named (no ``--server``, no LEOFLOW_SERVER): like ``logs``, they read what ``leoflow
run`` and ``leoflow lite`` wrote under LEOFLOW_HOME, whether a Lite is up or not.

The same routes answer as over HTTP, so a table or ``--json`` reads the same either
way: the API is served on a private loopback port for the command's duration.
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
def local_api(settings: Settings) -> Iterator[str]:
    """The base URL of the API over the local store, until the block ends."""
    told: queue.Queue[tuple[str, asyncio.AbstractEventLoop, asyncio.Event] | BaseException]
    told = queue.Queue()

    async def serve() -> None:
        from leoflow.api.app import create_app
        from leoflow.api.auth import Auth
        from leoflow.api.server import start_server
        from leoflow.store import Store

        try:
            store = await Store.open(settings.resolved_database_url)
        except Exception as exc:
            told.put(exc)
            return
        try:
            app = create_app(store, settings, auth=Auth.disabled())
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
        yield url
    finally:
        loop.call_soon_threadsafe(done.set)
        thread.join()
