"""KubernetesExecutor over the fake apiserver and kubelet: launch, 409, terminal recovery
(OOM, eviction, exit codes), image pull, pending timeout, config errors, lost pods, the
apiserver going away, GC, cancel, adopt, and the apiserver cost of N running tasks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leoflow.domain.execution import Attempt, LaunchError, LogData
from leoflow.kube.client import KubeClient
from leoflow.kube.executor import KubernetesExecutor
from leoflow.kube.pod import pod_name
from leoflow.kube.records import OOM_MESSAGE
from leoflow.settings import TaskPodSecurity
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome

from .conftest import TASK_NS, Reports, launch_for, make_settings

CREATE = ("create", "", "pods")
DELETE = ("delete", "", "pods")
LIST = ("list", "", "pods")
WATCH = ("watch", "", "pods")
GET = ("get", "", "pods")


def name_of(ti_pk: int, try_number: int = 1, task_id: str = "extract") -> str:
    return pod_name("nightly_sales", task_id, ti_pk, try_number)


def phase_is(*phases: str) -> Any:
    return lambda p: p is not None and p["status"].get("phase") in phases


async def start_executor(kube: KubeClient, reports: Reports, **settings: Any) -> KubernetesExecutor:
    ex = KubernetesExecutor(
        make_settings(**settings),
        client=kube,
        reap_interval=0.05,
        agent_grace=0.1,
        backoff_base=0.05,
        backoff_cap=0.2,
    )
    await ex.start(reports)
    assert ex.cache is not None and await ex.cache.wait_synced(timeout=60)
    return ex


async def test_launch_twice_is_one_pod(server: FakeApiServer, executor: KubernetesExecutor) -> None:
    await executor.launch(launch_for(1))
    await executor.launch(launch_for(1))  # a retry of the same dispatch, or a restart
    assert server.pod_names(TASK_NS) == [name_of(1)]
    assert server.counts[CREATE] == 2, "the second create was a 409, not a second pod"
    await executor.launch(launch_for(1, try_number=2))
    assert sorted(server.pod_names(TASK_NS)) == sorted([name_of(1), name_of(1, 2)])


async def test_launch_refused_by_pod_security_is_a_launch_error(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(
        kube, reports, task_pod_security=TaskPodSecurity(run_as_non_root=False)
    )
    try:
        with pytest.raises(LaunchError, match="restricted"):
            await ex.launch(launch_for(1))
        assert ex.in_flight == 0
    finally:
        await ex.stop()


async def test_field_not_allowed_is_a_launch_error(executor: KubernetesExecutor) -> None:
    with pytest.raises(LaunchError, match="tolerations"):
        await executor.launch(
            launch_for(1, execution={"tolerations": [{"key": "k", "operator": "Exists"}]})
        )


async def test_oom_killed_without_agent_report(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    kubelet = FakeKubelet(server, default=Outcome.oom_killed())
    async with kubelet:
        await executor.launch(launch_for(1))
        finished = await reports.wait_finished()
    assert (finished.ti_pk, finished.try_number) == (1, 1)
    assert (finished.reason, finished.exit_code) == ("oom", 137)
    assert finished.message == OOM_MESSAGE


async def test_exit_code_and_success(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    kubelet = FakeKubelet(server)
    kubelet.script(
        Outcome.fail(exit_code=3, log="leoflow agent: could not reach the control plane\n"),
        labels={"leoflow.io/ti": "2"},
    )
    async with kubelet:
        await executor.launch(launch_for(1))
        await executor.launch(launch_for(2))
        ok = await reports.wait_finished(lambda e: e.ti_pk == 1)
        bad = await reports.wait_finished(lambda e: e.ti_pk == 2)
    assert (ok.reason, ok.exit_code) == ("success", 0)
    assert (bad.reason, bad.exit_code) == ("exit_code", 3)
    assert "control plane" in bad.message
    # The agent could not ship its output, so its container log becomes the try's log,
    # reported before the outcome (one pods/log GET, only for such a pod).
    logs = [e for e in reports.events if isinstance(e, LogData) and e.ti_pk == 2]
    assert len(logs) == 1
    assert logs[0].data.endswith(b"leoflow agent: could not reach the control plane\n")
    assert reports.events.index(logs[0]) < reports.events.index(bad)
    assert not [e for e in reports.events if isinstance(e, LogData) and e.ti_pk == 1]
    assert server.counts[("get", "", "pods/log")] == 1


async def test_evicted(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    async with FakeKubelet(server, default=Outcome.evicted(message="The node was low on memory")):
        await executor.launch(launch_for(1))
        finished = await reports.wait_finished()
    assert finished.reason == "evicted"
    assert "The node was low on memory" in finished.message


async def test_image_pull_failure_reports_and_deletes(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    async with FakeKubelet(server, default=Outcome.image_pull_backoff()):
        await executor.launch(launch_for(1))
        finished = await reports.wait_finished()
        assert finished.reason == "image_pull"
        assert "ImagePullBackOff" in finished.message
        await server.wait_for_pod(TASK_NS, name_of(1), lambda p: p is None)
    assert server.counts[DELETE] == 1


async def test_create_container_config_error(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    message = (
        "container has runAsNonRoot and image has non-numeric user (app), cannot verify "
        "user is non-root"
    )

    def stuck(status: dict[str, Any]) -> None:
        status["containerStatuses"] = [
            {
                "name": "task",
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}},
                "ready": False,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
            }
        ]

    await executor.launch(launch_for(1))
    server.registry.mutate_status(TASK_NS, name_of(1), stuck)
    finished = await reports.wait_finished()
    assert finished.reason == "launch_failed"
    assert message in finished.message and "USER numeric" in finished.message
    await server.wait_for_pod(
        TASK_NS, name_of(1), lambda p: p is None or p["metadata"].get("deletionTimestamp")
    )


async def test_pending_timeout_reports_and_deletes(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, pod_pending_timeout=0.3)
    try:
        async with FakeKubelet(server, default=Outcome.never_start()):
            await ex.launch(launch_for(1))
            finished = await reports.wait_finished()
            assert finished.reason == "pending_timeout"
            assert "Pending" in finished.message and "ContainerCreating" in finished.message
            await server.wait_for_pod(TASK_NS, name_of(1), lambda p: p is None)
    finally:
        await ex.stop()


async def test_lost_pod_after_grace(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    kubelet = FakeKubelet(server, default=Outcome.succeed(after=60))
    async with kubelet:
        await executor.launch(launch_for(1))
        await server.wait_for_pod(TASK_NS, name_of(1), phase_is("Running"))
        assert kubelet.lose(TASK_NS, name_of(1))
        finished = await reports.wait_finished()
    assert finished.reason == "lost"
    assert name_of(1) in finished.message and "pod_lost_grace" in finished.message


async def test_apiserver_gone_then_back_judges_nothing_lost_meanwhile(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    """Gone for many lost-graces: nothing is judged while the cache is not synced; once
    it is back, the cache converges and only the pod that really vanished is lost."""
    ex = await start_executor(kube, reports, pod_lost_grace=0.2)
    assert ex.cache is not None
    kubelet = FakeKubelet(server, default=Outcome.succeed(after=120))
    try:
        async with kubelet:
            for ti in (1, 2, 3):
                await ex.launch(launch_for(ti))
            for ti in (1, 2, 3):
                await server.wait_for_pod(TASK_NS, name_of(ti), phase_is("Running"))
            await server.go_away("refuse")
            assert await ex.cache.wait_synced(False, timeout=10)
            assert kubelet.lose(TASK_NS, name_of(2))  # the node dies while we cannot see
            # 15 lost-graces pass (3 s) with the apiserver unreachable.
            await asyncio.sleep(3.0)
            assert reports.finished() == [], "nothing judged lost from an unsynced cache"
            await server.come_back()
            assert await ex.cache.wait_synced(timeout=60)
            lost = await reports.wait_finished()
            assert (lost.ti_pk, lost.reason) == (2, "lost")
            assert {r.name for r in ex.cache.pods()} == {name_of(1), name_of(3)}
            await asyncio.sleep(0.5)  # well past the grace: still only one verdict
            assert [e.ti_pk for e in reports.finished()] == [2]
    finally:
        await ex.stop()


async def test_gc_deletes_each_terminal_pod_once(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, pod_gc_age=0.2)
    try:
        async with FakeKubelet(server):
            for ti in range(1, 6):
                await ex.launch(launch_for(ti))
            for ti in range(1, 6):
                await server.wait_for_pod(TASK_NS, name_of(ti), lambda p: p is None)
            # One more terminal update of an already-deleted pod must not delete again.
            await asyncio.sleep(0.3)
        assert sorted(ex.gc_deleted) == sorted(name_of(ti) for ti in range(1, 6))
        assert server.counts[DELETE] == 5
        assert len(reports.finished()) == 5
    finally:
        await ex.stop()


async def test_gc_waits_for_the_age(
    server: FakeApiServer, executor: KubernetesExecutor, reports: Reports
) -> None:
    async with FakeKubelet(server):
        await executor.launch(launch_for(1))
        await reports.wait_finished()
    assert server.pod_names(TASK_NS) == [name_of(1)], "pod_gc_age is an hour here"
    assert server.counts[DELETE] == 0


async def test_cancel_deletes_with_the_tasks_grace(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(
        kube, reports, task_pod_passthrough="termination_grace_period_seconds"
    )
    try:
        async with FakeKubelet(server, default=Outcome.succeed(after=60)):
            await ex.launch(launch_for(1, execution={"termination_grace_period_seconds": 7}))
            await server.wait_for_pod(TASK_NS, name_of(1), phase_is("Running"))
            seen: list[Any] = []

            def deleting(p: Any) -> bool:
                if p is not None and p["metadata"].get("deletionTimestamp"):
                    seen.append(p["metadata"].get("deletionGracePeriodSeconds"))
                    return True
                return p is None

            waiter = asyncio.create_task(server.wait_for_pod(TASK_NS, name_of(1), deleting))
            await ex.cancel(1, 1, "the user asked")
            await waiter
            finished = await reports.wait_finished()
        assert seen == [7]
        assert finished.ti_pk == 1
    finally:
        await ex.stop()


async def test_adopt_after_restart(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    kubelet = FakeKubelet(server, default=Outcome.succeed(after=60))
    kubelet.script(Outcome.fail(exit_code=4, after=0.2), labels={"leoflow.io/ti": "2"})
    async with kubelet:
        first = await start_executor(kube, Reports())
        await first.launch(launch_for(1))
        await first.launch(launch_for(2))
        await first.stop()
        await server.wait_for_pod(TASK_NS, name_of(2), phase_is("Failed"))
        second = await start_executor(kube, reports)
        try:
            attempts = [
                Attempt(ti, 1, "running", "nightly_sales", "r", "extract", None) for ti in (1, 2, 3)
            ]
            alive = await second.adopt(attempts)
            assert alive == {(1, 1), (2, 1)}, "3 never got a pod: not alive"
            finished = await reports.wait_finished()
            assert (finished.ti_pk, finished.reason, finished.exit_code) == (2, "exit_code", 4)
            assert second.in_flight == 1
        finally:
            await second.stop()


async def test_apiserver_cost_is_constant_in_running_tasks(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    """ADR 0054 §4 fixed: N running tasks cost one LIST, one open watch and no GETs."""
    ex = await start_executor(kube, reports)
    lists: dict[int, int] = {}
    try:
        async with FakeKubelet(server, default=Outcome.succeed(after=120)):
            launched = 0
            for n in (5, 25):
                while launched < n:
                    launched += 1
                    await ex.launch(launch_for(launched))
                for ti in range(1, n + 1):
                    await server.wait_for_pod(TASK_NS, name_of(ti), phase_is("Running"))
                server.reset_counts()
                await asyncio.sleep(1.0)  # 20 reaper passes, 10 bookmarks
                lists[n] = server.counts[LIST]
                assert server.counts[GET] == 0
                assert server.counts[CREATE] == 0 and server.counts[DELETE] == 0
                assert server.open_watches == 1
        assert lists == {5: 0, 25: 0}, "no LIST while tasks run, whatever their number"
        assert reports.finished() == []
    finally:
        await ex.stop()
    assert ex.cache is not None and ex.cache.lists == 1


async def test_cancel_of_a_try_not_in_flight_finds_its_pod(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    async with FakeKubelet(server, default=Outcome.succeed(after=60)):
        first = await start_executor(kube, Reports())
        await first.launch(launch_for(1))
        await server.wait_for_pod(TASK_NS, name_of(1), phase_is("Running"))
        await first.stop()
        second = await start_executor(kube, reports)
        try:
            await second.cancel(1, 1, "run cancelled")
            await server.wait_for_pod(TASK_NS, name_of(1), lambda p: p is None)
        finally:
            await second.stop()


async def test_gc_tries_a_failed_delete_again(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, pod_gc_age=0.1)
    try:
        server.fail_next(1, status=503, when=lambda info: info.verb == "delete")
        async with FakeKubelet(server):
            await ex.launch(launch_for(1))
            await server.wait_for_pod(TASK_NS, name_of(1), lambda p: p is None)
            await asyncio.sleep(0.2)  # the pod is gone before the delete's answer arrives
        assert server.counts[DELETE] == 2, "one 503, then the delete that worked"
        assert list(ex.gc_deleted) == [name_of(1)]
    finally:
        await ex.stop()
