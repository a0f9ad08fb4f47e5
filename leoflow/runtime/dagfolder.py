"""DAG files into the store and the scheduler: one file (``leoflow run``), or a folder
watched for changes (``leoflow lite``), dbt projects included (``leoflow.dbt.changes``).

Imports no store or scheduler code at run time (only their types), so a command
that only reads DAG files (``leoflow dags next``) stays light.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from leoflow.dagfile.loader import (
    LoadedDag,
    LoadOptions,
    lite_ignored_fields,
    load_dag_file,
    load_dag_folder,
)
from leoflow.dagfile.walk import list_folder
from leoflow.dbt.changes import project_stamps
from leoflow.domain.catalogue import CatalogueEntry
from leoflow.domain.dag import DagSpec
from leoflow.domain.origins import ADHOC_PREFIX, is_adhoc
from leoflow.domain.printable import printable

log = logging.getLogger("leoflow.lite")

if TYPE_CHECKING:
    from leoflow.scheduler.core import Scheduler
    from leoflow.store import Store


async def record_dag(store: Store, loaded: LoadedDag, *, adhoc: bool = False) -> None:
    """Store the DAG; ``adhoc`` (``leoflow run FILE``) marks it as such unless a folder
    or the API has it already (an active DAG of another origin stays theirs)."""
    fileloc = str(loaded.path)
    if adhoc:
        known = await store.get_dag(loaded.spec.dag_id)
        if known is None or not known.active or is_adhoc(known.fileloc):
            fileloc = ADHOC_PREFIX + fileloc
    entry = CatalogueEntry.of(loaded.spec, fileloc=fileloc, source=loaded.source)
    await store.upsert_dag(
        entry.dag_id,
        fileloc=entry.fileloc,
        spec_json=entry.spec_json,
        spec_hash=entry.spec_hash,
        source=entry.source,
    )
    await store.set_dag_error(str(loaded.path), None)


async def add_declared_pools(store: Store, spec: DagSpec) -> dict[str, int]:
    """The pools ``spec`` declares that no pool exists for yet, created; their slots.

    An existing pool wins: a DAG file never resizes an operator's pool. Lite writes
    the settings' pools into the store at start, so the store is the whole picture."""
    wanted = {name: (p.slots, p.description) for name, p in spec.pools.items()}
    created = await store.add_missing_pools(wanted)
    return {name: wanted[name][0] for name in created}


def announce_ignored(spec: DagSpec, say: Callable[[str], None]) -> None:
    ignored = lite_ignored_fields(spec)
    if ignored:
        say(
            f"note: Lite runs tasks as local processes and ignores {', '.join(ignored)} "
            f"in DAG {spec.dag_id}"
        )


def resolve_target(target: str, dags_dir: Path | None, options: LoadOptions) -> LoadedDag:
    """``target`` is a DAG file, or a dag_id looked up in ``dags_dir``."""
    path = Path(target)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return load_dag_file(path, options)
    folder = dags_dir or Path("dags")
    loaded = load_dag_folder(folder, options)
    if target in loaded.dags:
        return loaded.dags[target]
    errors = "\n".join(str(e) for e in loaded.errors)
    known = ", ".join(sorted(loaded.dags)) or "none"
    raise LookupError(
        f"no DAG {target!r} in {folder} (DAGs found: {known})" + (f"\n{errors}" if errors else "")
    )


def watched_dirs(loaded: Iterable[LoadedDag]) -> set[Path]:
    """The project and profiles folders of the dbt DAGs loaded, wherever they are."""
    out: set[Path] = set()
    for dag in loaded:
        section = dag.spec.dbt
        if section is not None:
            base = dag.path.parent
            out.add((base / section.project_dir).resolve())
            if section.profiles_dir:
                out.add((base / section.profiles_dir).resolve())
    return out


class DagFolderWatcher:
    """Re-reads the DAG folder when a file changes; bad files are reported and skipped.

    A file that breaks keeps its DAG's last good definition in the scheduler
    and in the store: nothing stored is lost or changed by a bad file.
    """

    def __init__(
        self,
        folder: Path,
        options: LoadOptions,
        say: Callable[[str], None],
        *,
        secret_names: Callable[[], set[str]] | None = None,
    ) -> None:
        self.folder = folder
        self.options = options
        self.say = say
        # The secrets a notify: webhook may name (None: not checked), listed each pass
        # like the pools: creating the missing secret makes the file load untouched.
        self._secret_names = secret_names
        self._fingerprint: tuple[object, ...] = ()
        self._errors: dict[str, str] = {}
        self.good: dict[str, LoadedDag] = {}
        self._announced: set[str] = set()
        self._dbt_dirs: set[Path] = set()
        self._failure = ""

    def _scan(self) -> tuple[tuple[str, object, object], ...]:
        entries: list[tuple[str, object, object]] = []
        # dbt projects: those below the folder, and those the dbt DAGs name elsewhere.
        projects = set(self._dbt_dirs)
        # A file or folder removed or replaced mid-scan is seen again on the next pass
        # (list_folder skips it); it must not stop the scheduler.
        listing = list_folder(self.folder)
        for entry in listing.files:
            entries.append((str(entry.path), entry.mtime, entry.size))
        for path, why in listing.refused.items():
            entries.append((str(path), "refused", why))
        projects.update(p.resolve() for p in listing.projects)
        for project in sorted(projects):
            with contextlib.suppress(OSError):
                entries.extend(project_stamps(project))
        return tuple(sorted(entries, key=lambda e: e[0]))

    def failed(self, exc: Exception) -> None:
        """A pass that raised: say it once, and read everything again next pass."""
        self._fingerprint = ()
        text = f"{type(exc).__name__}: {exc}"
        if text != self._failure:
            self._failure = text
            log.error("reading the DAG folder %s failed: %s", self.folder, text, exc_info=exc)
            self.say(printable(f"error: reading the DAG folder failed ({text}); tried again"))

    async def refresh(self, store: Store) -> bool:
        # Pools are part of what a file is checked against: creating a missing
        # pool through the API makes the file load without touching it.
        sizes = {p.name: p.slots for p in await store.list_pools()}
        pools = tuple(sorted(sizes.items()))  # a pool grown lets a file load again
        # Off the loop: a dbt project's load may run `dbt parse` for seconds, and a
        # blocked loop misses its lease renewals and steps the scheduler down.
        secrets = None
        if self._secret_names is not None:
            secrets = tuple(sorted(await asyncio.to_thread(self._secret_names)))
        fingerprint = (*await asyncio.to_thread(self._scan), ("pools", pools), secrets)
        if fingerprint == self._fingerprint:
            return False
        self._fingerprint = fingerprint
        options = LoadOptions(
            known_pools=set(sizes),
            pool_sizes=sizes,
            passthrough=self.options.passthrough,
            dbt=self.options.dbt,
            known_secrets=secrets,
            secrets_where=self.options.secrets_where,
        )
        result = await asyncio.to_thread(load_dag_folder, self.folder, options)
        # One file may use a pool another declares: while a pass creates pools, files
        # that failed load again knowing them. The fingerprint counts the new pools, so
        # the next pass need not load again.
        while [p for d in result.dags.values() for p in await add_declared_pools(store, d.spec)]:
            sizes = {p.name: p.slots for p in await store.list_pools()}
            pools = tuple(sorted(sizes.items()))
            self._fingerprint = (*fingerprint[:-2], ("pools", pools), secrets)
            if not result.errors:
                break
            options = replace(options, known_pools=set(sizes), pool_sizes=sizes)
            result = await asyncio.to_thread(load_dag_folder, self.folder, options)
        errors = {str(err.path): str(err) for err in result.errors}
        for path, text in errors.items():
            if self._errors.get(path) != text:
                self.say(f"error: DAG file skipped, other DAGs keep running:\n{text}")
            await store.set_dag_error(path, text)
        for path in set(self._errors) - set(errors):
            self.say(printable(f"fixed: {path} loads again"))
            await store.set_dag_error(path, None)
        self._errors = errors
        broken_paths = set(errors)
        kept = {
            dag_id: loaded
            for dag_id, loaded in self.good.items()
            if str(loaded.path) in broken_paths and dag_id not in result.dags
        }
        self.good = {**kept, **result.dags}
        self._dbt_dirs = watched_dirs(self.good.values())
        for loaded in result.dags.values():
            await record_dag(store, loaded)
            if loaded.spec.dag_id not in self._announced:
                self._announced.add(loaded.spec.dag_id)
                announce_ignored(loaded.spec, self.say)
        # DAGs applied through the API are not this folder's to retire.
        applied = [d.dag_id for d in await store.list_dags() if d.fileloc.startswith("api:")]
        await store.deactivate_dags_except([*self.good, *applied])
        return True


async def sync_dag_folder(watcher: DagFolderWatcher, store: Store, scheduler: Scheduler) -> None:
    """The folder's DAGs go into the store, the scheduler's one way in for DAGs; it
    is woken to read them when something changed.

    A pass that fails for any reason but the store's (a bug, the disk) is said and
    tried again at the next pass: the folder is the user's, never the process's end."""
    from leoflow.store.errors import StaleEpoch, StoreUnavailable

    try:
        changed = await watcher.refresh(store)
    except (StaleEpoch, StoreUnavailable):  # the store's: not one pass's fault
        raise
    except Exception as exc:
        watcher.failed(exc)
        return
    if changed:
        scheduler.wake()
