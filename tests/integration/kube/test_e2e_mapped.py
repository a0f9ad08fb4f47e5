"""Outputs and mapped tasks through the Kubernetes executor on the fake apiserver: the
pod agent sends its task's output with the completion, each item of a mapped task is
its own pod whose command sees LEOFLOW_MAP_ITEM, and a failed item is retried alone."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.lite import run_dag
from tests.fakekube import FakeApiServer, FakeKubelet

from .conftest import TASK_NS, kube_lite_settings

pytestmark = pytest.mark.slow  # end to end through pods and real agents


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


PRODUCE = (
    "import json, os; json.dump(['a', 'b', 'c', 'd'], open(os.environ['LEOFLOW_OUTPUT'], 'w'))"
)
EACH = (
    'echo "item $LEOFLOW_MAP_ITEM index $LEOFLOW_MAP_INDEX"; '
    '[ "$LEOFLOW_MAP_INDEX" = 2 ] && [ "$LEOFLOW_TRY_NUMBER" = 1 ] && exit 3; '
    'echo "{\\"seen\\": $LEOFLOW_MAP_ITEM}" > "$LEOFLOW_OUTPUT"'
)
DAG = f"""
dag_id: kube_mapped
tasks:
  list_items:
    command: [{json.dumps(sys.executable)}, "-c", {json.dumps(PRODUCE)}]
  each:
    depends_on: [list_items]
    map_over: {{output: list_items}}
    retries: 1
    command: ["sh", "-c", {json.dumps(EACH)}]
  gather:
    depends_on: [each]
    command: ["sh", "-c", 'echo "got $LEOFLOW_INPUT_EACH"']
"""


async def test_each_item_is_its_own_pod_and_a_failed_item_is_retried_alone(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = kube_lite_settings(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        final, runtime = await asyncio.wait_for(
            run_dag(settings, loaded, executor_name="kubernetes"), 120
        )
        try:
            assert final.state is RunState.SUCCESS
            tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
            assert set(tis) == {"list_items", "each[0]", "each[1]", "each[2]", "each[3]", "gather"}
            assert all(ti.state is TaskState.SUCCESS for ti in tis.values())
            assert {t: tis[f"each[{i}]"].try_number for i, t in enumerate("abcd")} == {
                "a": 1, "b": 1, "c": 2, "d": 1,
            }  # fmt: skip
            for index, item in enumerate("abcd"):
                log = await runtime.store.read_log(tis[f"each[{index}]"].pk, 1)
                assert f'item "{item}" index {index}'.encode() in log
                assert tis[f"each[{index}]"].map_item == json.dumps(item)
            gathered = await runtime.store.read_log(tis["gather"].pk, 1)
            expected = [{"seen": item} for item in "abcd"]
            line = gathered.decode().strip().removeprefix("got ")
            assert json.loads(line) == expected
        finally:
            await runtime.close()

    names = set(server.pod_names(TASK_NS))
    # list_items, four items, the retried item's second try, gather: one pod per try.
    assert len(names) == 7, names
    assert sum("each" in name for name in names) == 5, names
