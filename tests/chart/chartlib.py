"""Shared helpers for the chart tests (helm lookup, rendering, object access)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "leoflow"
RELEASE = "leoflow"
RELEASE_NS = "leoflow-system"
TASK_NS = "leoflow-tasks"

# Every toggle flipped away from its default.
ALL_TOGGLES: tuple[str, ...] = (
    "--set",
    "split.enabled=true",
    "--set",
    "networkPolicy.enabled=true",
    "--set",
    "taskNetworkPolicy.enabled=true",
    "--set",
    "taskNetworkPolicy.allowInternetEgress=true",
    "--set",
    "taskPodSecurity.readOnlyRootFilesystem=true",
    "--set",
    "taskPodSecurity.runAsNonRoot=false",
    "--set",
    f"taskNamespace={TASK_NS}",
    "--set",
    "taskPodPassthrough={tolerations,node_selector,priority_class_name}",
    "--set",
    "taskImagePullSecrets={registry-credentials}",
    "--set",
    "api.allowedHosts={leoflow.example.com}",
    "--set",
    "api.allowedOrigins={https://leoflow.example.com}",
    "--set",
    "database.embedded.enabled=true",
    "--set",
    "secrets.existingSecret=leoflow-task-secrets",
    "--set",
    "apiTokens.existingSecret=leoflow-api-tokens",
    "--set",
    "tokenSigningKey.existingSecret=leoflow-signing",
    "--set",
    "imagePullSecrets[0].name=registry-credentials",
    "--set",
    "networkPolicy.metrics.from[0].namespaceSelector.matchLabels.team=monitoring",
)
PRODUCTION: tuple[str, ...] = ("-f", str(CHART / "values-production.yaml"))
# The agent endpoint's TLS from an existing Secret, its CA given as PEM; and TLS off.
AGENT_TLS_EXISTING: tuple[str, ...] = (
    "--set",
    "agentTLS.existingSecret=leoflow-agent-cert",
    "--set-string",
    "agentTLS.caBundle=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    "--set",
    f"taskNamespace={TASK_NS}",
)
AGENT_TLS_OFF: tuple[str, ...] = ("--set", "agentTLS.enabled=false")

VARIANTS: dict[str, tuple[str, ...]] = {
    "defaults": (),
    "all-toggles": ALL_TOGGLES,
    "production": PRODUCTION,
}


def helm_path() -> Path:
    env = os.environ.get("LEOFLOW_HELM")
    path = Path(env) if env else REPO / ".tools" / "bin" / "helm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"helm not found at {path}: run `bash scripts/install-helm.sh` "
            "(or set LEOFLOW_HELM to a helm binary)",
            pytrace=False,
        )
    return path


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, cwd=REPO, timeout=60, check=False
    )


_cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}


def render_docs(helm: Path, *args: str) -> list[dict[str, Any]]:
    """`helm template` of the chart into leoflow-system, as a list of objects."""
    key = tuple(args)
    if key not in _cache:
        done = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", RELEASE_NS, *args)
        assert done.returncode == 0, f"helm template {' '.join(args)} failed:\n{done.stderr}"
        _cache[key] = [d for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict)]
    return _cache[key]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    found = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    assert len(found) == 1, f"{workload['metadata']['name']}: no container {name}"
    chosen: dict[str, Any] = found[0]
    return chosen


def env_of(docs: list[dict[str, Any]], workload: dict[str, Any], name: str) -> dict[str, Any]:
    """A container's environment: ConfigMap envFrom resolved, then its env entries."""
    c = container(workload, name)
    env: dict[str, Any] = {}
    for source in c.get("envFrom", []):
        cm = one(docs, "ConfigMap", source["configMapRef"]["name"])
        env.update(cm.get("data", {}))
    for entry in c.get("env", []):
        env[entry["name"]] = entry.get("value", entry.get("valueFrom"))
    return env


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)
