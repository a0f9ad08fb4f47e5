"""Each DAG's GC anchor ConfigMap on the fake apiserver: every task pod is owned by it,
it is made once per DAG, a 409 is fine, a refusal is a clear launch error, deleting
it deletes its pods (the fake's garbage collector, as a cluster's), and the start-up
sweep deletes the anchors of DAGs that no longer exist with one LIST."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leoflow.domain.execution import LaunchError
from leoflow.kube.client import KubeClient
from leoflow.kube.dag_anchor import anchor_manifest, anchor_name
from leoflow.kube.executor import KubernetesExecutor
from tests.fakekube import FakeApiServer, RequestInfo
from tests.integration.kube.conftest import TASK_NS, Reports, launch_for

CM = ("create", "", "configmaps")


def _configmaps(info: RequestInfo) -> bool:
    return info.resource == "configmaps"


def _owners(server: FakeApiServer, name: str) -> list[dict[str, Any]]:
    pod = server.pod(TASK_NS, name)
    assert pod is not None, name
    refs: list[dict[str, Any]] = pod["metadata"].get("ownerReferences") or []
    return refs


def _anchor(server: FakeApiServer, dag_id: str) -> dict[str, Any] | None:
    return server.store.get("configmaps", TASK_NS, anchor_name(dag_id))


async def test_every_pod_is_owned_by_its_dags_anchor_made_once_per_dag(
    server: FakeApiServer, executor: KubernetesExecutor
) -> None:
    launches = [launch_for(pk, dag_id="sales") for pk in range(1, 6)]
    launches.append(launch_for(9, dag_id="billing"))
    await asyncio.gather(*(executor.launch(one) for one in launches))
    assert server.counts[CM] == 2  # one per DAG, not one per pod
    assert server.counts[("get", "", "configmaps")] == 0
    for dag_id, pks in (("sales", range(1, 6)), ("billing", [9])):
        anchor = _anchor(server, dag_id)
        assert anchor is not None
        assert anchor["data"]["dag_id"] == dag_id
        assert anchor["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "leoflow"
        for pk in pks:
            name = next(n for n in server.pod_names(TASK_NS) if n.endswith(f"-{pk}-1"))
            assert _owners(server, name) == [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": anchor_name(dag_id),
                    "uid": anchor["metadata"]["uid"],
                    "blockOwnerDeletion": False,
                }
            ]
    # More tries later in this scheduler's life cost no further anchor call.
    await executor.launch(launch_for(1, 2, dag_id="sales"))
    assert server.counts[CM] == 2


async def test_an_anchor_that_exists_already_is_read_back(
    server: FakeApiServer, kube: KubeClient, executor: KubernetesExecutor
) -> None:
    made = await kube.create_configmap(anchor_manifest("sales", TASK_NS))  # an earlier life
    await executor.launch(launch_for(1, dag_id="sales"))
    assert server.counts[CM] == 2  # ours, then the executor's 409
    assert server.counts[("get", "", "configmaps")] == 1
    (name,) = server.pod_names(TASK_NS)
    assert _owners(server, name)[0]["uid"] == made["metadata"]["uid"]


async def test_a_refused_anchor_is_a_clear_launch_error(
    server: FakeApiServer, executor: KubernetesExecutor
) -> None:
    server.fail_next(1, status=403, when=_configmaps, message="exceeded quota: configmaps")
    with pytest.raises(LaunchError) as err:
        await executor.launch(launch_for(1, dag_id="sales"))
    text = str(err.value)
    assert anchor_name("sales") in text and "'sales'" in text
    assert "exceeded quota" in text and "configmaps create and get" in text
    assert server.pod_names(TASK_NS) == []  # no pod without its owner
    assert executor.in_flight == 0
    await executor.launch(launch_for(1, 2, dag_id="sales"))  # refused once, not cached
    assert len(server.pod_names(TASK_NS)) == 1


async def test_an_anchor_create_without_an_answer_is_ridden_out(
    server: FakeApiServer, executor: KubernetesExecutor
) -> None:
    server.fail_next(2, status=503, when=_configmaps)
    await executor.launch(launch_for(1, dag_id="sales"))
    assert server.counts[CM] == 3
    assert len(server.pod_names(TASK_NS)) == 1


async def test_deleting_the_anchor_deletes_its_pods_and_only_its_pods(
    server: FakeApiServer, kube: KubeClient, executor: KubernetesExecutor
) -> None:
    for pk in (1, 2, 3):
        await executor.launch(launch_for(pk, dag_id="sales"))
    await executor.launch(launch_for(4, dag_id="billing"))
    assert len(server.pod_names(TASK_NS)) == 4
    assert await kube.delete_configmap(anchor_name("sales")) is True
    await server.wait_until(lambda: len(server.pod_names(TASK_NS)) == 1)
    (left,) = server.pod_names(TASK_NS)
    assert left.endswith("-4-1")
    assert sorted(n for _, _, n in server.registry.gc.deleted) == sorted(
        n for n in (f"lf-sales-extract-{pk}-1" for pk in (1, 2, 3))
    )


async def test_the_sweep_deletes_orphans_with_one_list_and_keeps_the_rest(
    server: FakeApiServer, kube: KubeClient, executor: KubernetesExecutor, reports: Reports
) -> None:
    kept = await kube.create_configmap(anchor_manifest("sales", TASK_NS))
    await kube.create_configmap(anchor_manifest("gone", TASK_NS))
    server.reset_counts()
    executor.keep_dags({"sales", "billing"})
    await server.wait_until(lambda: _anchor(server, "gone") is None)
    assert server.counts[("list", "", "configmaps")] == 1
    # The kept anchor's uid came with the list: launching costs no anchor call.
    await executor.launch(launch_for(1, dag_id="sales"))
    assert server.counts[CM] == 0
    (name,) = server.pod_names(TASK_NS)
    assert _owners(server, name)[0]["uid"] == kept["metadata"]["uid"]
    # A DAG gone later: its anchor goes (and the pod with it), no second LIST; not
    # while a try of it is in flight, but as soon as that try has ended.
    executor.keep_dags({"billing"})
    await executor.cancel(1, 1, "the test")
    await server.wait_until(
        lambda: _anchor(server, "sales") is None and not server.pod_names(TASK_NS)
    )
    assert server.counts[("list", "", "configmaps")] == 1
    assert (await reports.wait_finished()).ti_pk == 1


async def test_the_pod_watch_stays_the_only_watch(
    server: FakeApiServer, kube: KubeClient, executor: KubernetesExecutor
) -> None:
    await kube.create_configmap(anchor_manifest("old", TASK_NS))
    for pk in range(1, 4):
        await executor.launch(launch_for(pk, dag_id=f"dag{pk}"))
    executor.keep_dags({"dag1"})  # dag2 and dag3 have tries in flight: kept for now
    await server.wait_until(lambda: _anchor(server, "old") is None)
    assert _anchor(server, "dag2") is not None
    watches = {key for key in server.counts if key[0] == "watch"}
    assert watches == {("watch", "", "pods")}
    assert server.open_watches == 1


async def test_an_anchor_deleted_behind_our_back_is_made_again(
    server: FakeApiServer, kube: KubeClient, executor: KubernetesExecutor, reports: Reports
) -> None:
    await executor.launch(launch_for(1, dag_id="sales"))
    await kube.delete_configmap(anchor_name("sales"))  # kubectl delete, say
    lost = await reports.wait_finished(lambda e: e.ti_pk == 1)
    assert lost.reason == "lost"
    # Its pod went with the anchor: the cached uid is stale, so it is asked for again,
    # and the next try's pod is owned by an anchor that exists (the GC leaves it be).
    await executor.launch(launch_for(1, 2, dag_id="sales"))
    assert server.counts[CM] == 2
    anchor = _anchor(server, "sales")
    assert anchor is not None
    (name,) = server.pod_names(TASK_NS)
    assert _owners(server, name)[0]["uid"] == anchor["metadata"]["uid"]
    assert server.registry.gc.deleted == [("pods", TASK_NS, "lf-sales-extract-1-1")]
