"""The CLI over the API, as a subprocess against a live server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.api.app import create_app
from leoflow.api.server import RunningApi, start_server
from leoflow.store import Store
from leoflow.store.clears import pending_clears
from tests.integration.api.conftest import DAG_YAML, TOKENS, make_auth, make_settings
from tests.integration.api.seed import seed

pytestmark = pytest.mark.slow  # the real CLI in subprocesses


@pytest.fixture
async def live(store: Store, tmp_path: Path) -> AsyncIterator[RunningApi]:
    app = create_app(store, make_settings(tmp_path), auth=make_auth(), log_poll_interval=0.05)
    running = await start_server(app, "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


async def cli(
    live: RunningApi, *argv: str, role: str = "admin", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    base.update({"LEOFLOW_SERVER": live.url, "LEOFLOW_TOKEN": TOKENS[role], **(env or {})})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "leoflow", *argv,
        env=base, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_dags_apply_list_pause(live: RunningApi, store: Store, tmp_path: Path) -> None:
    good = tmp_path / "etl.yaml"
    good.write_text(DAG_YAML)
    bad = tmp_path / "bad.yaml"
    bad.write_text("dag_id: bad\ntasks:\n  a:\n    command: x\n    colour: red\n")
    code, out, err = await cli(live, "dags", "apply", str(good), str(bad))
    assert code == 1
    assert "etl: created (3 tasks)" in out
    assert f"{bad}:5: tasks.a.colour: unknown field" in err
    assert await store.get_dag("bad") is None

    code, out, _ = await cli(live, "dags", "list", role="viewer")
    assert code == 0
    assert out.splitlines()[0].split() == ["DAG", "PAUSED", "SCHEDULE", "TASKS", "ACTIVE", "FROM"]
    assert out.splitlines()[1].split()[:4] == ["etl", "no", "-", "3"]

    code, out, _ = await cli(live, "dags", "pause", "etl", role="operator")
    assert (code, out.strip()) == (0, "etl: paused")
    code, _, err = await cli(live, "trigger", "etl", role="operator")
    assert code == 1 and "409" in err and "paused" in err
    code, out, _ = await cli(live, "dags", "unpause", "etl", "--json", role="operator")
    assert json.loads(out)["paused"] is False


async def test_trigger_runs_tasks_why_cancel(live: RunningApi, store: Store) -> None:
    await seed(store)
    code, out, _ = await cli(
        live, "trigger", "etl", "--conf", '{"day": 1}', "--run-id", "mine", role="operator"
    )
    assert (code, out.strip()) == (0, "triggered etl run mine (queued)")
    run = await store.find_run("etl", "mine")
    assert run is not None and run.conf == {"day": 1}

    code, out, _ = await cli(live, "runs", "--dag", "etl", "--json", role="viewer")
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["mine", "q", "r"]
    code, out, err = await cli(live, "runs", "--limit", "1", role="viewer")
    assert out.splitlines()[1].split()[:3] == ["etl", "mine", "queued"]
    assert "(more: --before" in err

    code, out, _ = await cli(live, "tasks", "etl", "r", role="viewer")
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert rows == {"extract": "success", "transform": "failed", "load": "upstream_failed"}

    code, out, _ = await cli(live, "tasks", "why", "etl", "r", "transform", role="viewer")
    assert (code, out.strip()) == (0, "transform (failed): finished: failed")

    code, out, _ = await cli(live, "cancel", "etl", "mine", role="operator")
    assert code == 0 and "failed (cancelled by operator)" in out


async def test_clear_pools_logs_and_errors(live: RunningApi, store: Store) -> None:
    await seed(store)
    code, out, _ = await cli(
        live, "clear", "etl", "r", "transform", "--downstream", role="operator"
    )
    assert (code, out.strip()) == (0, "cleared load, transform; run r is running")
    # The run is running now: a clear is a request the scheduler applies.
    code, out, _ = await cli(live, "clear", "etl", "r", "extract", "--downstream", role="operator")
    assert code == 0 and out.startswith("clear of extract, load, transform requested (request 1)")
    pending = await pending_clears(store)
    assert [(r.task_id, r.downstream, r.requested_by) for r in pending] == [
        ("extract", True, "operator")
    ]

    code, out, _ = await cli(live, "pools", "set", "gpu", "7", "--description", "GPUs")
    assert (code, out.strip()) == (0, "pool gpu: 7 slots (0 occupied)")
    code, out, _ = await cli(live, "pools", "set", "tpu", "3")
    assert (code, out.strip()) == (0, "pool tpu: 3 slots (0 occupied)")
    code, out, _ = await cli(live, "pools", role="viewer")
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == ["default_pool", "gpu", "tpu", "warehouse"]
    code, out, _ = await cli(live, "pools", "delete", "tpu")
    assert (code, out.strip()) == (0, "pool tpu: deleted")
    assert {p.name: p.slots for p in await store.list_pools()} == {"gpu": 7}

    code, out, _ = await cli(live, "logs", "etl", "r", "extract", role="operator")
    assert (code, out) == (0, "hello\nworld\n")

    code, _, err = await cli(live, "trigger", "nope", role="operator")
    assert code == 1 and err.strip() == "leoflow: 404: no DAG 'nope'"
    code, _, err = await cli(live, "pools", "set", "x", "1", role="operator")
    assert code == 1 and "403" in err and "needs admin" in err
    code, _, err = await cli(live, "runs", env={"LEOFLOW_TOKEN": "wrong"})
    assert code == 1 and "401" in err
    code, _, err = await cli(live, "runs", env={"LEOFLOW_SERVER": "http://127.0.0.1:9"})
    assert code == 1 and "cannot reach the API" in err


async def test_server_and_token_flags_beat_the_environment(live: RunningApi, store: Store) -> None:
    await seed(store)
    code, out, _ = await cli(
        live, "runs", "--json", "--server", live.url, "--token", TOKENS["viewer"],
        env={"LEOFLOW_SERVER": "http://127.0.0.1:9", "LEOFLOW_TOKEN": "wrong"},
    )  # fmt: skip
    assert code == 0 and len(json.loads(out)["runs"]) == 2


async def test_the_cli_sees_the_guards_refusals(
    live: RunningApi, store: Store, tmp_path: Path
) -> None:
    await seed(store)
    big = tmp_path / "big.yaml"
    big.write_text(DAG_YAML + "#" * (2 * 1024 * 1024) + "\n")
    code, _, err = await cli(live, "dags", "apply", str(big))
    assert code == 1
    assert "413" in err and "LEOFLOW_API_DAG_BODY_LIMIT" in err, err
    code, _, err = await cli(live, "trigger", "etl", "--conf", '{"x": NaN}', role="operator")
    # Refused before it is sent, as strictly as the API would (which says 422).
    assert code == 1 and "--conf is not JSON: NaN" in err, err
    assert {r.run_id for r in await store.list_runs(dag_id="etl", limit=100)} == {"r", "q"}
