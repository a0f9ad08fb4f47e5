"""Serving the API: in Lite's process (``start_api_in_process``) or as the Pro
``leoflow api`` process (``serve_api``).

Auth policy: with ``api_tokens_file`` set, every request but /healthz, /readyz and
/metrics needs a token. Without it, Lite serves only on a loopback address and needs
the owner token it writes to an owner-only file (``lite_access``), or nothing with
``api_open_on_loopback``; ``leoflow api`` refuses to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from leoflow.api.app import create_app
from leoflow.api.auth import TOKENS_SETTING, Auth, TokensFileError
from leoflow.api.connections import protocol_for
from leoflow.api.context import ApiContext
from leoflow.secrets import DirectorySecrets
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.errors import SchemaNotCurrent

log = logging.getLogger("leoflow.api")

GRACEFUL_SHUTDOWN = 5


class ApiConfigError(Exception):
    """The API cannot start as configured; the message names the setting."""


API_STORE_RETRY_WINDOW = 3.0


def parse_listen(value: str) -> tuple[str, int]:
    """``host:port`` / ``[v6]:port`` / ``:port`` (all interfaces) -> (host, port)."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ApiConfigError(
            f"setting 'api_listen' (env LEOFLOW_API_LISTEN): expected HOST:PORT, got {value!r}"
        )
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_for(settings: Settings, *, require_tokens: bool) -> Auth:
    """The auth the settings ask for, or ApiConfigError saying what to set."""
    if settings.api_tokens_file is not None:
        try:
            return Auth.from_file(settings.api_tokens_file)
        except TokensFileError as exc:
            raise ApiConfigError(f"setting {TOKENS_SETTING}: {exc}") from exc
    if require_tokens:
        raise ApiConfigError(
            f"leoflow api needs API tokens: set {TOKENS_SETTING} to a YAML file of "
            "'tokens: [{name: NAME, role: viewer|operator|admin, sha256: HEX}]' "
            "(hash a token with: printf %s TOKEN | sha256sum)"
        )
    host, _ = parse_listen(settings.api_listen)
    if not is_loopback(host):
        raise ApiConfigError(
            f"the API would listen on {settings.api_listen} (LEOFLOW_API_LISTEN) without "
            f"tokens: set {TOKENS_SETTING}, or listen on a loopback address such as "
            "127.0.0.1:8080"
        )
    return Auth.disabled()


class _Server(uvicorn.Server):
    """The host process owns the signals (Lite's loop, ``serve_api``), not uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@dataclass
class RunningApi:
    host: str
    port: int
    server: uvicorn.Server
    task: asyncio.Task[None]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        # Streams first (they would hold the graceful shutdown to its end), then uvicorn.
        ctx = getattr(getattr(self.server.config.app, "state", None), "leoflow", None)
        if isinstance(ctx, ApiContext):
            ctx.begin_closing()
        self.server.should_exit = True
        try:
            async with asyncio.timeout(GRACEFUL_SHUTDOWN + 2):
                await asyncio.shield(self.task)
        except TimeoutError:
            self.server.force_exit = True
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ApiConfigError(
            f"cannot listen on {host}:{port} (LEOFLOW_API_LISTEN): {exc.strerror or exc}"
        ) from exc
    return sock


async def start_server(app: FastAPI, host: str, port: int) -> RunningApi:
    """Serve ``app`` from the current loop; the socket is bound before this returns
    (port 0 picks a free port: see ``RunningApi.port``)."""
    sock = _bind(host, port)
    ctx: ApiContext = app.state.leoflow
    config = uvicorn.Config(
        app,
        http=protocol_for(ctx.settings),
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
        server_header=False,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="leoflow-api")
    while not server.started:
        if task.done():
            task.result()
            raise ApiConfigError(f"the API server on {host}:{port} stopped while starting")
        await asyncio.sleep(0.01)
    return RunningApi(host, int(sock.getsockname()[1]), server, task)


def check_secrets_in_process(app: FastAPI, settings: Settings) -> None:
    """In process with the scheduler (Lite), the API sees the secrets it reads, so
    applying a DAG checks its notify: webhook secrets exist (422 otherwise)."""
    secrets = DirectorySecrets(settings.resolved_secrets_dir)
    app.state.leoflow.secret_names = secrets.names
    app.state.leoflow.secrets_where = secrets.describe()


async def start_api_in_process(
    settings: Settings,
    store: Store,
    say: Callable[[str], None],
    *,
    notify: Callable[[], None] | None = None,
) -> Callable[[], Awaitable[None]]:
    """Lite: serve the API on ``settings.api_listen`` from this loop; return the closer."""
    from leoflow.api.lite_access import announce, lite_access

    access = lite_access(settings, auth_for(settings, require_tokens=False))
    host, port = parse_listen(settings.api_listen)
    app = create_app(store, settings, auth=access.auth, notify=notify)
    access.install(app.state.leoflow)
    check_secrets_in_process(app, settings)
    running = await start_server(app, host, port)
    announce(access, app.state.leoflow, running.url, say)
    return running.close


async def _serve(settings: Settings, auth: Auth) -> int:
    try:
        store = await Store.open(settings.resolved_database_url, migrate=False)
    except SchemaNotCurrent as exc:
        print(f"leoflow api: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # connection refused, bad URL, auth: say which and stop
        print(
            f"leoflow api: cannot open the database (LEOFLOW_DATABASE_URL): "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1
    # A request waits out a database blip this long, then answers 503 (not a hang).
    store.retry_window = API_STORE_RETRY_WINDOW
    try:
        host, port = parse_listen(settings.api_listen)
        running = await start_server(create_app(store, settings, auth=auth), host, port)
        print(f"leoflow api: listening on {running.url}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print("leoflow api: stopping", file=sys.stderr, flush=True)
        await running.close()
    except ApiConfigError as exc:
        print(f"leoflow api: {exc}", file=sys.stderr)
        return 2
    finally:
        await store.close()
    return 0


def serve_api(settings: Settings) -> int:
    """``leoflow api`` (Pro): serve until SIGTERM/SIGINT; the exit status."""
    try:
        auth = auth_for(settings, require_tokens=True)
        parse_listen(settings.api_listen)
    except ApiConfigError as exc:
        print(f"leoflow api: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.run(_serve(settings, auth))
    return uvloop.run(_serve(settings, auth))
