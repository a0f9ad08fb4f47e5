"""A backfill through the Kubernetes executor on the fake apiserver: each run's pod
is told its logical date and data interval."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.backfill import plan_backfill
from leoflow.domain.states import RunState
from leoflow.runtime.assembly import open_runtime
from leoflow.runtime.dagfolder import record_dag
from leoflow.store.backfills import create_backfill, get_backfill
from tests.fakekube import FakeApiServer, FakeKubelet

from .conftest import TASK_NS, kube_lite_settings
from .test_e2e_trigger_rules import finalize_subprocess_transports  # noqa: F401 - autouse

DAG = """
dag_id: kube_backfill
schedule: "0 6 * * *"
max_active_runs: 5
tasks:
  load:
    command: ["sh", "-c", "echo date=$LEOFLOW_LOGICAL_DATE from=$LEOFLOW_DATA_INTERVAL_START"]
"""


async def test_backfill_pods_get_the_logical_date(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = kube_lite_settings(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))
    points = plan_backfill(
        loaded.spec,
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 3, 12, tzinfo=UTC),
        datetime.now(UTC),
    )

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        runtime = await open_runtime(settings, "kubernetes")
        try:
            await record_dag(runtime.store, loaded)
            runtime.scheduler.register_dags({loaded.spec.dag_id: loaded.spec})
            await runtime.scheduler.start()
            backfill = await create_backfill(
                runtime.store,
                dag_id="kube_backfill",
                range_start=points[0].logical_date,
                range_end=points[-1].logical_date,
                points=[p.logical_date for p in points],
                reprocess_failed=False,
                max_active_runs=2,
                created_by="test",
            )
            runtime.scheduler.wake()

            async def ended() -> None:
                while True:
                    row = await get_backfill(runtime.store, backfill.pk)
                    if row is not None and row.state != "running":
                        return
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(ended(), 90)
            row = await get_backfill(runtime.store, backfill.pk)
            assert row is not None and row.state == "success", row
            runs = await runtime.store.list_runs(dag_id="kube_backfill")
            assert len(runs) == 3 and all(r.state is RunState.SUCCESS for r in runs)
            for run in runs:
                (ti,) = await runtime.store.list_task_instances(run_pk=run.pk)
                log = (await runtime.store.read_log(ti.pk, 1)).decode()
                assert run.logical_date is not None
                date = datetime.fromtimestamp(run.logical_date, UTC)
                before = datetime.fromtimestamp(run.logical_date - 86400, UTC)
                assert f"date={date.isoformat()} from={before.isoformat()}" in log, log
        finally:
            await runtime.close()
    assert len(server.pod_names(TASK_NS)) == 3
