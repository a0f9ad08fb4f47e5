"""Server-filled object metadata and the apiserver's JSON key order.

A created object comes back with uid, resourceVersion, generation, creationTimestamp
and managedFields, keys in Go struct order (transcript 01). Key order is cosmetic for
clients but makes a side-by-side diff with a transcript readable.

``managedFields`` is approximate: one ``Update`` entry per write whose ``fieldsV1``
lists the fields of the request body; the real server-side-apply field sets also
carry ``"."`` markers and defaulted fields, which nothing in Leoflow reads.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

from .status import ApiError, invalid

JsonObj = dict[str, Any]

META_ORDER = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
]
POD_SPEC_ORDER = [
    "volumes",
    "initContainers",
    "containers",
    "ephemeralContainers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "imagePullSecrets",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
    "resources",
]
CONTAINER_ORDER = [
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
]
POD_STATUS_ORDER = [
    "observedGeneration",
    "phase",
    "conditions",
    "message",
    "reason",
    "nominatedNodeName",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "startTime",
    "initContainerStatuses",
    "containerStatuses",
    "qosClass",
    "ephemeralContainerStatuses",
    "resize",
    "resourceClaimStatuses",
]

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def now() -> str:
    """RFC 3339 at second precision, as metav1.Time serialises."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def later(seconds: int) -> str:
    """``now() + seconds`` (a graceful deletion's deletionTimestamp)."""
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def ordered(obj: JsonObj, order: list[str]) -> JsonObj:
    """Known keys first in ``order``, unknown ones after in their own order."""
    out = {k: obj[k] for k in order if k in obj}
    out.update({k: v for k, v in obj.items() if k not in out})
    return out


def _fields(value: Any) -> Any:
    if isinstance(value, dict):
        return {f"f:{k}": _fields(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(i, dict) and "name" in i for i in value):
        return {f'k:{{"name":"{i["name"]}"}}': _fields(i) for i in value}
    return {}


def managed_entry(manager: str, api_version: str, body: JsonObj, subresource: str = "") -> JsonObj:
    """One managedFields entry describing the fields this write set."""
    touched: JsonObj = {}
    meta = body.get("metadata") or {}
    meta_fields = {k: meta[k] for k in ("labels", "annotations") if k in meta}
    if meta_fields:
        touched["f:metadata"] = _fields(meta_fields)
    for top in ("spec", "status", "target"):
        if top in body:
            touched[f"f:{top}"] = _fields(body[top])
    entry: JsonObj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": touched,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def manager_from_user_agent(user_agent: str) -> str:
    """The apiserver names the field manager after the User-Agent's first token."""
    return (user_agent or "unknown").split("/")[0] or "unknown"


def validate_meta(kind: str, meta: JsonObj) -> None:
    """Name and label syntax, so a Leoflow label longer than 63 chars fails here too."""
    name = meta.get("name", "")
    causes: list[tuple[str, str, str]] = []
    if not name:
        raise ApiError(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f'{kind} "" is invalid: metadata.name: Required value: name or '
                "generateName is required",
                "reason": "Invalid",
                "details": {
                    "kind": kind,
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: name or generateName is required",
                            "field": "metadata.name",
                        }
                    ],
                },
                "code": 422,
            }
        )
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        causes.append(
            (
                "metadata.name",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if (
            len(label) > 63
            or not _LABEL_NAME.match(label)
            or (prefix and not _DNS1123_SUBDOMAIN.match(prefix))
        ):
            causes.append(
                (
                    "metadata.labels",
                    key,
                    "name part must be no more than 63 characters"
                    " and consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(("metadata.labels", str(value), "must be no more than 63 characters"))
    if causes:
        raise invalid(kind, name, causes)


def stamp_new(meta: JsonObj, namespace: str, generation: bool) -> JsonObj:
    """Fill the metadata a create gets: namespace, uid, generation, creationTimestamp."""
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
    meta["namespace"] = namespace
    meta["uid"] = str(uuid.uuid4())
    meta["resourceVersion"] = ""
    if generation:
        meta["generation"] = 1
    meta["creationTimestamp"] = now()
    for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(server_owned, None)
    return meta
