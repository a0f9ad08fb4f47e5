"""The task pod, built by one pure function (docs/ARCHITECTURE.md, Kubernetes).

``build_pod`` returns the wire JSON of the pod as a plain dict. The defaults pass Pod
Security Admission ``restricted``; Kubernetes fields a DAG declares under
``execution`` reach the pod only when the operator's allowlist
(``task_pod_passthrough``) names them, and a declared field that is not allowed is an
error here too, never silently dropped (ADR 0054 §2: the tolerations bug).
"""

from __future__ import annotations

import hashlib
import re

from leoflow.domain.dag import ResourceAmounts, TaskSpec, Toleration
from leoflow.domain.execution import Launch
from leoflow.kube.objects import JsonObj
from leoflow.settings import Settings

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "leoflow"
SELECTOR = f"{MANAGED_BY}={MANAGED_BY_VALUE}"
LABEL_DAG = "leoflow.io/dag"
LABEL_TASK = "leoflow.io/task"
LABEL_RUN = "leoflow.io/run"
LABEL_TRY = "leoflow.io/try"
LABEL_TI = "leoflow.io/ti"
LABEL_SHAPE = "leoflow.io/pod-shape"  # a warm pod's shape (leoflow/kube/warm_pod.py)
ANNOTATION_DAG = "leoflow.io/dag-id"
ANNOTATION_TASK = "leoflow.io/task-id"
ANNOTATION_RUN = "leoflow.io/run-id"
CONTAINER = "task"
TMP_VOLUME = "leoflow-tmp"
CA_VOLUME = "leoflow-agent-ca"
CA_DIR = "/etc/leoflow/agent-ca"
CA_KEY = "ca.crt"
AGENT_COMMAND = ("leoflow", "agent")
MAX_NAME = 63

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_RESOURCE_KEYS = (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeral-storage"))


class PodBuildError(ValueError):
    """The task asks for something the pod may not carry; the message says what."""


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()[:8]


def pod_name(dag_id: str, task_id: str, ti_pk: int, try_number: int) -> str:
    """``lf-<dag>-<task>-<ti_pk>-<try>``, DNS-1123, at most 63 characters.

    The ``-<ti_pk>-<try>`` tail is never cut, so the name is unique per (task
    instance, try) whatever sanitising does to the ids; when the readable part must
    be shortened, a hash of the original ids keeps it telling tasks apart.
    """
    tail = f"-{ti_pk}-{try_number}"
    raw = f"{dag_id}-{task_id}"
    readable = _DASHES.sub("-", _NOT_DNS.sub("-", raw.lower())).strip("-") or "task"
    room = MAX_NAME - len("lf-") - len(tail)
    if len(readable) > room:
        suffix = "-" + _digest(dag_id, task_id)
        readable = readable[: room - len(suffix)].rstrip("-") + suffix
    return f"lf-{readable}{tail}"


def label_value(value: str) -> str:
    """``value`` made a valid label value: [A-Za-z0-9_.-], alphanumeric ends, ≤ 63 chars.

    A value that had to change gets a hash of the original, so two ids never share a
    label; the annotations carry the ids unchanged.
    """
    clean = _NOT_LABEL.sub("_", value)
    clean = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", clean)
    if clean == value and len(clean) <= MAX_NAME:
        return clean
    suffix = _digest(value)
    head = clean[: MAX_NAME - len(suffix) - 1]
    head = re.sub(r"[^A-Za-z0-9]+$", "", head)
    return f"{head}-{suffix}" if head else suffix


def _amounts(amounts: ResourceAmounts) -> dict[str, str]:
    return {
        key: getattr(amounts, attr)
        for attr, key in _RESOURCE_KEYS
        if getattr(amounts, attr) is not None
    }


def _check_allowed(launch: Launch, allowed: frozenset[str]) -> None:
    spec = launch.spec
    refused = [name for name in spec.execution.declared() if name not in allowed]
    if "ephemeral_storage" not in allowed and (
        spec.resources.requests.ephemeral_storage is not None
        or spec.resources.limits.ephemeral_storage is not None
    ):
        refused.append("ephemeral_storage")
    if refused:
        raise PodBuildError(
            f"task {launch.task_id!r} of DAG {launch.dag_id!r} sets "
            f"{', '.join(sorted(refused))}, which the operator has not allowed; add it to "
            f"taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH) to allow it"
        )


def _present(**fields: object) -> JsonObj:
    """The fields that are set: the manifest leaves out what the DAG left out."""
    return {key: value for key, value in fields.items() if value is not None}


def _toleration(t: Toleration) -> JsonObj:
    fields = t.model_dump(exclude_none=True)
    if "toleration_seconds" in fields:
        fields["tolerationSeconds"] = fields.pop("toleration_seconds")
    return fields


def _passthrough(spec: TaskSpec, pod_spec: JsonObj, container: JsonObj) -> None:
    ex = spec.execution
    tolerations = None if ex.tolerations is None else [_toleration(t) for t in ex.tolerations]
    pod_spec.update(
        _present(
            nodeSelector=None if ex.node_selector is None else dict(ex.node_selector),
            tolerations=tolerations,
            serviceAccountName=ex.service_account,
            priorityClassName=ex.priority_class_name,
            affinity=ex.affinity,
            topologySpreadConstraints=None
            if ex.topology_spread_constraints is None
            else list(ex.topology_spread_constraints),
            terminationGracePeriodSeconds=ex.termination_grace_period_seconds,
            resourceClaims=None if ex.resource_claims is None else list(ex.resource_claims),
        )
    )
    if ex.resource_claims is not None:
        # A claim reaches a container only when the container names it.
        names = [c["name"] for c in ex.resource_claims if isinstance(c, dict) and "name" in c]
        if names:
            container.setdefault("resources", {})["claims"] = [{"name": n} for n in names]


def _mount_agent_ca(settings: Settings, pod_spec: JsonObj, container: JsonObj) -> None:
    """The CA bundle the agent verifies the endpoint against, read-only, and TLS on."""
    items = [{"key": CA_KEY, "path": CA_KEY}]
    if settings.agent_tls_ca_configmap:
        source: JsonObj = {"configMap": {"name": settings.agent_tls_ca_configmap, "items": items}}
    elif settings.agent_tls_ca_secret:
        source = {"secret": {"secretName": settings.agent_tls_ca_secret, "items": items}}
    else:
        return
    pod_spec.setdefault("volumes", []).append({"name": CA_VOLUME, **source})
    container.setdefault("volumeMounts", []).append(
        {"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True}
    )
    container["env"].append({"name": "LEOFLOW_AGENT_CA_FILE", "value": f"{CA_DIR}/{CA_KEY}"})


def build_pod(launch: Launch, settings: Settings, *, agent_endpoint: str) -> JsonObj:
    """The pod for one try of one task instance, as the JSON the apiserver receives."""
    if not launch.ticket:
        raise PodBuildError("a task pod needs its agent's bootstrap ticket; the launch has none")
    if not agent_endpoint:
        raise PodBuildError("no agent endpoint: set LEOFLOW_AGENT_ENDPOINT")
    allowed = frozenset(settings.task_pod_passthrough)
    _check_allowed(launch, allowed)
    spec = launch.spec
    security = settings.task_pod_security

    container: JsonObj = {
        "name": CONTAINER,
        "image": spec.image or settings.task_image,
        "command": list(AGENT_COMMAND),
        "env": [
            {"name": "LEOFLOW_AGENT_ENDPOINT", "value": agent_endpoint},
            {"name": "LEOFLOW_AGENT_TICKET", "value": launch.ticket},
            {
                "name": "LEOFLOW_POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "LEOFLOW_POD_UID",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
            },
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    requests = _amounts(spec.resources.requests)
    limits = _amounts(spec.resources.limits)
    if requests or limits:
        resources: JsonObj = {}
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = limits
        container["resources"] = resources

    pod_security: JsonObj = {}
    if security.run_as_non_root:
        pod_security["runAsNonRoot"] = True
        pod_security["fsGroup"] = security.fs_group
    pod_security["seccompProfile"] = {"type": "RuntimeDefault"}

    pod_spec: JsonObj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": pod_security,
        "containers": [container],
    }
    if security.read_only_root_filesystem:
        container["securityContext"]["readOnlyRootFilesystem"] = True
        container["volumeMounts"] = [{"name": TMP_VOLUME, "mountPath": "/tmp"}]
        pod_spec["volumes"] = [{"name": TMP_VOLUME, "emptyDir": {}}]
    _mount_agent_ca(settings, pod_spec, container)
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    _passthrough(spec, pod_spec, container)

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(launch.dag_id, launch.task_id, launch.ti_pk, launch.try_number),
            "namespace": settings.task_namespace,
            "labels": {
                MANAGED_BY: MANAGED_BY_VALUE,
                LABEL_DAG: label_value(launch.dag_id),
                LABEL_TASK: label_value(launch.task_id),
                LABEL_RUN: label_value(launch.run_id),
                LABEL_TI: str(launch.ti_pk),
                LABEL_TRY: str(launch.try_number),
            },
            "annotations": {
                ANNOTATION_DAG: launch.dag_id,
                ANNOTATION_TASK: launch.task_id,
                ANNOTATION_RUN: launch.run_id,
            },
        },
        "spec": pod_spec,
    }
