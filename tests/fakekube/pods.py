"""Pod-specific apiserver rules: defaulting, QoS class, graceful deletion, binding.

These are the behaviours Leoflow's executor and reaper depend on, taken from the
transcripts: a created pod comes back Pending with the defaults of transcript 01; a
delete of a pod that was never bound or already finished is immediate (a MODIFIED
stamping ``deletionTimestamp`` with grace 0, then DELETED, as 05c and the watch in 06
show); a running bound pod only gets ``deletionTimestamp`` (now + grace) and
``deletionGracePeriodSeconds`` and stays until its kubelet finishes it or a
``gracePeriodSeconds: 0`` delete removes it (13/14/15).
"""

from __future__ import annotations

from typing import Any

from .objects import CONTAINER_ORDER, POD_SPEC_ORDER, POD_STATUS_ORDER, now, ordered
from .store import _clone

JsonObj = dict[str, Any]

TERMINAL_PHASES = ("Succeeded", "Failed")
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def _default_container(c: JsonObj) -> JsonObj:
    c = _clone(c)
    resources = c.setdefault("resources", {})
    limits = resources.get("limits") or {}
    requests = resources.setdefault("requests", {}) if limits else resources.get("requests")
    if limits and requests is not None:
        # The apiserver copies a limit into a missing request of the same resource.
        for res, qty in limits.items():
            requests.setdefault(res, qty)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image", "")
    tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
    c.setdefault(
        "imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    )
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")
    return ordered(c, CONTAINER_ORDER)


def qos_class(spec: JsonObj) -> str:
    """BestEffort without requests/limits, Guaranteed when cpu+memory limits == requests."""
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in lim or req.get(name, lim.get(name)) != lim[name]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(pod: JsonObj) -> JsonObj:
    """Fill the defaults transcript 01 shows and return a fresh Pending pod."""
    pod = _clone(pod)
    spec = pod.setdefault("spec", {})
    for key in ("initContainers", "containers"):
        if key in spec:
            spec[key] = [_default_container(c) for c in spec[key]]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    tolerations = spec.setdefault("tolerations", [])
    for tol in DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == tol["key"] and t.get("effect") == "NoExecute" for t in tolerations
        ):
            tolerations.append(dict(tol))
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    pod["spec"] = ordered(spec, POD_SPEC_ORDER)
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
    return pod


def effective_grace(pod: JsonObj, requested: int | None) -> int:
    """The pod strategy's CheckGracefulDelete: 0 for unbound or finished pods."""
    spec = pod.get("spec") or {}
    grace = (
        requested if requested is not None else int(spec.get("terminationGracePeriodSeconds", 30))
    )
    if not spec.get("nodeName"):
        grace = 0
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        grace = 0
    return max(grace, 0)


def bind(pod: JsonObj, node: str) -> JsonObj:
    """What a Binding does to the pod: nodeName and a PodScheduled=True condition."""
    pod = _clone(pod)
    pod["spec"]["nodeName"] = node
    pod["spec"] = ordered(pod["spec"], POD_SPEC_ORDER)
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.insert(
        0,
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now(),
        },
    )
    status["conditions"] = conditions
    pod["status"] = ordered(status, POD_STATUS_ORDER)
    return pod


def order_status(pod: JsonObj) -> JsonObj:
    """Put ``status`` keys in Go order after a patch."""
    if isinstance(pod.get("status"), dict):
        pod["status"] = ordered(pod["status"], POD_STATUS_ORDER)
    return pod
