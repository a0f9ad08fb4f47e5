"""Lite: the whole of Leoflow in one process on one host.

``run_dag`` drives one run to completion (``leoflow run``); ``serve`` is the
long-running ``leoflow lite``: it watches a DAG folder, creates cron runs and
keeps going when a file breaks. Both wire the same scheduler core the
Kubernetes deployment uses; only the executor differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoflow.dbt.project import expander
from leoflow.domain.dag import DEFAULT_POOL, DagSpec
from leoflow.domain.execution import Executor
from leoflow.domain.loader import (
    DagFileError,
    LoadedDag,
    LoadOptions,
    Problem,
    lite_ignored_fields,
    load_dag_file,
    load_dag_folder,
)
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.rows import RunRow

log = logging.getLogger("leoflow.lite")


class StartupError(Exception):
    """Lite cannot start as configured; the message says which setting to change."""


@dataclass
class Runtime:
    settings: Settings
    store: Store
    scheduler: Scheduler
    executor: Executor
    closers: list[Callable[[], Any]]

    async def close(self) -> None:
        await self.scheduler.stop()
        for closer in reversed(self.closers):
            result = closer()
            if asyncio.iscoroutine(result):
                await result
        await self.store.close()


def make_executor(settings: Settings, name: str) -> Executor:
    if name == "subprocess":
        from leoflow.executor.subprocess import SubprocessExecutor

        return SubprocessExecutor()
    if name == "agent":
        from leoflow.executor.local_agent import LocalAgentExecutor

        return LocalAgentExecutor(settings)
    if name == "kubernetes":
        from leoflow.kube.executor import KubernetesExecutor

        return KubernetesExecutor(settings)
    raise ValueError(f"unknown executor {name!r}")


def scheduler_config(
    settings: Settings, pools: dict[str, int], *, solo: bool = False
) -> SchedulerConfig:
    return SchedulerConfig(
        parallelism=settings.parallelism,
        pools={**settings.pools, **pools},
        default_pool_slots=settings.default_pool_slots,
        poll_interval=settings.scheduler_poll_interval,
        heartbeat_timeout=settings.heartbeat_timeout,
        ticket_ttl=settings.ticket_ttl,
        identity=settings.identity or f"lite-{os.getpid()}",
        solo=solo,
    )


async def open_runtime(settings: Settings, executor_name: str, *, solo: bool = False) -> Runtime:
    """Store, executor, scheduler and (for agent-based executors) the agent endpoint.

    ``solo`` (``leoflow run``) drives only its own run and takes no office, so it
    can share the database with a running ``leoflow lite``.
    """
    settings.home.mkdir(parents=True, exist_ok=True)
    store = await Store.open(settings.resolved_database_url)
    try:
        for name, slots in settings.pools.items():
            await store.upsert_pool(name, slots)
        pools = {p.name: p.slots for p in await store.list_pools()}
        executor = make_executor(settings, executor_name)
        epoch = (
            None if solo else await store.take_office(settings.identity or f"lite-{os.getpid()}")
        )
        config = scheduler_config(settings, pools, solo=solo)
        scheduler = Scheduler(store, executor, config, epoch=epoch)
        closers: list[Callable[[], Any]] = []
        if executor.uses_agent:
            from leoflow.scheduler.agent_service import start_agent_service

            service = await start_agent_service(settings, store, scheduler, executor)
            closers.append(service.close)
            warm = getattr(executor, "warm", None)
            if warm is not None:
                await warm()
    except BaseException:
        await store.close()
        raise
    return Runtime(settings, store, scheduler, executor, closers)


def spec_hash(spec: DagSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


async def record_dag(store: Store, loaded: LoadedDag) -> None:
    await store.upsert_dag(
        loaded.spec.dag_id,
        fileloc=str(loaded.path),
        spec_json=loaded.spec.model_dump_json(),
        spec_hash=spec_hash(loaded.spec),
        source=loaded.source,
    )
    await store.set_dag_error(str(loaded.path), None)


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


async def run_dag(
    settings: Settings,
    loaded: LoadedDag,
    *,
    executor_name: str,
    conf: dict[str, Any] | None = None,
    watch: Callable[[Scheduler], None] | None = None,
) -> tuple[RunRow, Runtime]:
    """Run one DAG once, to completion; the caller closes the returned runtime."""
    runtime = await open_runtime(settings, executor_name, solo=True)
    try:
        known = set(runtime.scheduler.config.pools) | {DEFAULT_POOL}
        missing = sorted(loaded.spec.pools() - known)
        if missing:
            raise DagFileError(
                loaded.path,
                [
                    Problem(
                        f"tasks.{task_id}.pool",
                        f"unknown pool {task.pool!r} (pools: {', '.join(sorted(known))}); "
                        "define it in the settings (pools) or through the API",
                    )
                    for task_id, task in loaded.spec.tasks.items()
                    if task.pool in missing
                ],
            )
        await record_dag(runtime.store, loaded)
        runtime.scheduler.register_dags({loaded.spec.dag_id: loaded.spec})
        if watch is not None:
            watch(runtime.scheduler)
        await runtime.scheduler.start()
        row = await runtime.scheduler.trigger(loaded.spec.dag_id, conf=conf)
        final = await runtime.scheduler.wait_run(row.pk)
    except BaseException:
        await runtime.close()
        raise
    return final, runtime


class DagFolderWatcher:
    """Re-reads the DAG folder when a file changes; bad files are reported and skipped.

    A file that breaks keeps its DAG's last good definition in the scheduler
    and in the store: nothing stored is lost or changed by a bad file.
    """

    def __init__(self, folder: Path, options: LoadOptions, say: Callable[[str], None]) -> None:
        self.folder = folder
        self.options = options
        self.say = say
        self._fingerprint: tuple[object, ...] = ()
        self._errors: dict[str, str] = {}
        self.good: dict[str, LoadedDag] = {}
        self._announced: set[str] = set()

    def _scan(self) -> tuple[tuple[str, float, int], ...]:
        entries = []
        if self.folder.exists():
            for path in sorted(self.folder.rglob("*")):
                if path.suffix in (".yaml", ".yml") and path.is_file():
                    stat = path.stat()
                    entries.append((str(path), stat.st_mtime, stat.st_size))
        return tuple(entries)

    async def refresh(self, store: Store) -> bool:
        # Pools are part of what a file is checked against: creating a missing
        # pool through the API makes the file load without touching it.
        pools = tuple(sorted(p.name for p in await store.list_pools()))
        fingerprint = (*self._scan(), ("pools", pools))
        if fingerprint == self._fingerprint:
            return False
        self._fingerprint = fingerprint
        options = LoadOptions(
            known_pools=set(pools), passthrough=self.options.passthrough, dbt=self.options.dbt
        )
        result = load_dag_folder(self.folder, options)
        errors = {str(err.path): str(err) for err in result.errors}
        for path, text in errors.items():
            if self._errors.get(path) != text:
                self.say(f"error: DAG file skipped, other DAGs keep running:\n{text}")
            await store.set_dag_error(path, text)
        for path in set(self._errors) - set(errors):
            self.say(f"fixed: {path} loads again")
            await store.set_dag_error(path, None)
        self._errors = errors
        broken_paths = set(errors)
        kept = {
            dag_id: loaded
            for dag_id, loaded in self.good.items()
            if str(loaded.path) in broken_paths and dag_id not in result.dags
        }
        self.good = {**kept, **result.dags}
        for loaded in result.dags.values():
            await record_dag(store, loaded)
            if loaded.spec.dag_id not in self._announced:
                self._announced.add(loaded.spec.dag_id)
                announce_ignored(loaded.spec, self.say)
        # DAGs applied through the API are not this folder's to retire.
        applied = [d.dag_id for d in await store.list_dags() if d.fileloc.startswith("api:")]
        await store.deactivate_dags_except([*self.good, *applied])
        return True


async def serve(
    settings: Settings,
    folder: Path,
    *,
    executor_name: str = "agent",
    say: Callable[[str], None] = print,
    api: bool = True,
) -> None:
    """``leoflow lite``: schedule the folder's DAGs until SIGINT/SIGTERM."""
    runtime = await open_runtime(settings, executor_name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watcher = DagFolderWatcher(folder, LoadOptions(dbt=expander(settings.home / "dbt-cache")), say)
    try:
        await watcher.refresh(runtime.store)
        dags = await runtime.store.list_dags()
        paused = {d.dag_id for d in dags if d.paused}
        runtime.scheduler.register_dags({k: v.spec for k, v in watcher.good.items()}, paused)
        await runtime.scheduler.start()
        if api:
            from leoflow.api.server import ApiConfigError, start_api_in_process

            try:
                close_api = await start_api_in_process(
                    settings, runtime.store, say, notify=runtime.scheduler.wake
                )
            except ApiConfigError as exc:
                raise StartupError(str(exc)) from exc
            runtime.closers.append(close_api)
        say(
            f"leoflow lite: {len(watcher.good)} DAG(s) from {folder}, state in "
            f"{settings.resolved_database_url}; Ctrl-C stops"
        )
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.scheduler_poll_interval)
            if runtime.scheduler.failure is not None:
                raise runtime.scheduler.failure
            if await watcher.refresh(runtime.store):
                dags = await runtime.store.list_dags()
                paused = {d.dag_id for d in dags if d.paused}
                runtime.scheduler.register_dags(
                    {k: v.spec for k, v in watcher.good.items()}, paused
                )
    finally:
        say("leoflow lite: stopping")
        await runtime.close()
