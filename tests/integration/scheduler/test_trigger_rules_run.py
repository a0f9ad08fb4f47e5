"""Trigger rules end to end in Lite: real subprocesses, a real SQLite store."""

from __future__ import annotations

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag, run_to_end


async def test_cleanup_runs_after_a_failure_and_an_alert_branch_is_skipped(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        """
dag_id: rules
tasks:
  extract: {command: "exit 3"}
  check: {command: "echo checked"}
  alert: {command: "echo never", depends_on: [check], trigger_rule: one_failed}
  page: {command: "echo never", depends_on: [alert]}
  on_extract_failure: {command: "echo handling", depends_on: [extract], trigger_rule: one_failed}
  cleanup:
    command: "echo cleaned"
    depends_on: [extract, page, on_extract_failure]
    trigger_rule: all_done
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "rules")
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert {t: ti.state for t, ti in tis.items()} == {
        "extract": TaskState.FAILED,
        "check": TaskState.SUCCESS,
        "alert": TaskState.SKIPPED,
        "page": TaskState.SKIPPED,  # the skip propagates through all_success
        "on_extract_failure": TaskState.SUCCESS,
        "cleanup": TaskState.SUCCESS,
    }
    assert tis["alert"].reason == "skipped"
    assert tis["alert"].message == "trigger rule one_failed can no longer be met: check"
    assert tis["alert"].try_number == 0  # never launched
    assert await store.read_log(tis["cleanup"].pk, 1) == b"cleaned\n"
    assert await store.read_log(tis["on_extract_failure"].pk, 1) == b"handling\n"
    cleanup_start, extract_end = tis["cleanup"].started_at, tis["extract"].ended_at
    assert cleanup_start is not None and extract_end is not None and cleanup_start >= extract_end
    # Airflow's rule: the only leaf (cleanup) succeeded, so the run succeeded.
    assert row.state is RunState.SUCCESS


async def test_a_failed_leaf_fails_the_run_even_when_cleanup_succeeds(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        """
dag_id: leafy
tasks:
  extract: {command: "exit 1"}
  load: {command: "echo never", depends_on: [extract]}
  cleanup: {command: "echo cleaned", depends_on: [extract], trigger_rule: all_done}
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "leafy")
    tis = {t.task_id: t.state for t in await store.list_task_instances(run_pk=row.pk)}
    assert tis == {
        "extract": TaskState.FAILED,
        "load": TaskState.UPSTREAM_FAILED,
        "cleanup": TaskState.SUCCESS,
    }
    assert row.state is RunState.FAILED
