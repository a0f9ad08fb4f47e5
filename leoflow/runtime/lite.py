"""Lite's two recipes over one runtime: ``run_dag`` drives one run to completion
(``leoflow run``); ``serve`` is the long-running ``leoflow lite``: it watches a DAG
folder, creates cron runs and keeps going when a file breaks."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leoflow.aio.waits import wait_set
from leoflow.dagfile.loader import LoadedDag, check_pools, load_options
from leoflow.dbt.project import expander
from leoflow.domain.execution import Executor
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.domain.words import plural
from leoflow.runtime.assembly import Closer, Runtime, open_runtime
from leoflow.runtime.dagfolder import (
    DagFolderWatcher,
    add_declared_pools,
    record_dag,
    sync_dag_folder,
)
from leoflow.runtime.lease import StartupError
from leoflow.runtime.parts import IMAGE_EXECUTORS
from leoflow.scheduler.mirror import TaskMirror
from leoflow.secrets import DirectorySecrets
from leoflow.settings import Settings
from leoflow.store import Store, StoreError
from leoflow.store.rows import RunRow, TaskChange

log = logging.getLogger("leoflow.lite")

STOPPED_MESSAGE = "cancelled: leoflow run was stopped (SIGTERM or Ctrl-C)"


async def run_dag(
    settings: Settings,
    loaded: LoadedDag,
    *,
    executor_name: str,
    conf: dict[str, Any] | None = None,
    watch: Callable[[Runtime], None] | None = None,
    stop: asyncio.Event | None = None,
    executor: Executor | None = None,
) -> tuple[RunRow, Runtime]:
    """Run one DAG once, to completion or until ``stop`` is set; the caller closes
    the returned runtime. ``watch`` sees the runtime before the run starts."""
    runtime = await open_runtime(settings, executor_name, solo=True, executor=executor)
    try:
        check_pools(loaded, [p.name for p in await runtime.store.list_pools()])
        for name, slots in (await add_declared_pools(runtime.store, loaded.spec)).items():
            runtime.scheduler.set_pool(name, slots)
        dag_id = loaded.spec.dag_id
        await record_dag(runtime.store, loaded, adhoc=True)  # the scheduler reads it there
        # The scheduler parses its own copy from the store (YAML gives types JSON does
        # not); a caller that passed its only reference lets this one go (~1 KB a task).
        del loaded
        if watch is not None:
            watch(runtime)
        await runtime.scheduler.start()
        row = await runtime.scheduler.trigger(dag_id, conf=conf)
        final = await _wait_or_stop(runtime, row, stop)
    except BaseException:
        await runtime.close()
        raise
    return final, runtime


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


async def serve(
    settings: Settings,
    folder: Path,
    *,
    executor_name: str = "agent",
    say: Callable[[str], None] = print,
    api: bool = True,
) -> None:
    """``leoflow lite``: schedule the folder's DAGs until SIGINT/SIGTERM.

    With the default agent endpoint, its agents dial a Unix socket in a directory only
    Lite's user may enter (``early_agent``), not a loopback port any local user may
    connect to."""
    if executor_name == "docker":
        from leoflow.runtime.engine import engine_problem

        problem = await engine_problem(settings)
        if problem is not None:
            raise StartupError(problem)
    from leoflow.runtime.early_agent import early_agent

    async with early_agent(settings, executor_name) as (settings, agent):
        await _serve(settings, folder, executor_name, say, api, agent)


async def _serve(
    settings: Settings,
    folder: Path,
    executor_name: str,
    say: Callable[[str], None],
    api: bool,
    agent: Executor | None,
) -> None:
    runtime = await open_runtime(settings, executor_name, executor=agent)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    secrets = DirectorySecrets(settings.resolved_secrets_dir)
    in_pods = executor_name in IMAGE_EXECUTORS
    options = load_options(
        executor_name,
        settings.task_pod_passthrough,
        dbt=expander(settings.home / "dbt-cache", in_pods=in_pods),
        secrets_where=secrets.describe(),
    )
    watcher = DagFolderWatcher(folder, options, say, secret_names=secrets.names)
    try:
        await sync_dag_folder(watcher, runtime.store, runtime.scheduler)
        await runtime.scheduler.start()
        if api:
            runtime.closers.append(await _start_api(settings, runtime, say))
        say(
            f"leoflow lite: {plural(len(watcher.good), 'DAG')} from {folder}, state in "
            f"{settings.resolved_database_url}; Ctrl-C stops"
        )
        while not stop.is_set():
            await wait_set(stop, settings.scheduler_poll_interval)
            if runtime.scheduler.failure is not None:
                raise runtime.scheduler.failure
            if runtime.lease is not None and runtime.lease.lost:
                raise StartupError("lost the store's lease (could not renew it): stopping")
            await sync_dag_folder(watcher, runtime.store, runtime.scheduler)
    finally:
        runtime.store.space.closed = True  # stopping: a full disk must not hold the exit
        await runtime.close()
        say("leoflow lite: stopped; " + describe_interrupted(runtime.scheduler.interrupted))


async def _start_api(settings: Settings, runtime: Runtime, say: Callable[[str], None]) -> Closer:
    from leoflow.api.server import ApiConfigError, start_api_in_process

    try:
        return await start_api_in_process(
            settings, runtime.store, say, notify=runtime.scheduler.wake
        )
    except ApiConfigError as exc:
        raise StartupError(str(exc)) from exc


def describe_killed(interrupted: list[TaskMirror]) -> str:
    """``3 running task(s) killed (a, b, c)``: what stopping did to the live tries."""
    if not interrupted:
        return "no task was running"
    names = ", ".join(sorted(ti.task_id for ti in interrupted)[:5])
    more = "" if len(interrupted) <= 5 else f" and {len(interrupted) - 5} more"
    return f"{plural(len(interrupted), 'running task')} killed ({names}{more})"


def describe_interrupted(interrupted: list[TaskMirror]) -> str:
    if not interrupted:
        return describe_killed(interrupted)
    return (
        describe_killed(interrupted) + "; the next start runs them again without spending a retry"
    )
