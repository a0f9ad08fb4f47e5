"""What every command shares: exit codes, settings, the event loop, logging, a DAG target."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from leoflow.dagfile.loader import LoadedDag, LoadOptions
    from leoflow.settings import Settings

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

T = TypeVar("T")


def settings_of(args: argparse.Namespace, **overrides: Any) -> Settings:
    """The settings (``--config``, then LEOFLOW_*); a bad one exits 2 naming it."""
    from leoflow.settings import SettingsError, load_settings

    try:
        return load_settings(getattr(args, "config", None), **overrides)
    except SettingsError as exc:
        print(f"leoflow: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from exc


def to_stderr(line: str) -> None:
    """A progress or note line: stderr, so stdout stays a command's result (``--json``)."""
    from leoflow.domain.printable import printable

    print(printable(line), file=sys.stderr, flush=True)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        import asyncio

        return asyncio.run(coro)
    return uvloop.run(coro)


def configure_logging(level: str = "WARNING", fmt: str = "text") -> None:
    import logging

    if fmt == "json":
        from leoflow.commands.jsonlog import JsonFormatter

        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level, handlers=[handler])
    else:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def load_target(target: str, dags_dir: Path | None, options: LoadOptions) -> LoadedDag | None:
    """The DAG ``target`` names (a file, or a dag_id in ``dags_dir``); None after
    printing why it cannot be loaded."""
    from leoflow.dagfile.problems import DagFileError
    from leoflow.runtime.dagfolder import resolve_target

    try:
        return resolve_target(target, dags_dir, options)
    except DagFileError as exc:
        print(exc, file=sys.stderr)
    except LookupError as exc:
        print(f"leoflow: {exc.args[0]}", file=sys.stderr)
    return None
