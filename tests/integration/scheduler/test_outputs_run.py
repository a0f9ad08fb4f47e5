"""Small outputs between tasks through Lite's real paths: the scheduler, the gRPC
endpoint and a warm ``leoflow agent --pool`` (or direct children for ``--executor
subprocess``). A task writes JSON to ``$LEOFLOW_OUTPUT``; its downstream reads it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest

from leoflow.api.schemas import ti_out
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.assembly import Runtime
from tests.integration.scheduler.test_task_isolation import runtime

__all__ = ["runtime"]  # the fixture: Lite's runtime on the DAG text given

PY = json.dumps(sys.executable)
EXECUTORS = ["agent", "subprocess"]


async def _run(rt: Runtime, dag_id: str) -> tuple[Any, dict[str, Any]]:
    row = await rt.scheduler.trigger(dag_id)
    final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 90)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    return final, tis


def _writer(value: str) -> str:
    return json.dumps(f"import os; open(os.environ['LEOFLOW_OUTPUT'], 'w').write({value!r})")


READER = json.dumps(
    "import json, os\n"
    "d = os.environ['LEOFLOW_INPUTS_DIR']\n"
    "env = {k: v for k, v in os.environ.items() if k.startswith('LEOFLOW_INPUT')}\n"
    "files = {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}\n"
    "print(json.dumps({'env': env, 'files': files}))\n"
)


@pytest.mark.parametrize("executor", EXECUTORS)
async def test_a_downstream_reads_each_upstreams_output_as_env_and_file(
    runtime: Any, executor: str
) -> None:
    value = json.dumps({"rows": 3, "names": ["a", "ü"]})
    rt = await runtime(
        f"""
dag_id: outputs
tasks:
  load-2.b:
    command: [{PY}, "-c", {_writer(value)}]
  silent:
    command: "true"
  report:
    depends_on: [load-2.b, silent]
    command: [{PY}, "-c", {READER}]
""",
        executor=executor,
    )
    final, tis = await _run(rt, "outputs")
    assert final.state is RunState.SUCCESS
    assert json.loads(tis["load-2.b"].output) == {"rows": 3, "names": ["a", "ü"]}
    assert tis["silent"].output is None
    # The API shows the value itself, not its text.
    assert ti_out(tis["load-2.b"]).output == {"rows": 3, "names": ["a", "ü"]}
    seen = json.loads((await rt.store.read_log(tis["report"].pk, 1)).decode())
    env = seen["env"]
    inputs_dir = env.pop("LEOFLOW_INPUTS_DIR")
    assert os.path.basename(inputs_dir).startswith("leoflow-io-")  # the try's own
    assert env == {"LEOFLOW_INPUT_LOAD_2_B": value, "LEOFLOW_INPUT_SILENT": "null"}
    assert seen["files"] == {"load-2.b.json": value, "silent.json": "null"}
    # The try's scratch directory is removed once it ended: by the agent's scratch
    # thread, so soon after the end is recorded rather than before it.
    for _ in range(600):
        if not await asyncio.to_thread(os.path.exists, inputs_dir):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"{inputs_dir} outlived its try by 30 s")


@pytest.mark.parametrize("executor", EXECUTORS)
async def test_an_output_over_64_kb_fails_the_try_and_names_the_limit(
    runtime: Any, executor: str
) -> None:
    big = json.dumps(["x" * 1000] * 70)  # valid JSON, ~70 KB
    rt = await runtime(
        f"""
dag_id: too_big
tasks:
  up:
    command: [{PY}, "-c", {_writer(big)}]
  down:
    depends_on: [up]
    command: "true"
""",
        executor=executor,
    )
    final, tis = await _run(rt, "too_big")
    assert final.state is RunState.FAILED
    up = tis["up"]
    assert up.state is TaskState.FAILED and up.output is None
    assert up.reason == EndReason.OUTPUT_INVALID
    assert "65536 bytes (64 KB)" in (up.message or "")
    assert tis["down"].state is TaskState.UPSTREAM_FAILED


async def test_an_output_that_is_not_json_fails_the_try_with_the_parse_error(
    runtime: Any,
) -> None:
    rt = await runtime(
        f"""
dag_id: not_json
tasks:
  up:
    command: [{PY}, "-c", {_writer("{rows: 3")}]
""",
    )
    final, tis = await _run(rt, "not_json")
    assert final.state is RunState.FAILED
    assert tis["up"].reason == EndReason.OUTPUT_INVALID
    assert (tis["up"].message or "").startswith("the output is not valid JSON: ")


MAPPED_CONF = """
dag_id: by_conf
tasks:
  each:
    map_over: {conf: files}
    max_map_items: 3
    command: 'echo "$LEOFLOW_MAP_INDEX $LEOFLOW_MAP_ITEM"'
  after:
    depends_on: [each]
    command: "true"
"""


async def _run_with(rt: Runtime, conf: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    row = await rt.scheduler.trigger("by_conf", conf=conf)
    final = await asyncio.wait_for(rt.scheduler.wait_run(row.pk), 90)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    return final, tis


async def test_a_task_mapped_over_the_runs_conf(runtime: Any) -> None:
    rt = await runtime(MAPPED_CONF)
    final, tis = await _run_with(rt, {"files": ["a.csv", {"name": "b"}]})
    assert final.state is RunState.SUCCESS
    assert set(tis) == {"each[0]", "each[1]", "after"}
    assert tis["each[1]"].map_item == '{"name":"b"}'
    log = await rt.store.read_log(tis["each[1]"].pk, 1)
    assert log.decode().strip() == '1 {"name":"b"}'
    shown = ti_out(tis["each[1]"])
    assert (shown.map_index, shown.map_item) == (1, {"name": "b"})
    assert ti_out(tis["after"]).map_index is None
    # An empty list skips the mapped task (as Airflow does), and so its all_success downstream.
    final, tis = await _run_with(rt, {"files": []})
    assert final.state is RunState.SUCCESS
    assert (tis["each"].state, tis["after"].state) == (TaskState.SKIPPED, TaskState.SKIPPED)
    assert tis["each"].message == "map_over: conf key 'files' is empty, so no item runs"


async def test_a_conf_list_past_max_map_items_or_missing_fails_the_mapped_task(
    runtime: Any,
) -> None:
    rt = await runtime(MAPPED_CONF)
    final, tis = await _run_with(rt, {"files": [1, 2, 3, 4]})
    assert final.state is RunState.FAILED
    assert set(tis) == {"each", "after"}  # no item was made
    assert (tis["each"].state, tis["each"].reason) == (TaskState.FAILED, EndReason.MAP_FAILED)
    assert tis["each"].message == (
        "map_over: conf key 'files' has 4 items, more than max_map_items (3)"
    )
    assert tis["after"].state is TaskState.UPSTREAM_FAILED
    final, tis = await _run_with(rt, {})
    assert tis["each"].message == "map_over: the run's conf has no key 'files'"


async def test_inputs_over_1_mib_together_fail_the_downstream_at_launch(runtime: Any) -> None:
    write = "import os; open(os.environ['LEOFLOW_OUTPUT'], 'w').write('\"' + 'x' * 60000 + '\"')"
    rt = await runtime(
        f"""
dag_id: wide
tasks:
  each:
    map_over: {json.dumps(list(range(20)))}
    command: [{PY}, "-c", {json.dumps(write)}]
  gather:
    depends_on: [each]
    command: "true"
""",
        executor="subprocess",
    )
    final, tis = await _run(rt, "wide")
    assert final.state is RunState.FAILED
    assert all(tis[f"each[{i}]"].state is TaskState.SUCCESS for i in range(20))
    gather = tis["gather"]
    assert (gather.state, gather.reason) == (TaskState.FAILED, EndReason.LAUNCH_FAILED)
    assert "1200040 bytes together" in (gather.message or "")
