"""Lite's real path: the scheduler, the gRPC endpoint and one warm `leoflow agent --pool`."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.protocol.agent_v1 import method_path, pb
from leoflow.runtime.assembly import Runtime, open_runtime
from leoflow.runtime.dagfolder import record_dag
from leoflow.settings import load_settings


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[Runtime] = []

    async def open_with(text: str, **overrides: Any) -> Runtime:
        (tmp_path / "secrets").mkdir(exist_ok=True)
        settings = load_settings(
            home=tmp_path,
            scheduler_poll_interval=0.2,
            secrets_dir=tmp_path / "secrets",
            **overrides,
        )
        rt = await open_runtime(settings, "agent", solo=True)
        opened.append(rt)
        loaded = LoadedDag(parse_dag(text, tmp_path / "dag.yaml"), tmp_path / "dag.yaml", text)
        await record_dag(rt.store, loaded)
        await rt.scheduler.start()
        return rt

    yield open_with
    for rt in opened:
        await rt.close()


async def test_tasks_run_through_the_agent_with_their_env_and_output(runtime: Any) -> None:
    rt = await runtime(
        """
dag_id: via_agent
tasks:
  hello:
    env: {GREETING: bonjour}
    command: 'echo "$GREETING from $LEOFLOW_TASK_ID try $LEOFLOW_TRY_NUMBER"; echo oops >&2'
  after: {command: "exit 4", depends_on: [hello]}
"""
    )
    row = await rt.scheduler.trigger("via_agent")
    final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 30)
    assert final.state is RunState.FAILED
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    log = await rt.store.read_log(tis["hello"].pk, 1)
    assert b"bonjour from hello try 1\n" in log
    assert b"oops\n" in log
    assert tis["hello"].executor_ref is not None and tis["hello"].executor_ref.startswith("proc:")
    assert tis["after"].state is TaskState.FAILED
    assert tis["after"].exit_code == 4


async def test_declared_secrets_reach_the_command_and_undeclared_ones_do_not(
    runtime: Any, tmp_path: Path
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "warehouse_password").write_text("s3cret")
    (tmp_path / "secrets" / "other_team_key").write_text("not yours")
    rt = await runtime(
        """
dag_id: secretive
tasks:
  uses:
    secrets: [warehouse_password]
    command: >-
      echo "len=${#LEOFLOW_SECRET_WAREHOUSE_PASSWORD}";
      echo "other=${LEOFLOW_SECRET_OTHER_TEAM_KEY:-none}"
  missing:
    secrets: [not_there]
    command: "echo never"
"""
    )
    row = await rt.scheduler.trigger("secretive")
    await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 30)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    assert tis["uses"].state is TaskState.SUCCESS
    log = await rt.store.read_log(tis["uses"].pk, 1)
    assert log == b"len=6\nother=none\n"
    assert tis["missing"].state is TaskState.FAILED
    assert tis["missing"].message is not None and "not_there" in tis["missing"].message
    assert b"never" not in await rt.store.read_log(tis["missing"].pk, 1)


async def test_a_task_whose_agent_stops_heartbeating_is_failed_as_lost(runtime: Any) -> None:
    rt = await runtime(
        "dag_id: hb\ntasks:\n  t: {command: 'sleep 60'}\n",
        heartbeat_interval=0.2,
        heartbeat_timeout=1.0,
    )
    row = await rt.scheduler.trigger("hb")
    ti = rt.scheduler.book.runs[row.pk].tasks["t"]
    for _ in range(500):
        if ti.state is TaskState.RUNNING:
            break
        await asyncio.sleep(0.02)
    agent = rt.executor._process
    os.kill(agent.pid, signal.SIGSTOP)  # frozen: alive, but silent
    try:
        final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 30)
    finally:
        os.kill(agent.pid, signal.SIGCONT)
    assert final.state is RunState.FAILED
    (done,) = await rt.store.list_task_instances(run_pk=row.pk)
    assert done.reason == "lost"
    assert done.message is not None and done.message.startswith(
        "no heartbeat from the task's agent"
    )


async def test_the_pool_agents_tickets_stay_out_of_the_store_and_work_once(
    runtime: Any, tmp_path: Path
) -> None:
    # Lite's pool agent dials only this process: its tickets are kept in memory, with
    # the store's rules. A replay or a forgery at the endpoint is refused as before.
    rt = await runtime(
        "dag_id: tickets\ntasks:\n  a: {command: 'true'}\n  b: {command: 'true', depends_on: [a]}\n"
    )
    issued: list[str] = []
    launch = rt.executor.launch

    async def capture(what: Any) -> None:
        issued.append(what.ticket)
        await launch(what)

    rt.executor.launch = capture
    row = await rt.scheduler.trigger("tickets")
    final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 30)
    assert final.state is RunState.SUCCESS
    assert len(issued) == 2 and all(issued)
    with sqlite3.connect(tmp_path / "leoflow.db") as db:
        assert db.execute("SELECT count(*) FROM tickets").fetchone() == (0,)

    async with grpc.aio.insecure_channel(rt.executor.agent_endpoint) as channel:
        exchange = channel.unary_unary(
            method_path("Exchange"),
            request_serializer=pb.ExchangeRequest.SerializeToString,
            response_deserializer=pb.ExchangeResponse.FromString,
        )
        for ticket, code, said in (
            (issued[0], grpc.StatusCode.PERMISSION_DENIED, "already used"),
            ("forged-" + issued[1][7:], grpc.StatusCode.UNAUTHENTICATED, "unknown ticket"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await exchange(pb.ExchangeRequest(ticket=ticket), timeout=10)
            assert refused.value.code() is code
            assert said in (refused.value.details() or "")
