"""The commands over the HTTP API: the client, errors, ``--server/--token/--json``.

Every such command takes ``--server`` (default: LEOFLOW_SERVER, else
http://127.0.0.1:8080), ``--token`` (default: LEOFLOW_TOKEN, else the owner token a
local Lite of this user wrote for that address: ``leoflow.api.owner_token``) and
``--json``.
Tables for people, ``--json`` (the API's own JSON) for scripts. An API error
prints its detail and exits 1. httpx is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from leoflow.commands.common import EXIT_FAILED

if TYPE_CHECKING:
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8080"
TIMEOUT = 30.0
Command = Callable[[argparse.Namespace], int]


class ApiError(Exception):
    """The API answered with an error, or could not be reached."""


def add_remote_options(parser: argparse.ArgumentParser, *, local: bool = False) -> None:
    """``local``: with no server named, the command reads the local store instead."""
    default = "none: the local store (LEOFLOW_HOME)" if local else DEFAULT_SERVER
    parser.add_argument("--server", help=f"API base URL (default: $LEOFLOW_SERVER or {default})")
    parser.set_defaults(local_store=local)
    parser.add_argument("--token", help="API bearer token (default: $LEOFLOW_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


def api_parser(
    group: Any, name: str, help: str, func: Command, *, local: bool = False
) -> argparse.ArgumentParser:
    """A subcommand of ``group`` that talks to the API (``local``: see add_remote_options)."""
    parser: argparse.ArgumentParser = group.add_parser(name, help=help)
    add_remote_options(parser, local=local)
    parser.set_defaults(func=func)
    return parser


def remote_requested(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "server", None) or os.environ.get("LEOFLOW_SERVER"))


def _server(args: argparse.Namespace) -> str:
    return str(
        getattr(args, "server", None) or os.environ.get("LEOFLOW_SERVER") or DEFAULT_SERVER
    ).rstrip("/")


def _owner(args: argparse.Namespace, server: str) -> str | None:
    """The token the local Lite of this user wrote, if ``server`` is that Lite."""
    from leoflow.api.owner_token import token_for

    return token_for(_home(args), server)


def _home(args: argparse.Namespace) -> Path:
    """LEOFLOW_HOME, else the ``--config`` file's ``home``, else ~/.leoflow (as Lite)."""
    if os.environ.get("LEOFLOW_HOME"):
        return Path(os.environ["LEOFLOW_HOME"])
    if getattr(args, "config", None) is not None:
        from leoflow.commands.common import settings_of

        return settings_of(args).home
    return Path(os.path.expanduser("~")) / ".leoflow"


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@contextmanager
def client(args: argparse.Namespace) -> Iterator[httpx.Client]:
    """A client of the server named; for a command that reads the local store when none
    is named (``runs``, ``tasks``: ``local_store``), of the API over that store."""
    import httpx

    if getattr(args, "local_store", False) and not remote_requested(args):
        from leoflow.commands.common import settings_of
        from leoflow.commands.local_api import LocalApiError, local_api

        try:
            with (
                local_api(settings_of(args)) as (base, token),
                httpx.Client(base_url=base, headers=_bearer(token), timeout=TIMEOUT) as session,
            ):
                yield session
        except LocalApiError as exc:
            raise ApiError(str(exc)) from exc
        return
    server = _server(args)
    given: str | None = getattr(args, "token", None) or os.environ.get("LEOFLOW_TOKEN")
    owned = given or _owner(args, server)
    with httpx.Client(base_url=server, headers=_bearer(owned), timeout=TIMEOUT) as session:
        yield session


def detail(response: httpx.Response) -> str:
    try:
        found = response.json().get("detail", response.text)
    except ValueError:
        return response.text.strip() or response.reason_phrase
    if isinstance(found, list):  # FastAPI's request validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', '')}" for d in found
        )
    if isinstance(found, dict):
        return str(found.get("message", found))
    return str(found)


def call(
    session: httpx.Client, method: str, path: str, ok: Sequence[int] = (200, 201, 204), **kw: Any
) -> httpx.Response:
    import httpx

    try:
        response = session.request(method, path, **kw)
    except httpx.HTTPError as exc:
        raise ApiError(f"cannot reach the API at {session.base_url}: {exc}") from exc
    if response.status_code not in ok:
        raise ApiError(f"{response.status_code}: {detail(response)}")
    return response


def get_json(args: argparse.Namespace, path: str, **kw: Any) -> Any:
    """One GET; the answer's JSON."""
    with client(args) as session:
        return call(session, "GET", path, **kw).json()


def url(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


def api_command(func: Command) -> Command:
    """An API error ends the command with its message and exit code 1."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except ApiError as exc:
            print(f"leoflow: {exc}", file=sys.stderr)
            return EXIT_FAILED

    wrapped.__name__ = func.__name__
    return wrapped


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def text(key: str) -> Callable[[Any], str]:
    """A column showing the item's ``key``, empty when null."""
    return lambda item: item[key] or ""


def when(key: str) -> Callable[[Any], str]:
    """A column showing the item's ``key`` (an ISO time) in local time."""

    def cell(item: Any) -> str:
        value = item[key]
        if not value:
            return "-"
        return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M:%S")

    return cell


# How a finished thing's columns end: when, and what it said.
ENDED_AND_MESSAGE = (("ENDED", when("ended_at")), ("MESSAGE", text("message")))
