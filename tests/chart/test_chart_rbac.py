"""RBAC: two namespaced Roles generated from the call table, bound to the scheduler only,
and the cover check that fails both ways."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from leoflow.kube.calls import CALLS
from tests.chart.chartlib import ALL_TOGGLES, RELEASE_NS, REPO, TASK_NS, of_kind, one, walk

SCRIPT = REPO / "scripts" / "rbac_cover.py"
Docs = list[dict[str, Any]]


def _rules_as_calls(role: dict[str, Any], scope: str) -> set[tuple[str, str, str, str]]:
    out = set()
    for rule in role["rules"]:
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    out.add((scope, g, r, v))
    return out


def _table(scope: str) -> set[tuple[str, str, str, str]]:
    return {(c.scope, c.group, c.resource, c.verb) for c in CALLS if c.scope == scope}


def test_task_role_exactly_matches_call_table(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    role = one(docs, "Role", "leoflow-executor")
    assert role["metadata"]["namespace"] == (RELEASE_NS if name == "defaults" else TASK_NS)
    assert role["metadata"]["annotations"]["leoflow.io/api-call-scope"] == "task"
    assert _rules_as_calls(role, "task") == _table("task")
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no wildcards, no names
        assert set(rule["resources"]) <= {
            "pods",
            "pods/log",
            "configmaps",
            "persistentvolumeclaims",
        }
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]


def test_lease_role_matches_call_table_and_names_the_lease(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    role = one(docs, "Role", "leoflow-leader-election")
    assert role["metadata"]["namespace"] == RELEASE_NS
    assert _rules_as_calls(role, "release") == _table("release")
    for rule in role["rules"]:
        assert rule["resources"] == ["leases"]
        if "create" in rule["verbs"]:
            # create carries no object name: a resourceNames rule would never allow it
            assert "resourceNames" not in rule
        else:
            assert rule["resourceNames"] == ["leoflow-scheduler"]
    sched_env = [
        e
        for e in one(docs, "Deployment", "leoflow-scheduler")["spec"]["template"]["spec"][
            "containers"
        ][0]["env"]
        if e["name"] == "LEOFLOW_LEADER_ELECTION__LEASE_NAME"
    ]
    assert sched_env[0]["value"] == "leoflow-scheduler"


def test_no_nodes_anywhere(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    for d in docs:
        for node in walk(d):
            assert not (isinstance(node, str) and node.split("/")[0] == "nodes"), d["kind"]


def test_only_the_scheduler_service_account_is_bound(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    bindings = of_kind(docs, "RoleBinding")
    assert {b["roleRef"]["name"] for b in bindings} == {
        "leoflow-executor",
        "leoflow-leader-election",
    }
    for b in bindings:
        assert b["roleRef"]["kind"] == "Role"
        assert b["subjects"] == [
            {"kind": "ServiceAccount", "name": "leoflow-scheduler", "namespace": RELEASE_NS}
        ]
        role = one(docs, "Role", b["roleRef"]["name"])
        assert role["metadata"]["namespace"] == b["metadata"]["namespace"]


def test_generated_call_file_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "generate", "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr


# ---- the cover check, both ways


def _calls_text() -> str:
    return subprocess.run(
        [sys.executable, "-m", "leoflow.kube.calls"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout


def _cover(tmp_path: Path, calls: str, docs: Docs) -> subprocess.CompletedProcess[str]:
    (tmp_path / "calls.txt").write_text(calls)
    (tmp_path / "rendered.yaml").write_text(yaml.safe_dump_all(docs))
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "check",
            "--calls",
            str(tmp_path / "calls.txt"),
            "--manifests",
            str(tmp_path / "rendered.yaml"),
            "--task-namespace",
            TASK_NS,
            "--release-namespace",
            RELEASE_NS,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


@pytest.fixture
def toggled(render: Any) -> Docs:
    return copy.deepcopy(render(*ALL_TOGGLES))


def test_cover_passes_on_the_chart(tmp_path: Path, toggled: Docs) -> None:
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 0, done.stderr
    assert "covered both ways" in done.stdout


def test_cover_fails_on_a_call_without_a_grant(tmp_path: Path, toggled: Docs) -> None:
    calls = _calls_text() + "task core persistentvolumeclaims create\n"
    done = _cover(tmp_path, calls, toggled)
    assert done.returncode == 1
    assert "call without a grant: task core persistentvolumeclaims create" in done.stderr


def test_cover_fails_on_a_grant_without_a_call(tmp_path: Path, toggled: Docs) -> None:
    role = one(toggled, "Role", "leoflow-executor")
    role["rules"].append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]})
    next(r for r in role["rules"] if r["resources"] == ["pods"])["verbs"].append("patch")
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    assert (
        f"grant without a call: Role {TASK_NS}/leoflow-executor: task core nodes get" in done.stderr
    )
    assert (
        f"grant without a call: Role {TASK_NS}/leoflow-executor: task core pods patch"
        in done.stderr
    )


def test_cover_fails_when_create_is_only_granted_by_resource_name(
    tmp_path: Path,
    toggled: Docs,
) -> None:
    role = one(toggled, "Role", "leoflow-leader-election")
    for rule in role["rules"]:
        rule["resourceNames"] = ["leoflow-scheduler"]
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    assert "call without a grant: release coordination.k8s.io leases create" in done.stderr


def test_cover_fails_on_cluster_scoped_or_unscoped_grants(tmp_path: Path, toggled: Docs) -> None:
    toggled.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "extra"},
            "rules": [],
        }
    )
    del one(toggled, "Role", "leoflow-executor")["metadata"]["annotations"]
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    assert "ClusterRole extra: cluster-scoped RBAC is never granted" in done.stderr
    assert "call without a grant: task core pods create" in done.stderr


def test_cover_fails_when_the_task_role_is_in_the_wrong_namespace(
    tmp_path: Path,
    toggled: Docs,
) -> None:
    one(toggled, "Role", "leoflow-executor")["metadata"]["namespace"] = "default"
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    assert f"is not in namespace {TASK_NS}" in done.stderr


def test_rbac_covers_executor_script(helm: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "rbac-covers-executor.sh")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=60,
        env={**__import__("os").environ, "LEOFLOW_HELM": str(helm), "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("covered both ways") == 2


# ---- the DAGs' GC anchors (ConfigMaps): granted exactly what the anchor code calls


def test_task_role_grants_configmaps_for_the_anchors_exactly(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    role = one(docs, "Role", "leoflow-executor")
    (rule,) = [r for r in role["rules"] if "configmaps" in r["resources"]]
    assert rule == {"apiGroups": [""], "resources": ["configmaps"], "verbs": sorted(rule["verbs"])}
    # Never watched: the pod watch stays the one watch.
    assert sorted(rule["verbs"]) == ["create", "delete", "get", "list"]


def test_cover_fails_when_the_anchor_grants_are_missing(tmp_path: Path, toggled: Docs) -> None:
    role = one(toggled, "Role", "leoflow-executor")
    role["rules"] = [r for r in role["rules"] if r["resources"] != ["configmaps"]]
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    for verb in ("create", "delete", "get", "list"):
        assert f"call without a grant: task core configmaps {verb}" in done.stderr


def test_cover_fails_on_a_configmaps_grant_no_call_uses(tmp_path: Path, toggled: Docs) -> None:
    role = one(toggled, "Role", "leoflow-executor")
    next(r for r in role["rules"] if r["resources"] == ["configmaps"])["verbs"].append("watch")
    done = _cover(tmp_path, _calls_text(), toggled)
    assert done.returncode == 1
    assert (
        f"grant without a call: Role {TASK_NS}/leoflow-executor: task core configmaps watch"
        in done.stderr
    )
