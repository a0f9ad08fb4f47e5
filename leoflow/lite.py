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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoflow.dagfile.loader import (
    DagFileError,
    LoadedDag,
    LoadOptions,
    Problem,
    lite_ignored_fields,
    load_dag_file,
    load_dag_folder,
)
from leoflow.dbt.project import expander
from leoflow.domain.dag import DEFAULT_POOL, DagSpec
from leoflow.domain.execution import Executor
from leoflow.domain.printable import printable
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.secrets import DirectorySecrets
from leoflow.settings import Settings
from leoflow.store import Store, StoreError
from leoflow.store.rows import RunRow, TaskChange

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
    # Lite's hold on the store's lease (None for `leoflow run`, which takes no office).
    lease: Any = None

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

        return SubprocessExecutor(task_user=settings.task_user)
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
        max_catchup_runs=settings.max_catchup_runs,
        retention=settings.retention,
    )


async def open_runtime(settings: Settings, executor_name: str, *, solo: bool = False) -> Runtime:
    """Store, executor, scheduler and (for agent-based executors) the agent endpoint.

    ``solo`` (``leoflow run``) drives only its own run and takes no office, so it
    can share the database with a running ``leoflow lite``.
    """
    settings.home.mkdir(parents=True, exist_ok=True)
    store = await Store.open(settings.resolved_database_url)
    lease: LiteLease | None = None
    try:
        for name, slots in settings.pools.items():
            await store.upsert_pool(name, slots)
        pools = {p.name: p.slots for p in await store.list_pools()}
        executor = make_executor(settings, executor_name)
        lease = None if solo else await _claim_lease(settings, store)
        epoch = (
            None if solo else await store.take_office(settings.identity or f"lite-{os.getpid()}")
        )
        config = scheduler_config(settings, pools, solo=solo)
        scheduler = Scheduler(store, executor, config, epoch=epoch)
        scheduler.notifications.secrets = DirectorySecrets(settings.resolved_secrets_dir)
        closers: list[Callable[[], Any]] = []
        if lease is not None:
            closers.append(lease.close)
        if executor.uses_agent:
            from leoflow.scheduler.agent_service import start_agent_service

            service = await start_agent_service(settings, store, scheduler, executor)
            closers.append(service.close)
            warm = getattr(executor, "warm", None)
            if warm is not None:
                await warm()
    except BaseException:
        if lease is not None:
            await lease.close()
        await store.close()
        raise
    return Runtime(settings, store, scheduler, executor, closers, lease)


class LiteLease:
    """Lite's hold on the store's lease, renewed in the background, so a
    ``leoflow scheduler`` pointed at the same store does not lead beside it."""

    def __init__(self, elector: Any) -> None:
        self.elector = elector
        self.keeper = asyncio.create_task(elector.keep(), name="leoflow-lite-lease")

    @property
    def lost(self) -> bool:
        return self.keeper.done()

    async def close(self) -> None:
        self.keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.keeper
        await self.elector.release()


async def _claim_lease(settings: Settings, store: Store) -> LiteLease:
    from leoflow.store.leader import (
        DbElectionConfig,
        LeaseHeld,
        claim_or_refuse,
        default_identity,
    )

    election = settings.leader_election
    config = DbElectionConfig(
        identity=settings.identity or default_identity(),
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
    )
    try:
        elector = await claim_or_refuse(store, config, settings.resolved_database_url)
    except LeaseHeld as exc:
        raise StartupError(str(exc)) from None
    return LiteLease(elector)


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
    stop: asyncio.Event | None = None,
) -> tuple[RunRow, Runtime]:
    """Run one DAG once, to completion or until ``stop`` is set; the caller closes
    the returned runtime."""
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
        final = await _wait_or_stop(runtime, row, stop)
    except BaseException:
        await runtime.close()
        raise
    return final, runtime


STOPPED_MESSAGE = "cancelled: leoflow run was stopped (SIGTERM or Ctrl-C)"


async def _wait_or_stop(runtime: Runtime, row: RunRow, stop: asyncio.Event | None) -> RunRow:
    if stop is None:
        return await runtime.scheduler.wait_run(row.pk)
    finished = asyncio.ensure_future(runtime.scheduler.wait_run(row.pk))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({finished, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if finished.done():
        return finished.result()
    finished.cancel()
    runtime.store.space.closed = True  # stopping: a full disk must not hold the exit
    await runtime.scheduler.stop()
    try:
        return await fail_stopped_run(runtime.store, row)
    except StoreError as exc:
        log.error("the stopped run could not be marked failed: %s", exc)
        return row


async def fail_stopped_run(store: Store, row: RunRow) -> RunRow:
    """``leoflow run`` stopped: its run is local, nobody will resume it, so it fails
    now and every unfinished task says why (a new ``leoflow run`` starts afresh)."""
    now = time.time()
    why = STOPPED_MESSAGE
    changes = [
        TaskChange(ti.pk, ti.state, TaskState.FAILED, ti.try_number,
                   {"ended_at": now, "reason": "cancelled", "message": why})
        for ti in await store.list_task_instances(run_pk=row.pk)
        if ti.state not in TASK_TERMINAL
    ]  # fmt: skip
    if changes:
        await store.transition_tasks(changes, epoch=None)
    current = await store.get_run(row.pk)
    if current is not None and current.state not in RUN_TERMINAL:
        await store.transition_run(
            row.pk, current.state, RunState.FAILED, epoch=None, ended_at=now, message=why
        )
    return await store.get_run(row.pk) or row


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
        # A file removed or made unreadable mid-scan is seen again on the next pass;
        # it must not stop the scheduler.
        with contextlib.suppress(OSError):
            if self.folder.exists():
                for path in sorted(self.folder.rglob("*")):
                    if path.suffix in (".yaml", ".yml") and path.is_file():
                        with contextlib.suppress(OSError):
                            stat = path.stat()
                            entries.append((str(path), stat.st_mtime, stat.st_size))
        return tuple(entries)

    async def refresh(self, store: Store) -> bool:
        # Pools are part of what a file is checked against: creating a missing
        # pool through the API makes the file load without touching it.
        pools = tuple(sorted(p.name for p in await store.list_pools()))
        # Off the loop: a dbt project's load may run `dbt parse` for seconds, and a
        # blocked loop misses its lease renewals and steps the scheduler down.
        fingerprint = (*await asyncio.to_thread(self._scan), ("pools", pools))
        if fingerprint == self._fingerprint:
            return False
        self._fingerprint = fingerprint
        options = LoadOptions(
            known_pools=set(pools), passthrough=self.options.passthrough, dbt=self.options.dbt
        )
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
            if runtime.lease is not None and runtime.lease.lost:
                raise StartupError("lost the store's lease (could not renew it): stopping")
            if await watcher.refresh(runtime.store):
                dags = await runtime.store.list_dags()
                paused = {d.dag_id for d in dags if d.paused}
                runtime.scheduler.register_dags(
                    {k: v.spec for k, v in watcher.good.items()}, paused
                )
    finally:
        runtime.store.space.closed = True  # stopping: a full disk must not hold the exit
        await runtime.close()
        say("leoflow lite: stopped; " + describe_interrupted(runtime.scheduler.interrupted))


def describe_killed(interrupted: list[Any]) -> str:
    """``3 running task(s) killed (a, b, c)``: what stopping did to the live tries."""
    if not interrupted:
        return "no task was running"
    names = ", ".join(sorted(ti.task_id for ti in interrupted)[:5])
    more = "" if len(interrupted) <= 5 else f" and {len(interrupted) - 5} more"
    return f"{len(interrupted)} running task(s) killed ({names}{more})"


def describe_interrupted(interrupted: list[Any]) -> str:
    if not interrupted:
        return describe_killed(interrupted)
    return (
        describe_killed(interrupted) + "; the next start runs them again without spending a retry"
    )
