"""A warm pod: the same pod ``build_pod`` makes for a try, reused for many tries.

Its shape is a hash of what ``build_pod`` produced with every per-try part left out
(name, the try's labels and annotations, the ticket): tasks of one DAG whose pods
would be identical share a shape, and only they share a warm pod. The warm pod is
that very pod with its own name, labels (DAG and shape, no try), its own ticket and
``leoflow agent --warm``; it always has an emptyDir at ``/tmp``, which its agent
empties between tasks. Anything the builder adds (an ownerReference, say) stays.
"""

from __future__ import annotations

import copy
import hashlib
import json
import secrets

from leoflow.domain.warm_pods import ReusePods
from leoflow.kube.objects import JsonObj
from leoflow.kube.pod import (
    ANNOTATION_RUN,
    ANNOTATION_TASK,
    LABEL_RUN,
    LABEL_SHAPE,
    LABEL_TASK,
    LABEL_TI,
    LABEL_TRY,
    TMP_VOLUME,
    label_value,
)

LABEL_WARM = "leoflow.io/warm"
WARM_COMMAND = ("leoflow", "agent", "--warm")
_PER_TRY_ENV = frozenset({"LEOFLOW_AGENT_TICKET"})


def _container(pod: JsonObj) -> JsonObj:
    container: JsonObj = pod["spec"]["containers"][0]
    return container


def pod_shape(pod: JsonObj) -> str:
    """The hash of a try's pod without its per-try parts: equal for identical pods."""
    spec = copy.deepcopy(pod["spec"])
    container = spec["containers"][0]
    container["env"] = [e for e in container.get("env", ()) if e["name"] not in _PER_TRY_ENV]
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def warm_pod_name(dag_id: str, shape: str) -> str:
    """``lfw-<dag>-<shape>-<random>``: unique, DNS-1123, at most 63 characters."""
    readable = label_value(dag_id).lower().replace("_", "-").replace(".", "-")[:30].strip("-")
    return f"lfw-{readable or 'dag'}-{shape[:8]}-{secrets.token_hex(4)}"


def build_warm_pod(
    try_pod: JsonObj, *, name: str, shape: str, ticket: str, reuse: ReusePods
) -> JsonObj:
    """The warm pod made from a try's pod (``build_pod``'s output)."""
    pod = copy.deepcopy(try_pod)
    meta = pod["metadata"]
    meta["name"] = name
    for label in (LABEL_TASK, LABEL_RUN, LABEL_TI, LABEL_TRY):
        meta["labels"].pop(label, None)
    meta["labels"][LABEL_SHAPE] = shape
    meta["labels"][LABEL_WARM] = "true"
    for annotation in (ANNOTATION_TASK, ANNOTATION_RUN):
        meta["annotations"].pop(annotation, None)
    container = _container(pod)
    container["command"] = list(WARM_COMMAND)
    env = [e for e in container["env"] if e["name"] not in _PER_TRY_ENV]
    env += [
        {"name": "LEOFLOW_AGENT_TICKET", "value": ticket},
        # The agent empties this between tasks; TMPDIR points tasks at it.
        {"name": "LEOFLOW_AGENT_EMPTY_DIR", "value": "/tmp"},
        {"name": "TMPDIR", "value": "/tmp"},
        {"name": "LEOFLOW_AGENT_MAX_TASKS", "value": str(reuse.max_tasks_per_pod)},
        {"name": "LEOFLOW_AGENT_IDLE_TIMEOUT", "value": f"{reuse.idle_timeout:g}"},
    ]
    container["env"] = env
    spec = pod["spec"]
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == TMP_VOLUME for v in volumes):
        volumes.append({"name": TMP_VOLUME, "emptyDir": {}})
        container.setdefault("volumeMounts", []).append({"name": TMP_VOLUME, "mountPath": "/tmp"})
    return pod


def warm_ref(executor_ref: str | None) -> tuple[str, int] | None:
    """(pod name, nth task) of a try started in a warm pod, from its executor reference
    (``pod:<name>@<uid>;warm=<n>``); None for any other try."""
    ref = executor_ref or ""
    head, sep, nth = ref.partition(";warm=")
    if not ref.startswith("pod:") or not sep or not nth.isdigit():
        return None
    return head[4:].split("@", 1)[0], int(nth)
