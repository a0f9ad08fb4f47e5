"""build_pod: golden pods for the default and every toggle, the allowlist both ways,
names and labels, and every Pod Security ``restricted`` rule against the default pod.

Golden files live in ``golden/``; ``LEOFLOW_REGEN_GOLDEN=1`` rewrites them (review the diff).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.dag import TaskSpec
from leoflow.domain.execution import Launch
from leoflow.kube.pod import PodBuildError, build_pod, label_value, pod_name
from leoflow.settings import PASSTHROUGH_FIELDS, Settings, TaskPodSecurity
from tests.fakekube.psa import restricted_message

GOLDEN = Path(__file__).parent / "golden"
ENDPOINT = "leoflow-scheduler.leoflow-system.svc:7070"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

EXECUTION: dict[str, Any] = {
    "tolerations": [
        {"key": "workload", "operator": "Equal", "value": "leoflow", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "toleration_seconds": 60},
    ],
    "node_selector": {"workload": "leoflow"},
    "service_account": "etl-reader",
    "priority_class_name": "batch-low",
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "topology_spread_constraints": [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"leoflow.io/dag": "nightly_sales"}},
        }
    ],
    "termination_grace_period_seconds": 45,
    "resource_claims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
}


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {"task_namespace": "leoflow-tasks"}
    base.update(overrides)
    return Settings(**base)


def launch(ti_pk: int = 42, try_number: int = 1, **spec: Any) -> Launch:
    return Launch(
        ti_pk=ti_pk,
        try_number=try_number,
        dag_id="nightly_sales",
        run_id="scheduled__2026-11-30T03:00:00+00:00",
        task_id="extract",
        spec=TaskSpec(task_id="extract", command=["python", "-m", "etl.extract"], **spec),
        ticket="lft_single-use-ticket",
    )


def check_golden(name: str, pod: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(pod, indent=2, sort_keys=True) + "\n"
    if os.environ.get("LEOFLOW_REGEN_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with LEOFLOW_REGEN_GOLDEN=1"
    assert json.loads(path.read_text()) == pod, f"{name}: the pod differs from {path}"


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (settings overrides, task spec fields)
    "default": ({}, {}),
    "run_as_non_root_off": ({"task_pod_security": TaskPodSecurity(run_as_non_root=False)}, {}),
    "read_only_root_filesystem": (
        {"task_pod_security": TaskPodSecurity(read_only_root_filesystem=True)},
        {},
    ),
    "resources": (
        {},
        {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}},
    ),
    "ephemeral_storage": (
        {"task_pod_passthrough": "ephemeral_storage"},
        {"resources": {"limits": {"ephemeral_storage": "5Gi"}}},
    ),
    "image_and_pull_secrets": (
        {"image_pull_secrets": "regcred,mirror"},
        {"image": "registry.example.com/etl:1.4"},
    ),
}
for _field, _value in EXECUTION.items():
    CASES[f"passthrough_{_field}"] = (
        {"task_pod_passthrough": _field},
        {"execution": {_field: _value}},
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_pod(case: str) -> None:
    overrides, spec = CASES[case]
    pod = build_pod(launch(**spec), settings(**overrides), agent_endpoint=ENDPOINT)
    check_golden(case, pod)


def test_default_pod_shape() -> None:
    pod = build_pod(launch(), settings(), agent_endpoint=ENDPOINT)
    spec = pod["spec"]
    [container] = spec["containers"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "runAsUser" not in spec["securityContext"]
    assert "runAsUser" not in container["securityContext"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["command"] == ["leoflow", "agent"]
    assert "args" not in container
    assert "resources" not in container, "no resources added when none are declared"
    assert "volumes" not in spec
    assert container["image"] == Settings().task_image
    env = {e["name"]: e for e in container["env"]}
    assert env["LEOFLOW_AGENT_ENDPOINT"]["value"] == ENDPOINT
    assert env["LEOFLOW_AGENT_TICKET"]["value"] == "lft_single-use-ticket"
    assert env["LEOFLOW_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["LEOFLOW_POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    # The task's command reaches the agent through Start, never the pod spec.
    assert "etl.extract" not in json.dumps(pod)
    labels = pod["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "leoflow"
    assert labels["leoflow.io/ti"] == "42" and labels["leoflow.io/try"] == "1"
    assert pod["metadata"]["annotations"]["leoflow.io/run-id"] == launch().run_id


def test_run_as_non_root_and_fs_group_move_together() -> None:
    off = settings(task_pod_security=TaskPodSecurity(run_as_non_root=False))
    pod = build_pod(launch(), off, agent_endpoint=ENDPOINT)
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    on = build_pod(launch(), settings(), agent_endpoint=ENDPOINT)
    assert {"runAsNonRoot", "fsGroup"} <= set(on["spec"]["securityContext"])


def test_read_only_root_mounts_tmp() -> None:
    ro = settings(task_pod_security=TaskPodSecurity(read_only_root_filesystem=True))
    pod = build_pod(launch(), ro, agent_endpoint=ENDPOINT)
    [container] = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [{"name": "leoflow-tmp", "mountPath": "/tmp"}]
    assert pod["spec"]["volumes"] == [{"name": "leoflow-tmp", "emptyDir": {}}]


def test_resources_exactly_as_declared() -> None:
    spec: dict[str, Any] = {
        "resources": {
            "requests": {"cpu": "250m", "ephemeral_storage": "1Gi"},
            "limits": {"cpu": 2, "memory": "512Mi", "ephemeral_storage": "5Gi"},
        }
    }
    pod = build_pod(
        launch(**spec),
        settings(task_pod_passthrough="ephemeral_storage"),
        agent_endpoint=ENDPOINT,
    )
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "2", "memory": "512Mi", "ephemeral-storage": "5Gi"},
    }


# ---- the allowlist, both ways ------------------------------------------------------------

POD_KEY = {
    "tolerations": "tolerations",
    "node_selector": "nodeSelector",
    "service_account": "serviceAccountName",
    "priority_class_name": "priorityClassName",
    "affinity": "affinity",
    "topology_spread_constraints": "topologySpreadConstraints",
    "termination_grace_period_seconds": "terminationGracePeriodSeconds",
    "resource_claims": "resourceClaims",
}


@pytest.mark.parametrize("field", sorted(EXECUTION))
def test_allowed_field_reaches_the_pod(field: str) -> None:
    pod = build_pod(
        launch(execution={field: EXECUTION[field]}),
        settings(task_pod_passthrough=field),
        agent_endpoint=ENDPOINT,
    )
    assert POD_KEY[field] in pod["spec"]


@pytest.mark.parametrize("field", sorted(EXECUTION))
def test_field_not_allowed_raises(field: str) -> None:
    others = ",".join(f for f in PASSTHROUGH_FIELDS if f != field)
    with pytest.raises(PodBuildError, match=field) as err:
        build_pod(
            launch(execution={field: EXECUTION[field]}),
            settings(task_pod_passthrough=others),
            agent_endpoint=ENDPOINT,
        )
    assert "taskPodPassthrough" in str(err.value)


def test_ephemeral_storage_not_allowed_raises() -> None:
    with pytest.raises(PodBuildError, match="ephemeral_storage"):
        build_pod(
            launch(resources={"requests": {"ephemeral_storage": "1Gi"}}),
            settings(),
            agent_endpoint=ENDPOINT,
        )


def test_tolerations_reach_the_pod_in_camel_case() -> None:
    """ADR 0054 §2: the seed dropped tolerations; here every one arrives, complete."""
    pod = build_pod(
        launch(execution={"tolerations": EXECUTION["tolerations"]}),
        settings(task_pod_passthrough="tolerations"),
        agent_endpoint=ENDPOINT,
    )
    assert pod["spec"]["tolerations"] == [
        {"key": "workload", "operator": "Equal", "value": "leoflow", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    ]


def test_priority_class_and_claims() -> None:
    allowed = "priority_class_name,resource_claims"
    pod = build_pod(
        launch(
            execution={
                "priority_class_name": "batch-low",
                "resource_claims": EXECUTION["resource_claims"],
            }
        ),
        settings(task_pod_passthrough=allowed),
        agent_endpoint=ENDPOINT,
    )
    assert pod["spec"]["priorityClassName"] == "batch-low"
    assert pod["spec"]["resourceClaims"] == EXECUTION["resource_claims"]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}


def test_no_ticket_or_endpoint_is_an_error() -> None:
    with pytest.raises(PodBuildError, match="endpoint"):
        build_pod(launch(), settings(), agent_endpoint="")


# ---- names and labels ----------------------------------------------------------------------


def test_name_is_deterministic_and_unique_per_try() -> None:
    assert pod_name("nightly_sales", "extract", 42, 1) == "lf-nightly-sales-extract-42-1"
    assert pod_name("nightly_sales", "extract", 42, 1) == pod_name(
        "nightly_sales", "extract", 42, 1
    )
    names = {pod_name("d", "t", ti, tr) for ti in range(1, 30) for tr in range(1, 5)}
    assert len(names) == 29 * 4
    # Different ids that sanitise alike still differ by their (ti_pk, try) tail.
    assert pod_name("a_b", "x", 1, 1) != pod_name("a-b", "x", 2, 1)


@pytest.mark.parametrize(
    ("dag", "task"),
    [
        ("d" * 200, "t" * 200),
        ("nightly_sales", "Transform.Big_Step"),
        ("_x_", "..weird..--"),
        ("a", "b"),
    ],
)
def test_name_is_a_dns_label(dag: str, task: str) -> None:
    for ti, tr in ((1, 1), (987654321, 100)):
        name = pod_name(dag, task, ti, tr)
        assert len(name) <= 63, name
        assert DNS1123_LABEL.match(name), name
        assert name.endswith(f"-{ti}-{tr}")


def test_truncated_names_keep_tasks_apart() -> None:
    long = "x" * 80
    assert pod_name("d", long + "1", 5, 1) != pod_name("d", long + "2", 5, 1)


@pytest.mark.parametrize(
    "value",
    ["nightly_sales", "manual__2026-11-30T06:45:21+00:00_abc123", "_x_", "é" * 10, "v" * 300, ""],
)
def test_label_values_are_valid(value: str) -> None:
    out = label_value(value)
    assert len(out) <= 63
    assert LABEL_VALUE.match(out), out


def test_label_values_differ_for_different_ids() -> None:
    assert label_value("run:1") != label_value("run+1")
    assert label_value("a" * 70 + "1") != label_value("a" * 70 + "2")


# ---- Pod Security Admission, restricted --------------------------------------------------

BASELINE_CAPS = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
ALLOWED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
    "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or []]


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Each PSA check (k8s.io/pod-security-admission/policy), baseline then restricted."""
    spec = pod["spec"]
    psc = spec.get("securityContext") or {}
    out = []
    # baseline
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        out.append("hostNamespaces")
    for c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append("privileged")
        if set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPS:
            out.append("capabilities_baseline")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append("hostPorts")
        if sc.get("procMount") not in (None, "Default"):
            out.append("procMount")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append("seccompProfile_baseline")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            out.append("appArmorProfile")
        if sc.get("seLinuxOptions"):
            out.append("seLinuxOptions")
    if any("hostPath" in v for v in spec.get("volumes") or []):
        out.append("hostPathVolumes")
    if psc.get("sysctls"):
        out.append("sysctls")
    if psc.get("seLinuxOptions") or (psc.get("appArmorProfile") or {}).get("type") == "Unconfined":
        out.append("podSecurityContext_baseline")
    # restricted
    for v in spec.get("volumes") or []:
        if not set(v) - {"name"} <= ALLOWED_VOLUMES:
            out.append("restrictedVolumes")
    for c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append("allowPrivilegeEscalation")
        if sc.get("runAsNonRoot") is not True and psc.get("runAsNonRoot") is not True:
            out.append("runAsNonRoot")
        if sc.get("runAsUser") == 0 or psc.get("runAsUser") == 0:
            out.append("runAsUser")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append("seccompProfile_restricted")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append("capabilities_restricted_drop")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append("capabilities_restricted_add")
    if psc.get("runAsNonRoot") is False:
        out.append("runAsNonRoot")
    return out


@pytest.mark.parametrize(
    "overrides",
    [{}, {"task_pod_security": TaskPodSecurity(read_only_root_filesystem=True)}],
    ids=["default", "read_only_root"],
)
def test_default_pod_passes_every_restricted_rule(overrides: dict[str, Any]) -> None:
    pod = build_pod(launch(), settings(**overrides), agent_endpoint=ENDPOINT)
    assert restricted_violations(pod) == []
    assert restricted_message(pod) is None  # the fake apiserver's PSA agrees


def test_the_check_can_fail() -> None:
    """Without runAsNonRoot the pod is no longer restricted-compliant (and the check sees it)."""
    off = settings(task_pod_security=TaskPodSecurity(run_as_non_root=False))
    pod = build_pod(launch(), off, agent_endpoint=ENDPOINT)
    assert restricted_violations(pod) == ["runAsNonRoot"]
    assert restricted_message(pod) is not None
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    assert "allowPrivilegeEscalation" in restricted_violations(pod)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_golden_pods_match_the_kubernetes_schema(path: Path) -> None:
    """Strict OpenAPI validation: no misspelt or misplaced field in any golden pod."""
    import kubernetes_validate

    kubernetes_validate.validate(json.loads(path.read_text()), "1.33", strict=True)


def test_no_control_plane_value_reaches_the_pod_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "LEOFLOW_TOKEN_SIGNING_KEY": "control-plane-signing-key-0123456789",
        "LEOFLOW_DATABASE_URL": "postgresql+asyncpg://leoflow:db-password-xyz@db/leoflow",
        "LEOFLOW_TOKEN": "client-api-token-abcdef",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    s = settings(
        token_signing_key=secrets["LEOFLOW_TOKEN_SIGNING_KEY"],
        database_url=secrets["LEOFLOW_DATABASE_URL"],
    )
    pod = build_pod(launch(env={"TARGET": "prod"}), s, agent_endpoint=ENDPOINT)
    text = json.dumps(pod)
    assert [name for name, value in secrets.items() if value in text] == []
    [container] = pod["spec"]["containers"]
    # The agent's four, nothing else: the task's env and secrets come over Start.
    assert sorted(e["name"] for e in container["env"]) == [
        "LEOFLOW_AGENT_ENDPOINT",
        "LEOFLOW_AGENT_TICKET",
        "LEOFLOW_POD_NAME",
        "LEOFLOW_POD_UID",
    ]
    assert "envFrom" not in container


@pytest.mark.parametrize(
    ("overrides", "source"),
    [
        ({"agent_tls_ca_configmap": "leoflow-agent-ca"}, "configMap"),
        ({"agent_tls_ca_secret": "leoflow-agent-ca"}, "secret"),
    ],
)
@pytest.mark.parametrize("read_only", [False, True])
def test_agent_ca_is_mounted_read_only(
    overrides: dict[str, Any], source: str, read_only: bool
) -> None:
    s = settings(
        task_pod_security=TaskPodSecurity(read_only_root_filesystem=read_only), **overrides
    )
    pod = build_pod(launch(), s, agent_endpoint=ENDPOINT)
    [container] = pod["spec"]["containers"]
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "leoflow-agent-ca"]
    ref = volume[source]
    assert ref.get("name", ref.get("secretName")) == "leoflow-agent-ca"
    assert ref["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert {
        "name": "leoflow-agent-ca",
        "mountPath": "/etc/leoflow/agent-ca",
        "readOnly": True,
    } in container["volumeMounts"]
    assert {"name": "LEOFLOW_AGENT_CA_FILE", "value": "/etc/leoflow/agent-ca/ca.crt"} in (
        container["env"]
    )
    assert len(container["volumeMounts"]) == (2 if read_only else 1)
    assert restricted_message(pod) is None


def test_no_agent_ca_means_no_mount_and_plaintext() -> None:
    pod = build_pod(launch(), settings(), agent_endpoint=ENDPOINT)
    [container] = pod["spec"]["containers"]
    assert "volumes" not in pod["spec"] and "volumeMounts" not in container
    assert all(e["name"] != "LEOFLOW_AGENT_CA_FILE" for e in container["env"])


def test_ca_configmap_and_secret_are_exclusive() -> None:
    from leoflow.settings import SettingsError, load_settings

    with pytest.raises(SettingsError, match="agent_tls_ca_configmap and agent_tls_ca_secret"):
        load_settings(agent_tls_ca_configmap="a", agent_tls_ca_secret="b")
