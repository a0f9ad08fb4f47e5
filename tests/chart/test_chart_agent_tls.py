"""The agent endpoint's TLS in the chart: generated or existing certificate, the
scheduler's mount, the CA ConfigMap task pods mount, in every variant."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from leoflow.domain.dag import TaskSpec
from leoflow.domain.execution import Launch
from leoflow.kube.pod import build_pod
from leoflow.settings import Settings, load_settings
from tests.chart.chartlib import (
    AGENT_TLS_EXISTING,
    AGENT_TLS_OFF,
    ALL_TOGGLES,
    CHART,
    RELEASE,
    RELEASE_NS,
    TASK_NS,
    VARIANTS,
    container,
    env_of,
    of_kind,
    one,
    pod_spec,
    render_docs,
    run_helm,
)
from tests.fakekube.psa import restricted_message

Docs = list[dict[str, Any]]
# The shared variants, plus TLS from an existing Secret and TLS off.
TLS_VARIANTS: dict[str, tuple[str, ...]] = {
    **VARIANTS,
    "agent-tls-existing": AGENT_TLS_EXISTING,
    "agent-tls-off": AGENT_TLS_OFF,
}
FQDN = f"leoflow-scheduler-agent.{RELEASE_NS}.svc.cluster.local"


def _scheduler_settings(docs: Docs, monkeypatch: pytest.MonkeyPatch) -> Settings:
    env = env_of(docs, one(docs, "Deployment", "leoflow-scheduler"), "scheduler")
    placeholders = {
        "LEOFLOW_DATABASE_URL": "postgresql+asyncpg://u:p@db:5432/leoflow",
        "LEOFLOW_TOKEN_SIGNING_KEY": "k" * 64,
        "LEOFLOW_IDENTITY": "pod-0",
    }
    for key in [k for k in os.environ if k.startswith("LEOFLOW_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("LEOFLOW_"):
            value = placeholders.get(key, value)
            assert isinstance(value, str), f"{key} is not resolved: {value}"
            monkeypatch.setenv(key, value)
    return load_settings()


def _task_pod(settings: Settings) -> dict[str, Any]:
    launch = Launch(
        ti_pk=1,
        try_number=1,
        dag_id="d",
        run_id="r",
        task_id="t",
        spec=TaskSpec(task_id="t", command=["true"]),
        ticket="lft_ticket",
    )
    return build_pod(launch, settings, agent_endpoint=f"{FQDN}:50051")


def _openssl(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["openssl", *args], input=stdin, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.mark.parametrize("name", sorted(TLS_VARIANTS))
def test_certificate_mounts_in_every_variant(
    name: str, helm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = render_docs(helm, *TLS_VARIANTS[name])
    version = kubernetes_validate.latest_version()
    for doc in docs:  # the schema, strictly, for the variants the shared tests do not render
        kubernetes_validate.validate(doc, version, strict=True)
    sched = one(docs, "Deployment", "leoflow-scheduler")
    mounts = {m["name"]: m for m in container(sched, "scheduler").get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod_spec(sched)["volumes"]}
    settings = _scheduler_settings(docs, monkeypatch)
    pod = _task_pod(settings)
    [task] = pod["spec"]["containers"]
    task_env = {e["name"]: e.get("value") for e in task["env"]}
    if name == "agent-tls-off":
        assert "agent-tls" not in mounts and "agent-tls" not in volumes
        assert settings.agent_tls_cert_file is None and settings.agent_tls_ca_configmap is None
        assert "LEOFLOW_AGENT_CA_FILE" not in task_env
        assert not [c for c in of_kind(docs, "ConfigMap") if "agent-ca" in c["metadata"]["name"]]
        return
    secret = "leoflow-agent-cert" if name == "agent-tls-existing" else "leoflow-agent-tls"
    assert volumes["agent-tls"]["secret"]["secretName"] == secret
    assert mounts["agent-tls"]["readOnly"] is True and "subPath" not in mounts["agent-tls"]
    assert str(settings.agent_tls_cert_file) == "/var/run/leoflow/agent-tls/tls.crt"
    assert str(settings.agent_tls_key_file) == "/var/run/leoflow/agent-tls/tls.key"
    # Task pods: the CA ConfigMap, which the chart put in the task namespace.
    ca_map = one(docs, "ConfigMap", "leoflow-agent-ca")
    assert settings.agent_tls_ca_configmap == "leoflow-agent-ca"
    assert ca_map["metadata"]["namespace"] == settings.task_namespace
    assert "BEGIN CERTIFICATE" in ca_map["data"]["ca.crt"]
    [ca_volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "leoflow-agent-ca"]
    assert ca_volume["configMap"]["name"] == "leoflow-agent-ca"
    assert task_env["LEOFLOW_AGENT_CA_FILE"] == "/etc/leoflow/agent-ca/ca.crt"
    if settings.task_pod_security.run_as_non_root:  # all-toggles turns it off on purpose
        assert restricted_message(pod) is None
    kubernetes_validate.validate(pod, kubernetes_validate.latest_version(), strict=True)


def test_generated_certificate_names_the_agent_service_and_chains_to_the_ca(
    helm: Path, tmp_path: Path
) -> None:
    docs = render_docs(helm, *ALL_TOGGLES)
    secret = one(docs, "Secret", "leoflow-agent-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    for key, value in data.items():
        (tmp_path / key).write_bytes(value)
    ca_map = one(docs, "ConfigMap", "leoflow-agent-ca")
    assert ca_map["metadata"]["namespace"] == TASK_NS
    assert ca_map["data"]["ca.crt"].encode() == data["ca.crt"]
    verified = _openssl("verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt"))
    assert verified.strip().endswith(": OK")
    sans = _openssl("x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-ext", "subjectAltName")
    assert f"DNS:{FQDN}" in sans and "DNS:leoflow-scheduler-agent" in sans
    cert_key = _openssl("x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-pubkey")
    key_pub = _openssl("pkey", "-in", str(tmp_path / "tls.key"), "-pubout")
    assert cert_key == key_pub
    # The agent dials exactly the name in the certificate.
    config = one(docs, "ConfigMap", "leoflow-config")
    assert config["data"]["LEOFLOW_AGENT_ENDPOINT"] == f"{FQDN}:50051"


def test_existing_secret_is_used_and_nothing_generated(helm: Path) -> None:
    docs = render_docs(helm, *AGENT_TLS_EXISTING)
    assert not [s for s in of_kind(docs, "Secret") if s["metadata"]["name"] == "leoflow-agent-tls"]
    ca_map = one(docs, "ConfigMap", "leoflow-agent-ca")
    assert ca_map["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----\nMIIB\n")


def test_existing_ca_configmap_is_referenced_not_created(
    helm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = render_docs(
        helm,
        "--set",
        "agentTLS.existingSecret=leoflow-agent-cert",
        "--set",
        "agentTLS.existingCAConfigMap=corp-ca",
    )
    assert not [c for c in of_kind(docs, "ConfigMap") if "ca" in c["metadata"]["name"]]
    assert _scheduler_settings(docs, monkeypatch).agent_tls_ca_configmap == "corp-ca"


def test_existing_secret_without_a_ca_is_refused(helm: Path) -> None:
    done = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        RELEASE_NS,
        "--set",
        "agentTLS.existingSecret=leoflow-agent-cert",
    )
    assert done.returncode != 0
    assert "agentTLS.existingSecret is set: give the CA" in done.stderr
    assert "agentTLS.caBundle" in done.stderr and "agentTLS.existingCAConfigMap" in done.stderr


def test_tls_is_on_by_default(helm: Path) -> None:
    docs = render_docs(helm)
    sched = one(docs, "Deployment", "leoflow-scheduler")
    env = env_of(docs, sched, "scheduler")
    assert env["LEOFLOW_AGENT_TLS_CERT_FILE"] == "/var/run/leoflow/agent-tls/tls.crt"
    assert AGENT_TLS_OFF  # the one variant without it is the explicit opt-out
