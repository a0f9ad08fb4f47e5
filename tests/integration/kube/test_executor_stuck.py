"""Pods that will never start by themselves: every kubelet waiting reason that needs a
change from outside fails the try at once (not after ``pod_pending_timeout``), and the
delete promised in its message is sent even when the executor stops right after."""

from __future__ import annotations

import pytest

from leoflow.kube.client import KubeClient
from leoflow.kube.pod import pod_name
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome
from tests.fakekube.faults import RequestInfo

from .conftest import TASK_NS, Reports, launch_for
from .test_executor import DELETE, start_executor

NAME = pod_name("nightly_sales", "extract", 1, 1)


@pytest.mark.parametrize(
    ("reason", "told", "words"),
    [
        ("ErrImageNeverPull", "image_pull", "pull policy of Never"),
        ("ErrImagePull", "image_pull", "not found"),
        ("InvalidImageName", "image_pull", "invalid reference format"),
        ("CreateContainerConfigError", "launch_failed", 'secret "warehouse" not found'),
        ("CreateContainerError", "launch_failed", "could not be created"),
        ("RunContainerError", "launch_failed", "could not be started"),
    ],
)
async def test_a_waiting_reason_that_needs_a_change_fails_at_once(
    server: FakeApiServer, kube: KubeClient, reports: Reports, reason: str, told: str, words: str
) -> None:
    # pod_pending_timeout an hour: only the waiting reason can end the try in the test.
    ex = await start_executor(kube, reports, pod_pending_timeout=3600.0)
    try:
        async with FakeKubelet(server, default=Outcome.waiting(reason)):
            await ex.launch(launch_for(1))
            finished = await reports.wait_finished()
            assert finished.reason == told
            assert reason in finished.message and words in finished.message
            assert "the pod was deleted" in finished.message
            await server.wait_for_pod(TASK_NS, NAME, lambda p: p is None)
    finally:
        await ex.stop()


async def test_normal_waits_are_not_failures(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, pod_pending_timeout=3600.0)
    try:
        async with FakeKubelet(server, default=Outcome.waiting("ContainerCreating")):
            await ex.launch(launch_for(1))
            await server.wait_for_pod(
                TASK_NS, NAME, lambda p: p is not None and p["status"].get("containerStatuses")
            )
            ex.reap()
            assert reports.finished() == []
            assert ex.in_flight == 1
    finally:
        await ex.stop()


def _deletes(info: RequestInfo) -> bool:
    return info.verb == "delete" and info.resource == "pods"


async def test_stop_sends_the_delete_it_promised(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    """``leoflow run --executor kubernetes`` stops its executor as soon as the last try
    is reported; a try whose image cannot be pulled is reported before its pod's delete
    is answered. Here the first DELETE meets a 503, so the delete is still retrying
    when the executor stops: it must be sent again, not cancelled with the pod left."""
    ex = await start_executor(kube, reports, pod_pending_timeout=3600.0)
    server.fail_next(1, 503, when=_deletes, message="etcd leader changed")
    async with FakeKubelet(server, default=Outcome.waiting("ErrImageNeverPull")):
        await ex.launch(launch_for(1))
        finished = await reports.wait_finished()
        assert finished.reason == "image_pull"
        await ex.stop()
        assert server.pod(TASK_NS, NAME) is None, "the promised delete was never sent"
    assert server.counts[DELETE] == 2
