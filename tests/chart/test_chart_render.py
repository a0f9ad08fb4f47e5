"""The chart lints, renders, and carries the workloads and settings issue 6 asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from leoflow.settings import Settings, SettingsError
from leoflow.settings_env import environment_values
from tests.chart.chartlib import (
    ALL_TOGGLES,
    CHART,
    RELEASE_NS,
    TASK_NS,
    container,
    env_of,
    helm_path,
    of_kind,
    one,
    pod_spec,
    run_helm,
)

FORBIDDEN_KINDS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ResourceQuota",
    "LimitRange",
    "PriorityClass",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "DaemonSet",
}

Docs = list[dict[str, Any]]


def test_helm_is_installed() -> None:
    """Fails (never skips) when helm is missing: run scripts/install-helm.sh."""
    helm_path()


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"]) == ("v2", "leoflow")
    assert (chart["version"], str(chart["appVersion"])) == ("0.1.0", "0.1.0")


def test_helm_lint_strict(helm: Path) -> None:
    for args in ((), ALL_TOGGLES, ("-f", str(CHART / "values-production.yaml"))):
        done = run_helm(helm, "lint", str(CHART), "--strict", "--namespace", RELEASE_NS, *args)
        assert done.returncode == 0, f"helm lint {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_no_cluster_policy_objects(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    kinds = {d["kind"] for d in docs}
    assert not kinds & FORBIDDEN_KINDS, f"{name}: forbidden kinds {kinds & FORBIDDEN_KINDS}"


def test_every_object_is_namespaced_explicitly(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    for d in docs:
        assert d["metadata"].get("namespace") in {RELEASE_NS, TASK_NS}, d["metadata"]["name"]


def test_default_objects(render: Any) -> None:
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ConfigMap",
            "ConfigMap",  # the agent CA bundle for task pods
            "Deployment",
            "Deployment",
            "PodDisruptionBudget",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Secret",
            "Secret",  # the agent endpoint's TLS certificate
            "Service",
            "Service",
            "ServiceAccount",
        ]
    )
    # task pods default to the release namespace
    assert {d["metadata"]["namespace"] for d in docs} == {RELEASE_NS}
    assert not of_kind(docs, "NetworkPolicy")
    assert not of_kind(docs, "StatefulSet")


def test_api_deployment(render: Any) -> None:
    docs = render()
    api = one(docs, "Deployment", "leoflow-api")
    c = container(api, "api")
    assert c["command"] == ["leoflow", "api"]
    assert api["spec"]["replicas"] == 2
    assert [(p["name"], p["containerPort"]) for p in c["ports"]] == [("http", 8080)]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    svc = one(docs, "Service", "leoflow-api")
    assert svc["spec"]["ports"][0]["port"] == 8080
    assert svc["spec"]["selector"] == api["spec"]["selector"]["matchLabels"]


def test_scheduler_deployment(render: Any) -> None:
    docs = render()
    sched = one(docs, "Deployment", "leoflow-scheduler")
    c = container(sched, "scheduler")
    assert c["command"] == ["leoflow", "scheduler"]
    assert sched["spec"]["replicas"] == 2
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": 50051, "metrics": 9090}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert c["resources"]["requests"] and c["resources"]["limits"]


def test_agent_endpoint_names_a_service_every_scheduler_replica_serves(
    variant: tuple[str, Docs],
) -> None:
    _, docs = variant
    sched = one(docs, "Deployment", "leoflow-scheduler")
    env = env_of(docs, sched, "scheduler")
    host, port = env["LEOFLOW_AGENT_ENDPOINT"].rsplit(":", 1)
    svc_name, ns, svc, domain = host.split(".", 3)
    assert (ns, svc, domain, port) == (RELEASE_NS, "svc", "cluster.local", "50051")
    service = one(docs, "Service", svc_name)
    assert service["spec"]["selector"] == sched["spec"]["selector"]["matchLabels"]
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(50051, "grpc")]
    assert env["LEOFLOW_AGENT_LISTEN"] == "0.0.0.0:50051"
    assert env["LEOFLOW_METRICS_LISTEN"] == "0.0.0.0:9090"


def test_env_from_settings(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    task_ns = RELEASE_NS if name == "defaults" else TASK_NS
    for workload, cname in (("leoflow-api", "api"), ("leoflow-scheduler", "scheduler")):
        env = env_of(docs, one(docs, "Deployment", workload), cname)
        assert env["LEOFLOW_EXECUTOR"] == "kubernetes"
        assert env["LEOFLOW_LOG_FORMAT"] == "json"
        assert env["LEOFLOW_RELEASE_NAMESPACE"] == RELEASE_NS
        assert env["LEOFLOW_TASK_NAMESPACE"] == task_ns
        assert env["LEOFLOW_IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert "secretKeyRef" in env["LEOFLOW_DATABASE_URL"]
        assert env["LEOFLOW_TASK_IMAGE"].startswith(("ghcr.io/leoflow/leoflow:", "registry."))
    api_env = env_of(docs, one(docs, "Deployment", "leoflow-api"), "api")
    assert api_env["LEOFLOW_API_LISTEN"] == "0.0.0.0:8080"
    # the signing key and the task secrets never reach the api
    assert "LEOFLOW_TOKEN_SIGNING_KEY" not in api_env
    assert "LEOFLOW_SECRETS_DIR" not in api_env
    sched_env = env_of(docs, one(docs, "Deployment", "leoflow-scheduler"), "scheduler")
    assert "LEOFLOW_API_TOKENS_FILE" not in sched_env
    assert "secretKeyRef" in sched_env["LEOFLOW_TOKEN_SIGNING_KEY"]
    assert sched_env["LEOFLOW_LEADER_ELECTION__LEASE_DURATION"] == "15"
    assert sched_env["LEOFLOW_LEADER_ELECTION__RENEW_DEADLINE"] == "10"
    assert sched_env["LEOFLOW_LEADER_ELECTION__RETRY_PERIOD"] == "2"


def test_task_pod_settings_follow_values(render: Any) -> None:
    docs = render()
    cm = one(docs, "ConfigMap", "leoflow-config")["data"]
    assert cm["LEOFLOW_TASK_POD_SECURITY__RUN_AS_NON_ROOT"] == "true"
    assert cm["LEOFLOW_TASK_POD_SECURITY__READ_ONLY_ROOT_FILESYSTEM"] == "false"
    assert "LEOFLOW_TASK_POD_PASSTHROUGH" not in cm  # empty list: settings default
    cm = one(render(*ALL_TOGGLES), "ConfigMap", "leoflow-config")["data"]
    assert cm["LEOFLOW_TASK_POD_SECURITY__RUN_AS_NON_ROOT"] == "false"
    assert cm["LEOFLOW_TASK_POD_SECURITY__READ_ONLY_ROOT_FILESYSTEM"] == "true"
    assert cm["LEOFLOW_TASK_POD_PASSTHROUGH"] == "tolerations,node_selector,priority_class_name"
    assert cm["LEOFLOW_IMAGE_PULL_SECRETS"] == "registry-credentials"
    assert cm["LEOFLOW_TASK_NAMESPACE"] == TASK_NS


def test_passthrough_rejects_unknown_field(helm: Path) -> None:
    done = run_helm(
        helm,
        "template",
        "leoflow",
        str(CHART),
        "--set",
        "taskPodPassthrough={tolerations,hostNetwork}",
    )
    assert done.returncode != 0
    # values.schema.json refuses it before the template's own check: the item and the
    # allowed names, as the template said them.
    assert "at '/taskPodPassthrough/1': value must be one of 'tolerations'" in done.stderr


def test_passthrough_allowlist_matches_settings() -> None:
    from leoflow.settings import PASSTHROUGH_FIELDS

    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    block = helpers.split('define "leoflow.passthroughFields" -}}', 1)[1].split("{{-", 1)[0]
    assert block.strip().split(",") == list(PASSTHROUGH_FIELDS)


def test_chart_env_names_are_settings() -> None:
    """Every LEOFLOW_* name the chart can set is a field of leoflow.settings.Settings."""
    import re

    from pydantic import BaseModel

    from leoflow.domain.warm_pods import ReusePods
    from leoflow.settings import LeaderElection, Settings, TaskPodSecurity

    nested: dict[str, type[BaseModel]] = {
        "LEADER_ELECTION": LeaderElection,
        "TASK_POD_SECURITY": TaskPodSecurity,
        "REUSE_PODS_DEFAULT": ReusePods,
    }
    text = "".join(p.read_text() for p in (CHART / "templates").glob("*.yaml"))
    names = set(re.findall(r"LEOFLOW_([A-Z0-9_]+)", text))
    assert names, "no LEOFLOW_ names found in the templates"
    for name in sorted(names):
        top, _, sub = name.partition("__")
        assert top.lower() in Settings.model_fields, f"LEOFLOW_{name}: no setting {top.lower()}"
        if sub:
            assert sub.lower() in nested[top].model_fields, f"LEOFLOW_{name}: no nested {sub}"


def _settings_env(docs: Docs, workload: str, cname: str) -> dict[str, str]:
    env = env_of(docs, one(docs, "Deployment", workload), cname)
    placeholders = {
        "LEOFLOW_DATABASE_URL": "postgresql+asyncpg://u:p@db:5432/leoflow",
        "LEOFLOW_TOKEN_SIGNING_KEY": "k" * 64,
        "LEOFLOW_IDENTITY": "pod-0",
    }
    return {k: placeholders.get(k, v) for k, v in env.items() if k.startswith("LEOFLOW_")}


def _load(env: dict[str, str], monkeypatch: Any) -> Any:
    from leoflow.settings import load_settings

    for key in [k for k in __import__("os").environ if k.startswith("LEOFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        assert isinstance(value, str), f"{key} is not resolved: {value}"
        monkeypatch.setenv(key, value)
    return load_settings()


def test_default_chart_env_loads_as_settings(render: Any, monkeypatch: Any) -> None:
    docs = render()
    s = _load(_settings_env(docs, "leoflow-scheduler", "scheduler"), monkeypatch)
    assert s.executor == "kubernetes" and s.task_namespace == RELEASE_NS
    assert s.leader_election.lease_name == "leoflow-scheduler"
    assert s.task_pod_security.run_as_non_root is True
    api = _load(_settings_env(docs, "leoflow-api", "api"), monkeypatch)
    # The api answers to every in-cluster name of its Service (probes are exempt).
    svc = "leoflow-api"
    assert api.api_allowed_hosts == (
        svc,
        f"{svc}.{RELEASE_NS}",
        f"{svc}.{RELEASE_NS}.svc",
        f"{svc}.{RELEASE_NS}.svc.cluster.local",
    )
    assert api.api_allowed_origins == ()


def test_all_toggles_chart_env_loads_as_settings(render: Any, monkeypatch: Any) -> None:
    """The comma-separated lists (passthrough, pull secrets) must parse as settings."""
    docs = render(*ALL_TOGGLES)
    api = _load(_settings_env(docs, "leoflow-api", "api"), monkeypatch)
    assert api.api_allowed_hosts[-1] == "leoflow.example.com"
    assert api.api_allowed_origins == ("https://leoflow.example.com",)
    s = _load(_settings_env(docs, "leoflow-scheduler", "scheduler"), monkeypatch)
    assert s.task_pod_passthrough == {"tolerations", "node_selector", "priority_class_name"}
    assert s.image_pull_secrets == ("registry-credentials",)
    assert s.task_pod_security.read_only_root_filesystem is True
    assert s.task_pod_security.run_as_non_root is False
    assert str(s.secrets_dir) == "/var/run/leoflow/secrets"


def test_secrets_mounted_read_only_into_their_one_consumer(render: Any) -> None:
    docs = render(*ALL_TOGGLES)
    api = one(docs, "Deployment", "leoflow-api")
    sched = one(docs, "Deployment", "leoflow-scheduler")

    def secret_volumes(w: dict[str, Any]) -> dict[str, str]:
        return {
            v["name"]: v["secret"]["secretName"] for v in pod_spec(w)["volumes"] if "secret" in v
        }

    assert secret_volumes(api) == {"api-tokens": "leoflow-api-tokens"}
    assert secret_volumes(sched) == {
        "secrets": "leoflow-task-secrets",
        "agent-tls": "leoflow-agent-tls",
    }
    for w, cname, vol in (
        (api, "api", "api-tokens"),
        (sched, "scheduler", "secrets"),
        (sched, "scheduler", "agent-tls"),
    ):
        mount = [m for m in container(w, cname)["volumeMounts"] if m["name"] == vol]
        assert mount and mount[0]["readOnly"] is True
    api_env = env_of(docs, api, "api")
    assert api_env["LEOFLOW_API_TOKENS_FILE"] == "/var/run/leoflow/api-tokens/tokens"
    sched_env = env_of(docs, sched, "scheduler")
    assert sched_env["LEOFLOW_SECRETS_DIR"] == "/var/run/leoflow/secrets"
    assert sched_env["LEOFLOW_TOKEN_SIGNING_KEY"]["secretKeyRef"] == {
        "name": "leoflow-signing",
        "key": "key",
    }
    # with an existing signing key Secret the chart generates none
    assert not [s for s in of_kind(docs, "Secret") if "token-signing" in s["metadata"]["name"]]


def test_generated_signing_key_secret(render: Any) -> None:
    docs = render()
    secret = one(docs, "Secret", "leoflow-token-signing-key")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(secret["data"]["key"]) >= 64
    env = env_of(docs, one(docs, "Deployment", "leoflow-scheduler"), "scheduler")
    assert env["LEOFLOW_TOKEN_SIGNING_KEY"]["secretKeyRef"] == {
        "name": "leoflow-token-signing-key",
        "key": "key",
    }


def test_database_secret_from_values(render: Any) -> None:
    docs = render("--set", "database.existingSecret=pg", "--set", "database.secretKey=dsn")
    for w, c in (("leoflow-api", "api"), ("leoflow-scheduler", "scheduler")):
        env = env_of(docs, one(docs, "Deployment", w), c)
        assert env["LEOFLOW_DATABASE_URL"] == {"secretKeyRef": {"name": "pg", "key": "dsn"}}


def test_embedded_database_off_by_default_and_in_production(render: Any) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    prod = yaml.safe_load((CHART / "values-production.yaml").read_text())
    assert values["database"]["embedded"]["enabled"] is False
    assert prod["database"]["embedded"]["enabled"] is False
    assert not of_kind(render("-f", str(CHART / "values-production.yaml")), "StatefulSet")


def test_embedded_database_when_enabled(render: Any) -> None:
    docs = render(*ALL_TOGGLES)
    sts = one(docs, "StatefulSet", "leoflow-postgresql")
    assert sts["spec"]["replicas"] == 1
    env = env_of(docs, one(docs, "Deployment", "leoflow-scheduler"), "scheduler")
    assert env["LEOFLOW_DATABASE_URL"] == {
        "secretKeyRef": {"name": "leoflow-postgresql", "key": "url"}
    }
    one(docs, "Secret", "leoflow-postgresql")
    one(docs, "Service", "leoflow-postgresql")


def test_pod_disruption_budgets(render: Any) -> None:
    docs = render()
    for component in ("api", "scheduler"):
        pdb = one(docs, "PodDisruptionBudget", f"leoflow-{component}")
        deploy = one(docs, "Deployment", f"leoflow-{component}")
        assert pdb["spec"]["selector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
        assert pdb["spec"]["maxUnavailable"] == 1
    assert not of_kind(render("--set", "pdb.enabled=false"), "PodDisruptionBudget")


def test_image_and_pull_secrets(render: Any) -> None:
    docs = render(
        "--set",
        "image.tag=9.9.9",
        "--set",
        "imagePullSecrets[0].name=regcred",
        "--set",
        "taskImage=example.com/dags:1",
    )
    for w, c in (("leoflow-api", "api"), ("leoflow-scheduler", "scheduler")):
        deploy = one(docs, "Deployment", w)
        assert container(deploy, c)["image"] == "ghcr.io/leoflow/leoflow:9.9.9"
        assert pod_spec(deploy)["imagePullSecrets"] == [{"name": "regcred"}]
    cm = one(docs, "ConfigMap", "leoflow-config")["data"]
    assert cm["LEOFLOW_TASK_IMAGE"] == "example.com/dags:1"


def test_reuse_pods_default_follows_values_and_loads_as_settings(render: Any) -> None:
    cm = one(render(), "ConfigMap", "leoflow-config")["data"]
    assert not any(k.startswith("LEOFLOW_REUSE_PODS_DEFAULT") for k in cm)  # a pod per try
    docs = render("--set", "reusePods.maxPods=6", "--set", "reusePods.idleTimeout=45s")
    cm = one(docs, "ConfigMap", "leoflow-config")["data"]
    env = {k: v for k, v in cm.items() if k.startswith("LEOFLOW_REUSE_PODS_DEFAULT")}
    assert env == {
        "LEOFLOW_REUSE_PODS_DEFAULT__MAX_PODS": "6",
        "LEOFLOW_REUSE_PODS_DEFAULT__IDLE_TIMEOUT": "45s",
        "LEOFLOW_REUSE_PODS_DEFAULT__MAX_TASKS_PER_POD": "200",
    }
    values = environment_values(Settings, env, SettingsError)
    reuse = Settings(**values).reuse_pods_default
    assert reuse is not None and (reuse.max_pods, reuse.idle_timeout) == (6, 45.0)
