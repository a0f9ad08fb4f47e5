"""Notifications through the Kubernetes executor on the fake apiserver: a task whose
pod fails is reported to the webhook once, and the run ends as it would without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState
from leoflow.runtime.lite import run_dag
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.support.webhook import WebhookServer

from .conftest import TASK_NS, kube_lite_settings
from .test_e2e_trigger_rules import finalize_subprocess_transports  # noqa: F401 - autouse

DAG = """
dag_id: kube_notify
notify: [{events: [failure], webhook_secret: hook, format: slack}]
tasks:
  extract:
    command: ["sh", "-c", "exit 4"]
    notify: [{events: [failure], webhook_secret: hook}]
"""


async def test_a_failed_pod_is_notified_once(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = kube_lite_settings(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))
    async with WebhookServer() as hook:
        (tmp_path / "secrets" / "hook").write_text(hook.url)
        async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
            final, runtime = await asyncio.wait_for(
                run_dag(settings, loaded, executor_name="kubernetes"), 60
            )
            try:
                assert final.state is RunState.FAILED
                await hook.wait_for(lambda: len(hook.delivered()) >= 2)
            finally:
                await runtime.close()
    task = next(b for b in hook.delivered() if "event" in b)
    assert (task["event"], task["task_id"], task["try_number"]) == ("failure", "extract", 1)
    assert "exit" in task["message"] and "4" in task["message"]
    (run,) = [b["text"] for b in hook.delivered() if "text" in b]
    assert run.startswith(f"Leoflow: kube_notify: run {final.run_id} failed")
    assert len(hook.requests) == 2
