"""Pod → container: every golden pod of the pod builder translates, or is refused by
name for the field a container on one host cannot honour; the hardening each pod
setting asks for reaches the create request; kubelet's runAsNonRoot check."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from leoflow.executor.docker.quantity import parse_quantity
from leoflow.executor.docker.translate import (
    TranslationError,
    check_non_root,
    translate,
)

GOLDEN = Path(__file__).parents[1] / "kube" / "golden"
UID = "0b5c6c1e-7f0d-4c8e-9d55-2f1f5f0c9a11"

# The golden pods a container cannot run, and the field each is refused for.
REFUSED = {
    "image_and_pull_secrets": "spec.imagePullSecrets",
    "ephemeral_storage": "spec.containers[0].resources.limits.ephemeral-storage",
    "passthrough_service_account": "spec.serviceAccountName",
    "passthrough_resource_claims": "spec.resourceClaims",
}
# The golden pods whose scheduling field is ignored on one host, and that field.
IGNORED = {
    "passthrough_affinity": "spec.affinity",
    "passthrough_node_selector": "spec.nodeSelector",
    "passthrough_priority_class_name": "spec.priorityClassName",
    "passthrough_tolerations": "spec.tolerations",
    "passthrough_topology_spread_constraints": "spec.topologySpreadConstraints",
}


def golden(name: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    return pod


def test_every_golden_pod_is_named_here() -> None:
    names = {p.stem for p in GOLDEN.glob("*.json")}
    assert names, f"no golden pods in {GOLDEN}"
    translated = names - set(REFUSED)
    for name in sorted(translated):
        translate(golden(name), uid=UID)
    for name, path in REFUSED.items():
        with pytest.raises(TranslationError) as info:
            translate(golden(name), uid=UID)
        assert info.value.path == path, (name, str(info.value))
    assert set(REFUSED) <= names and set(IGNORED) <= names


@pytest.mark.parametrize("name", sorted(IGNORED))
def test_scheduling_fields_are_ignored_and_said(name: str) -> None:
    assert translate(golden(name), uid=UID).ignored == (IGNORED[name],)


def test_default_pod_hardening() -> None:
    req = translate(golden("default"), uid=UID)
    body, host = req.body, req.body["HostConfig"]
    assert req.name == "lf-nightly-sales-extract-42-1"
    assert body["Image"] == "ghcr.io/leoflow/leoflow:0.1.0"
    assert body["Entrypoint"] == ["leoflow", "agent"] and body["Cmd"] == []
    assert "User" not in body, "no UID pinned: the image's USER runs"
    assert host["CapDrop"] == ["ALL"] and "CapAdd" not in host
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["GroupAdd"] == ["65532"]
    assert host["RestartPolicy"] == {"Name": "no"}
    assert host["Tmpfs"] == {} and "ReadonlyRootfs" not in host
    assert "Binds" not in host and "Mounts" not in host, "no service-account token, no host path"
    assert "Memory" not in host and "NanoCpus" not in host
    env = dict(e.split("=", 1) for e in body["Env"])
    assert env["LEOFLOW_POD_NAME"] == req.name and env["LEOFLOW_POD_UID"] == UID
    assert env["LEOFLOW_AGENT_TICKET"] == "lft_single-use-ticket"
    assert body["Labels"]["leoflow.io/try"] == "1"
    assert body["Labels"]["leoflow.io/run-id"] == "scheduled__2026-11-30T03:00:00+00:00"
    assert req.run_as_non_root and req.stop_grace == 30 and body["StopTimeout"] == 30
    assert req.pull_policy == "IfNotPresent"


def test_read_only_root_and_tmp() -> None:
    host = translate(golden("read_only_root_filesystem"), uid=UID).body["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["Tmpfs"] == {"/tmp": "rw,exec,nosuid,nodev,mode=1777"}
    pod = golden("read_only_root_filesystem")
    pod["spec"]["volumes"][0]["emptyDir"] = {"sizeLimit": "64Mi"}
    host = translate(pod, uid=UID).body["HostConfig"]
    assert host["Tmpfs"]["/tmp"].endswith(",size=67108864")


def test_limits_and_requests() -> None:
    req = translate(golden("resources"), uid=UID)
    host = req.body["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 2 * 1024**3
    assert "NanoCpus" not in host
    assert req.ignored == ("spec.containers[0].resources.requests",)
    pod = golden("resources")
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1500m"
    assert translate(pod, uid=UID).body["HostConfig"]["NanoCpus"] == 1_500_000_000


def test_grace_and_run_as_non_root_off() -> None:
    assert (
        translate(golden("passthrough_termination_grace_period_seconds"), uid=UID).stop_grace == 45
    )
    req = translate(golden("run_as_non_root_off"), uid=UID)
    assert not req.run_as_non_root
    check_non_root(req, "")  # root allowed when the pod does not forbid it


def pod_with(mutate: Any) -> dict[str, Any]:
    pod = copy.deepcopy(golden("default"))
    mutate(pod["spec"], pod["spec"]["containers"][0])
    return pod


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda s, c: c["securityContext"].update(privileged=True),
         "spec.containers[0].securityContext.privileged"),
        (lambda s, c: s.update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
         "spec.volumes[0].hostPath"),
        (lambda s, c: s.update(hostNetwork=True), "spec.hostNetwork"),
        (lambda s, c: s.update(hostPID=True), "spec.hostPID"),
        (lambda s, c: s.update(automountServiceAccountToken=True),
         "spec.automountServiceAccountToken"),
        (lambda s, c: s.pop("automountServiceAccountToken"), "spec.automountServiceAccountToken"),
        (lambda s, c: s.update(restartPolicy="Always"), "spec.restartPolicy"),
        (lambda s, c: s.update(initContainers=[{}]), "spec.initContainers"),
        (lambda s, c: s["containers"].append(dict(c)), "spec.containers"),
        (lambda s, c: c.update(ports=[{"containerPort": 80}]), "spec.containers[0].ports"),
        (lambda s, c: c.update(envFrom=[{"secretRef": {"name": "x"}}]),
         "spec.containers[0].envFrom"),
        (lambda s, c: c["env"].append({"name": "P", "valueFrom": {"secretKeyRef": {"name": "x"}}}),
         "spec.containers[0].env[4].valueFrom.secretKeyRef"),
        (lambda s, c: c["env"].append(
            {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}),
         "spec.containers[0].env[4].valueFrom.fieldRef.fieldPath"),
        (lambda s, c: c.update(resources={"limits": {"nvidia.com/gpu": "1"}}),
         "spec.containers[0].resources.limits.nvidia.com/gpu"),
        (lambda s, c: c.update(resources={"limits": {"memory": "lots"}}),
         "spec.containers[0].resources.limits.memory"),
        (lambda s, c: c["securityContext"].update(seLinuxOptions={"level": "s0"}),
         "spec.containers[0].securityContext.seLinuxOptions"),
        (lambda s, c: s["securityContext"].update(seccompProfile={"type": "Localhost"}),
         "securityContext.seccompProfile.type"),
        (lambda s, c: s["securityContext"].update(sysctls=[{"name": "a", "value": "1"}]),
         "spec.securityContext.sysctls"),
        (lambda s, c: c.update(volumeMounts=[{"name": "nope", "mountPath": "/x"}]),
         "spec.containers[0].volumeMounts[0].name"),
    ],
)  # fmt: skip
def test_refused_by_name(mutate: Any, path: str) -> None:
    with pytest.raises(TranslationError) as info:
        translate(pod_with(mutate), uid=UID)
    assert info.value.path == path
    assert str(info.value).startswith(path + ": ")


def test_user_command_args_env_expansion() -> None:
    def mutate(s: dict[str, Any], c: dict[str, Any]) -> None:
        s["securityContext"].update(runAsUser=1000, runAsGroup=2000, supplementalGroups=[5])
        c["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE"]
        c["env"].append({"name": "GREETING", "value": "hi $(LEOFLOW_POD_NAME) $$(x)"})
        c["args"] = ["$(GREETING)", "$(UNDEFINED)"]

    body = translate(pod_with(mutate), uid=UID).body
    assert body["User"] == "1000:2000"
    assert body["HostConfig"]["GroupAdd"] == ["5", "65532"]
    assert body["HostConfig"]["CapAdd"] == ["NET_BIND_SERVICE"]
    assert "GREETING=hi lf-nightly-sales-extract-42-1 $(x)" in body["Env"]
    assert body["Cmd"] == ["hi lf-nightly-sales-extract-42-1 $(x)", "$(UNDEFINED)"]
    no_command = pod_with(lambda s, c: (c.pop("command"), c.update(args=["version"])))
    body = translate(no_command, uid=UID).body
    assert "Entrypoint" not in body and body["Cmd"] == ["version"]


def test_uid_needed_for_the_downward_api() -> None:
    with pytest.raises(TranslationError, match=r"metadata\.uid"):
        translate(golden("default"))
    pod = golden("default")
    pod["metadata"]["uid"] = UID
    assert f"LEOFLOW_POD_UID={UID}" in translate(pod).body["Env"]


@pytest.mark.parametrize(
    ("image_user", "refused"),
    [
        ("65532:65532", None),
        ("65532", None),
        ("", "would run as root"),
        ("0", "would run as root"),
        ("root", "non-numeric USER"),
        ("app:app", "non-numeric USER"),
    ],
)
def test_run_as_non_root_against_the_image_user(image_user: str, refused: str | None) -> None:
    req = translate(golden("default"), uid=UID)
    if refused is None:
        check_non_root(req, image_user)
        return
    with pytest.raises(TranslationError, match=refused) as info:
        check_non_root(req, image_user)
    assert info.value.path == "securityContext.runAsNonRoot"


def test_pinned_uid_decides_non_root() -> None:
    pinned = translate(pod_with(lambda s, c: s["securityContext"].update(runAsUser=1000)), uid=UID)
    check_non_root(pinned, "root")  # the kubelet trusts a numeric runAsUser over the image
    root = translate(pod_with(lambda s, c: s["securityContext"].update(runAsUser=0)), uid=UID)
    with pytest.raises(TranslationError, match="runAsUser 0"):
        check_non_root(root, "65532")


@pytest.mark.parametrize(
    ("text", "value"),
    [("2Gi", 2 * 1024**3), ("500m", 0.5), ("1e3", 1000), ("129M", 129_000_000), ("1.5", 1.5)],
)
def test_quantities(text: str, value: float) -> None:
    assert float(parse_quantity(text)) == value
