"""The simulated kubelet: real commands, scripted outcomes, graceful deletion, lost pods."""

from __future__ import annotations

import sys
from typing import Any

from kubernetes_asyncio import watch

from tests.fakekube import FakeApiServer, FakeKubelet, Outcome

from .conftest import NS, pod_manifest

JsonObj = dict[str, Any]


def phase_in(*phases: str) -> Any:
    def check(pod: JsonObj | None) -> bool:
        return pod is not None and pod["status"].get("phase") in phases

    return check


def gone(pod: JsonObj | None) -> bool:
    return pod is None


async def events_until_deleted(v1: Any, name: str, rv: str) -> list[tuple[str, JsonObj]]:
    """The pod's watch events from ``rv`` up to and including its DELETED."""
    out: list[tuple[str, JsonObj]] = []
    async with watch.Watch() as w:
        async for event in w.stream(
            v1.list_namespaced_pod,
            NS,
            field_selector=f"metadata.name={name}",
            resource_version=rv,
        ):
            out.append((event["type"], event["raw_object"]))
            if event["type"] == "DELETED":
                return out
    return out


def terminated(pod: JsonObj) -> JsonObj:
    [status] = pod["status"]["containerStatuses"]
    state: JsonObj = status["state"]["terminated"]
    return state


async def test_runs_the_command_with_env_and_records_the_log(
    v1: Any, server: FakeApiServer
) -> None:
    script = (
        "import os, sys; print('hello', os.environ['POD_NAME'], os.environ['POD_UID']); sys.exit(3)"
    )
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    ]
    created = await v1.create_namespaced_pod(
        NS, pod_manifest("cmd", command=[sys.executable, "-c", script], env=env)
    )
    async with FakeKubelet(server, run_commands=True):
        pod = await server.wait_for_pod(NS, "cmd", phase_in("Succeeded", "Failed"))
    assert pod is not None
    assert pod["spec"]["nodeName"] == "fake-node-1"
    assert pod["status"]["phase"] == "Failed"
    state = terminated(pod)
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    assert state["startedAt"] and state["finishedAt"]
    log = await v1.read_namespaced_pod_log("cmd", NS)
    assert log == f"hello cmd {created.metadata.uid}\n"


async def test_exit_zero_is_succeeded_completed(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("ok", command=["true"]))
    async with FakeKubelet(server, run_commands=True):
        pod = await server.wait_for_pod(NS, "ok", phase_in("Succeeded", "Failed"))
    assert pod is not None and pod["status"]["phase"] == "Succeeded"
    assert terminated(pod)["reason"] == "Completed"


async def test_missing_executable_is_start_error(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("nox", command=["/nonexistent/leoflow"]))
    async with FakeKubelet(server, run_commands=True):
        pod = await server.wait_for_pod(NS, "nox", phase_in("Failed"))
    assert pod is not None
    assert (terminated(pod)["exitCode"], terminated(pod)["reason"]) == (128, "StartError")


async def test_watch_sees_the_lifecycle(v1: Any, server: FakeApiServer) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("life"))
    async with FakeKubelet(server, default=Outcome.succeed()):
        await server.wait_for_pod(NS, "life", phase_in("Succeeded"))
    phases: list[tuple[str, str, bool]] = []
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod, NS, resource_version=created.metadata.resource_version
        )
        async for event in stream:
            pod = event["raw_object"]
            phases.append(
                (event["type"], pod["status"]["phase"], bool(pod["spec"].get("nodeName")))
            )
            if pod["status"]["phase"] == "Succeeded":
                break
    assert phases == [
        ("MODIFIED", "Pending", True),  # bound
        ("MODIFIED", "Running", True),
        ("MODIFIED", "Succeeded", True),
    ]


async def test_scripted_oom_killed(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("oom", labels={"task": "big"}))
    kubelet = FakeKubelet(server)
    kubelet.script(Outcome.oom_killed(), labels={"task": "big"})
    async with kubelet:
        pod = await server.wait_for_pod(NS, "oom", phase_in("Failed"))
    assert pod is not None
    assert (terminated(pod)["exitCode"], terminated(pod)["reason"]) == (137, "OOMKilled")


async def test_scripted_failure_with_exit_code_and_log(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("bad"))
    kubelet = FakeKubelet(server)
    kubelet.script(Outcome.fail(exit_code=2, log="boom\n"), name="bad")
    async with kubelet:
        pod = await server.wait_for_pod(NS, "bad", phase_in("Failed"))
    assert pod is not None and terminated(pod)["exitCode"] == 2
    assert await v1.read_namespaced_pod_log("bad", NS) == "boom\n"


async def test_scripted_eviction_has_no_terminated_container(
    v1: Any, server: FakeApiServer
) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("ev"))
    async with FakeKubelet(server, default=Outcome.evicted()):
        pod = await server.wait_for_pod(NS, "ev", phase_in("Failed"))
    assert pod is not None
    assert pod["status"]["reason"] == "Evicted"
    assert all("terminated" not in cs["state"] for cs in pod["status"]["containerStatuses"])


async def test_image_pull_backoff_stays_pending_until_deleted(
    v1: Any, server: FakeApiServer
) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("pull"))
    async with FakeKubelet(server, default=Outcome.image_pull_backoff()):

        def backing_off(pod: JsonObj | None) -> bool:
            statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
            return bool(statuses) and "waiting" in statuses[0]["state"]

        pod = await server.wait_for_pod(NS, "pull", backing_off)
        assert pod is not None and pod["status"]["phase"] == "Pending"
        [cs] = pod["status"]["containerStatuses"]
        assert cs["state"]["waiting"]["reason"] == "ImagePullBackOff"
        # bound, so the delete is graceful; the kubelet finishes it
        deleting = await v1.delete_namespaced_pod("pull", NS)
        assert deleting.metadata.deletion_grace_period_seconds == 30
        assert await server.wait_for_pod(NS, "pull", gone) is None


async def test_graceful_delete_sends_sigterm_then_removes_the_pod(
    v1: Any, server: FakeApiServer
) -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    await v1.create_namespaced_pod(
        NS, pod_manifest("term", command=[sys.executable, "-c", script], grace=20)
    )
    async with FakeKubelet(server, run_commands=True):
        await server.wait_for_log(NS, "term", "ready")
        deleting = await v1.delete_namespaced_pod("term", NS)
        assert deleting.metadata.deletion_grace_period_seconds == 20
        events = await events_until_deleted(v1, "term", deleting.metadata.resource_version)
    # kubelet: terminal status, then its own grace-0 delete (MODIFIED, DELETED)
    assert [t for t, _ in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    final = events[-1][1]
    assert final["status"]["phase"] == "Failed"
    assert terminated(final)["exitCode"] == 7
    assert final["metadata"]["deletionGracePeriodSeconds"] == 0
    assert "got TERM" in server.store.logs[(NS, "term", "task")]


async def test_sigkill_after_the_grace_period(v1: Any, server: FakeApiServer) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    await v1.create_namespaced_pod(
        NS, pod_manifest("stubborn", command=[sys.executable, "-c", script], grace=1)
    )
    async with FakeKubelet(server, run_commands=True):
        await server.wait_for_log(NS, "stubborn", "up")
        deleting = await v1.delete_namespaced_pod("stubborn", NS)
        events = await events_until_deleted(v1, "stubborn", deleting.metadata.resource_version)
    assert terminated(events[-1][1])["exitCode"] == 137  # 128 + SIGKILL


async def test_lose_force_deletes_the_pod(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("lost", command=["sleep", "60"]))
    kubelet = FakeKubelet(server, run_commands=True)
    async with kubelet:
        await server.wait_for_pod(NS, "lost", phase_in("Running"))
        assert kubelet.lose(NS, "lost")
        assert server.pod(NS, "lost") is None
    assert not kubelet.lose(NS, "lost")


async def test_never_start_stays_pending(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("stuck"))
    kubelet = FakeKubelet(server)
    kubelet.script(Outcome.never_start(), name="stuck")
    async with kubelet:
        pod = await server.wait_for_pod(
            NS, "stuck", lambda p: bool(p and p["status"].get("containerStatuses"))
        )
    assert pod is not None and pod["status"]["phase"] == "Pending"
    assert (
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    )
