"""Pod → container: the task pod the Kubernetes executor builds, as a Docker Engine
API container-create request, the way a kubelet with a CRI runtime would run it.

Pure over plain dicts (the pod's wire JSON, as ``build_pod`` returns it or
``ApiClient().sanitize_for_serialization`` gives it), so the ``docker`` executor and
the container tests run the very pods Pro makes, not a second spec.

Every field is either honoured, ignored because it means nothing on one host (the
scheduling fields: there is one node to choose; the kubelet's bookkeeping), or
refused by name (``TranslationError``): nothing is dropped silently. Resource
*requests* have no Docker equivalent (they place a pod on a node; the engine has
only limits) and are ignored; ``ignored`` lists what was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leoflow.executor.docker.quantity import parse_quantity

JsonObj = dict[str, Any]

# Scheduling and kubelet bookkeeping: meaningful among nodes, meaningless on one host.
IGNORED_POD_FIELDS = frozenset(
    {
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "priorityClassName",
        "priority",
        "preemptionPolicy",
        "schedulerName",
        "dnsPolicy",
        "enableServiceLinks",
    }
)
IGNORED_CONTAINER_FIELDS = frozenset({"terminationMessagePath", "terminationMessagePolicy"})
IGNORED_METADATA = frozenset(
    {"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"}
)
DEFAULT_GRACE = 30  # Kubernetes' terminationGracePeriodSeconds default
_VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_FIELD_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class TranslationError(ValueError):
    """The pod asks for something a container here cannot honour; ``path`` names it."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path


@dataclass(frozen=True)
class ContainerRequest:
    """What to ask the engine for: ``body`` is POST /containers/create's JSON."""

    name: str
    image: str
    body: JsonObj
    pull_policy: str
    stop_grace: int
    run_as_non_root: bool
    ignored: tuple[str, ...] = field(default=())


def translate(pod: JsonObj, *, uid: str | None = None) -> ContainerRequest:
    """The container for ``pod``; ``uid`` stands in for ``metadata.uid`` (a pod not yet
    created has none). Raises TranslationError naming the first field refused."""
    if pod.get("apiVersion") != "v1" or pod.get("kind") != "Pod":
        raise TranslationError(
            "kind", f"expected a v1 Pod, got {pod.get('apiVersion')}/{pod.get('kind')}"
        )
    meta: JsonObj = pod.get("metadata") or {}
    spec: JsonObj = pod.get("spec") or {}
    ignored: list[str] = []
    _check_keys(meta, "metadata", _METADATA, IGNORED_METADATA, ignored)
    name = meta.get("name")
    if not name:
        raise TranslationError("metadata.name", "a pod needs a name (the container's)")
    refs = {
        "metadata.name": str(name),
        "metadata.namespace": str(meta.get("namespace", "default")),
        "metadata.uid": uid or meta.get("uid"),
    }
    _check_keys(spec, "spec", _POD_FIELDS, IGNORED_POD_FIELDS, ignored)
    if spec.get("restartPolicy", "Always") != "Never":
        raise TranslationError(
            "spec.restartPolicy",
            f"{spec.get('restartPolicy', 'Always')!r}: a task runs once (Never)",
        )
    if spec.get("automountServiceAccountToken", True) is not False:
        raise TranslationError(
            "spec.automountServiceAccountToken",
            "a service-account token exists only in Kubernetes; set it to false",
        )
    containers = spec.get("containers") or []
    if len(containers) != 1:
        raise TranslationError("spec.containers", f"{len(containers)} containers; a task has one")
    volumes = _volumes(spec.get("volumes") or [])
    pod_sec: JsonObj = spec.get("securityContext") or {}
    _check_keys(pod_sec, "spec.securityContext", _POD_SECURITY, frozenset(), ignored)
    c: JsonObj = containers[0]
    path = "spec.containers[0]"
    _check_keys(c, path, _CONTAINER_FIELDS, IGNORED_CONTAINER_FIELDS, ignored)
    sec: JsonObj = c.get("securityContext") or {}
    _check_keys(sec, f"{path}.securityContext", _CONTAINER_SECURITY, frozenset(), ignored)
    if sec.get("privileged"):
        raise TranslationError(
            f"{path}.securityContext.privileged", "privileged containers are refused"
        )
    image = c.get("image")
    if not image:
        raise TranslationError(f"{path}.image", "a container needs an image")

    env = _env(c.get("env") or [], f"{path}.env", meta, refs)
    host: JsonObj = {"RestartPolicy": {"Name": "no"}}
    body: JsonObj = {
        "Image": image,
        "Env": [f"{k}={v}" for k, v in env.items()],
        "HostConfig": host,
    }
    labels = {**(meta.get("annotations") or {}), **(meta.get("labels") or {})}
    body["Labels"] = {str(k): str(v) for k, v in labels.items()}
    if "command" in c:
        body["Entrypoint"] = [_expand(str(a), env) for a in c["command"]]
        # The image's CMD is dropped when the pod names a command, as in Kubernetes.
        body["Cmd"] = [_expand(str(a), env) for a in c.get("args") or []]
    elif "args" in c:
        body["Cmd"] = [_expand(str(a), env) for a in c["args"]]
    if c.get("workingDir"):
        body["WorkingDir"] = c["workingDir"]
    _resources(c.get("resources") or {}, f"{path}.resources", host, ignored)
    user = _user(pod_sec, sec)
    if user is not None:
        body["User"] = user
    groups = [str(g) for g in pod_sec.get("supplementalGroups") or []]
    if pod_sec.get("fsGroup") is not None:
        groups.append(str(pod_sec["fsGroup"]))  # kubelet adds fsGroup to the process's groups
    if groups:
        host["GroupAdd"] = groups
    _security(pod_sec, sec, path, host)
    host["Tmpfs"] = _mounts(c.get("volumeMounts") or [], f"{path}.volumeMounts", volumes)
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    body["StopTimeout"] = int(grace)
    return ContainerRequest(
        name=str(name),
        image=str(image),
        body=body,
        pull_policy=_pull_policy(c.get("imagePullPolicy"), str(image)),
        stop_grace=int(grace),
        run_as_non_root=bool(sec.get("runAsNonRoot", pod_sec.get("runAsNonRoot", False))),
        ignored=tuple(ignored),
    )


def check_non_root(request: ContainerRequest, image_user: str) -> None:
    """kubelet's runAsNonRoot check against the image's USER (``CreateContainerConfigError``):
    the process must run as a numeric, non-zero UID the kubelet can verify."""
    if not request.run_as_non_root:
        return
    setting = "securityContext.runAsNonRoot"
    pinned = str(request.body.get("User", "")).partition(":")[0]
    if pinned == "0":
        raise TranslationError(setting, "runAsUser 0 breaks the non-root policy")
    if pinned:
        return  # a numeric, non-zero runAsUser
    uid = _image_uid(image_user)
    if uid is None:
        raise TranslationError(
            setting,
            f"image {request.image} has a non-numeric USER ({image_user!r}); "
            "cannot verify it is non-root: make the image's USER numeric or set runAsUser",
        )
    if uid == 0:
        who = repr(image_user) if image_user else "none, i.e. root"
        raise TranslationError(
            setting,
            f"image {request.image} would run as root (USER {who}); set a numeric non-root USER",
        )


def _image_uid(image_user: str) -> int | None:
    head = image_user.partition(":")[0]
    if head == "":
        return 0
    return int(head) if head.isdigit() else None


_METADATA = frozenset({"name", "namespace", "labels", "annotations"})  # namespace: a fieldRef
_POD_FIELDS = frozenset(
    {
        "restartPolicy", "automountServiceAccountToken", "securityContext", "containers",
        "volumes", "terminationGracePeriodSeconds",  # the stop grace
    }
)  # fmt: skip
_POD_SECURITY = frozenset(
    {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "supplementalGroups", "seccompProfile"}
)
_CONTAINER_FIELDS = frozenset(
    {
        "name", "image", "command", "args", "env", "resources", "securityContext",
        "volumeMounts", "workingDir", "imagePullPolicy",
    }
)  # fmt: skip
_CONTAINER_SECURITY = frozenset(
    {
        "allowPrivilegeEscalation", "capabilities", "readOnlyRootFilesystem", "runAsNonRoot",
        "runAsUser", "runAsGroup", "seccompProfile", "privileged",
    }
)  # fmt: skip


def _check_keys(
    obj: JsonObj, path: str, honoured: frozenset[str] | set[str], ignorable: frozenset[str],
    ignored: list[str],
) -> None:  # fmt: skip
    for key in sorted(obj):
        if key in honoured:
            continue
        if key in ignorable:
            ignored.append(f"{path}.{key}")
            continue
        why = _REFUSED_WHY.get(key, "not supported by the docker executor")
        raise TranslationError(f"{path}.{key}", why)


_REFUSED_WHY = {
    "imagePullSecrets": "Kubernetes secrets do not exist here; log the engine in to the "
    "registry instead (docker login / podman login)",
    "serviceAccountName": "a Kubernetes identity does not exist on one host",
    "resourceClaims": "dynamic resource claims (devices) need Kubernetes",
    "hostNetwork": "host namespaces are refused",
    "hostPID": "host namespaces are refused",
    "hostIPC": "host namespaces are refused",
    "initContainers": "a task has one container",
    "ephemeralContainers": "a task has one container",
}


def _env(items: list[JsonObj], path: str, meta: JsonObj, refs: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for i, item in enumerate(items):
        name = str(item.get("name", ""))
        if "value" in item or "valueFrom" not in item:
            env[name] = _expand(str(item.get("value", "")), env)
            continue
        source: JsonObj = item["valueFrom"]
        ref = source.get("fieldRef")
        if set(source) != {"fieldRef"} or not isinstance(ref, dict):
            kind = next(iter(sorted(source)), "valueFrom")
            raise TranslationError(
                f"{path}[{i}].valueFrom.{kind}", "only fieldRef to the pod's metadata is supported"
            )
        field_path = str(ref.get("fieldPath", ""))
        keyed = _FIELD_REF.match(field_path)
        if keyed is not None:
            env[name] = str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
        elif refs.get(field_path):
            env[name] = str(refs[field_path])
        else:
            raise TranslationError(
                f"{path}[{i}].valueFrom.fieldRef.fieldPath",
                f"{field_path!r} has no value outside a cluster (or the pod has none)",
            )
    return env


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: a defined variable is replaced, $$ is a $."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR_REF.sub(sub, text)


def _resources(res: JsonObj, path: str, host: JsonObj, ignored: list[str]) -> None:
    for key in sorted(res):
        if key == "requests":
            ignored.append(f"{path}.requests")  # placement, not a limit: no Docker equivalent
        elif key != "limits":
            raise TranslationError(f"{path}.{key}", "not supported by the docker executor")
    for key, value in sorted((res.get("limits") or {}).items()):
        try:
            amount = parse_quantity(value)
        except ValueError as exc:
            raise TranslationError(f"{path}.limits.{key}", str(exc)) from exc
        if key == "memory":
            host["Memory"] = int(amount)
            host["MemorySwap"] = int(amount)  # no swap, as on a kubelet's node: OOM at the limit
        elif key == "cpu":
            host["NanoCpus"] = int(amount * Decimal(10) ** 9)
        else:
            raise TranslationError(
                f"{path}.limits.{key}", "the engine enforces only cpu and memory limits"
            )


def _user(pod_sec: JsonObj, sec: JsonObj) -> str | None:
    uid = sec.get("runAsUser", pod_sec.get("runAsUser"))
    gid = sec.get("runAsGroup", pod_sec.get("runAsGroup"))
    if uid is None and gid is None:
        return None  # the image's USER
    if uid is None:
        raise TranslationError(
            "securityContext.runAsGroup",
            "set runAsUser too: the engine takes a group only with a user",
        )
    return str(uid) if gid is None else f"{uid}:{gid}"


def _security(pod_sec: JsonObj, sec: JsonObj, path: str, host: JsonObj) -> None:
    if sec.get("allowPrivilegeEscalation") is False:
        host["SecurityOpt"] = ["no-new-privileges"]
    caps: JsonObj = sec.get("capabilities") or {}
    for key in sorted(caps):
        if key not in ("drop", "add"):
            raise TranslationError(f"{path}.securityContext.capabilities.{key}", "unknown field")
    if caps.get("drop"):
        host["CapDrop"] = [str(c) for c in caps["drop"]]
    if caps.get("add"):
        host["CapAdd"] = [str(c) for c in caps["add"]]
    if sec.get("readOnlyRootFilesystem"):
        host["ReadonlyRootfs"] = True
    profile: JsonObj = sec.get("seccompProfile") or pod_sec.get("seccompProfile") or {}
    kind = profile.get("type", "RuntimeDefault")
    where = "securityContext.seccompProfile.type"
    if kind == "Unconfined":
        host.setdefault("SecurityOpt", []).append("seccomp=unconfined")
    elif kind != "RuntimeDefault":  # RuntimeDefault is the engine's own default profile
        raise TranslationError(where, f"{kind!r}: a node's profile file does not exist here")


def _volumes(items: list[JsonObj]) -> dict[str, JsonObj]:
    volumes: dict[str, JsonObj] = {}
    for i, volume in enumerate(items):
        kinds = sorted(k for k in volume if k != "name")
        if kinds != ["emptyDir"]:
            kind = kinds[0] if kinds else "(no source)"
            raise TranslationError(
                f"spec.volumes[{i}].{kind}",
                "only emptyDir volumes are supported (no host or cluster mounts)",
            )
        empty: JsonObj = volume["emptyDir"] or {}
        for key in sorted(empty):
            if key not in ("sizeLimit", "medium"):
                raise TranslationError(f"spec.volumes[{i}].emptyDir.{key}", "unknown field")
        volumes[str(volume.get("name"))] = empty
    return volumes


def _mounts(items: list[JsonObj], path: str, volumes: dict[str, JsonObj]) -> dict[str, str]:
    """emptyDir mounts as tmpfs: writable by all, exec allowed, like an emptyDir."""
    tmpfs: dict[str, str] = {}
    for i, mount in enumerate(items):
        for key in sorted(mount):
            if key not in ("name", "mountPath", "readOnly"):
                raise TranslationError(f"{path}[{i}].{key}", "not supported by the docker executor")
        name = str(mount.get("name"))
        if name not in volumes:
            raise TranslationError(f"{path}[{i}].name", f"no volume named {name!r}")
        opts = ["ro" if mount.get("readOnly") else "rw", "exec", "nosuid", "nodev", "mode=1777"]
        size = volumes[name].get("sizeLimit")
        if size is not None:
            try:
                opts.append(f"size={int(parse_quantity(size))}")
            except ValueError as exc:
                raise TranslationError(
                    f"spec.volumes[{name}].emptyDir.sizeLimit", str(exc)
                ) from exc
        tmpfs[str(mount["mountPath"])] = ",".join(opts)
    return tmpfs


def _pull_policy(policy: object, image: str) -> str:
    if policy in ("Always", "IfNotPresent", "Never"):
        return str(policy)
    if policy is not None:
        raise TranslationError("spec.containers[0].imagePullPolicy", f"unknown policy {policy!r}")
    last = image.rsplit("/", 1)[-1]
    tagged = ":" in last and not last.endswith(":latest")
    return "IfNotPresent" if tagged or "@" in image else "Always"
