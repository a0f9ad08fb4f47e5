"""Control-plane pods pass Pod Security `restricted`; tokens only where needed."""

from __future__ import annotations

from typing import Any

from tests.chart.chartlib import ALL_TOGGLES, RELEASE_NS, container, of_kind, one, pod_spec
from tests.fakekube import psa

Docs = list[dict[str, Any]]


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Every way a pod spec breaks Pod Security `restricted`: the same evaluator the
    fake apiserver admits pods with, whose messages match the real apiserver's."""
    return psa.restricted_violations({"spec": spec})


def workloads(docs: Docs) -> list[dict[str, Any]]:
    return of_kind(docs, "Deployment") + of_kind(docs, "StatefulSet")


def test_the_check_catches_violations() -> None:
    spec = {
        "hostNetwork": True,
        "securityContext": {},
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "c",
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "privileged": True},
            }
        ],
    }
    bad = "\n".join(restricted_violations(spec))
    for expected in (
        "hostNetwork",
        "hostPath",
        "privileged",
        "SYS_ADMIN",
        "allowPrivilegeEscalation",
        "runAsNonRoot",
        "seccompProfile",
        'capabilities.drop=["ALL"]',
    ):
        assert expected in bad


def test_control_plane_pods_pass_restricted(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    assert workloads(docs)
    for w in workloads(docs):
        assert restricted_violations(pod_spec(w)) == [], f"{name}: {w['metadata']['name']}"


def test_control_plane_hardening_beyond_restricted(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    for w in workloads(docs):
        spec = pod_spec(w)
        assert "runAsUser" not in spec["securityContext"] or w["kind"] == "StatefulSet"
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp, f"{c['name']}: no /tmp mount"
            volume = [v for v in spec["volumes"] if v["name"] == tmp[0]["name"]]
            assert "emptyDir" in volume[0]


def test_leoflow_pods_pin_no_uid(variant: tuple[str, Docs]) -> None:
    """The image's numeric USER is what runAsNonRoot verifies; the chart pins none."""
    _, docs = variant
    for w in of_kind(docs, "Deployment"):
        spec = pod_spec(w)
        assert "runAsUser" not in spec["securityContext"]
        assert all("runAsUser" not in c["securityContext"] for c in spec["containers"])


def test_tokens_only_where_needed_shared_account(render: Any) -> None:
    docs = render()
    api = pod_spec(one(docs, "Deployment", "leoflow-api"))
    sched = pod_spec(one(docs, "Deployment", "leoflow-scheduler"))
    assert api["automountServiceAccountToken"] is False
    assert sched["automountServiceAccountToken"] is True
    # split off: one ServiceAccount, shared
    assert [sa["metadata"]["name"] for sa in of_kind(docs, "ServiceAccount")] == [
        "leoflow-scheduler"
    ]
    assert api["serviceAccountName"] == sched["serviceAccountName"] == "leoflow-scheduler"
    for sa in of_kind(docs, "ServiceAccount"):
        assert sa["automountServiceAccountToken"] is False


def test_split_gives_the_api_an_unbound_tokenless_account(render: Any) -> None:
    for args in (("--set", "split.enabled=true"), ALL_TOGGLES):
        docs = render(*args)
        api = pod_spec(one(docs, "Deployment", "leoflow-api"))
        sched = pod_spec(one(docs, "Deployment", "leoflow-scheduler"))
        assert api["serviceAccountName"] == "leoflow-api"
        assert sched["serviceAccountName"] == "leoflow-scheduler"
        api_sa = one(docs, "ServiceAccount", "leoflow-api")
        assert api_sa["metadata"]["namespace"] == RELEASE_NS
        assert api_sa["automountServiceAccountToken"] is False
        assert api["automountServiceAccountToken"] is False
        for binding in of_kind(docs, "RoleBinding"):
            names = {s["name"] for s in binding["subjects"]}
            assert "leoflow-api" not in names, binding["metadata"]["name"]


def test_api_container_sees_no_service_account_token_volume(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    api = one(docs, "Deployment", "leoflow-api")
    assert not [v for v in pod_spec(api)["volumes"] if "projected" in v]
    mounts = container(api, "api")["volumeMounts"]
    assert not [m for m in mounts if "serviceaccount" in m["mountPath"]]
