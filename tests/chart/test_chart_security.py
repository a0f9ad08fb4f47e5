"""Control-plane pods pass Pod Security `restricted`; tokens only where needed."""

from __future__ import annotations

from typing import Any

from chartlib import ALL_TOGGLES, RELEASE_NS, container, of_kind, one, pod_spec

Docs = list[dict[str, Any]]

# Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Every way a pod spec breaks Pod Security `restricted` (which includes baseline)."""
    bad: list[str] = []
    psc = spec.get("securityContext") or {}
    containers = (
        (spec.get("initContainers") or [])
        + spec["containers"]
        + (spec.get("ephemeralContainers") or [])
    )
    # --- baseline
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            bad.append(f"{field} is set")
    if spec.get("hostUsers") is False:
        pass  # user namespaces are allowed
    for sysctl in psc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            bad.append(f"unsafe sysctl {sysctl['name']}")
    for vol in spec.get("volumes") or []:
        types = set(vol) - {"name"}
        if "hostPath" in types:
            bad.append(f"hostPath volume {vol['name']}")
        if not types <= RESTRICTED_VOLUME_TYPES:
            bad.append(f"volume {vol['name']} of type {sorted(types)}")

    def check_context(where: str, sc: dict[str, Any]) -> None:
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            bad.append(f"{where}: seLinuxOptions {se}")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{where}: appArmorProfile Unconfined")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{where}: seccompProfile Unconfined")
        if sc.get("runAsUser") == 0:
            bad.append(f"{where}: runAsUser 0")

    check_context("pod", psc)
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    pod_seccomp_ok = pod_seccomp in {"RuntimeDefault", "Localhost"}
    pod_nonroot = psc.get("runAsNonRoot") is True
    for c in containers:
        where = f"container {c['name']}"
        sc = c.get("securityContext") or {}
        check_context(where, sc)
        if sc.get("privileged"):
            bad.append(f"{where}: privileged")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{where}: procMount {sc['procMount']}")
        if sc.get("windowsOptions", {}).get("hostProcess"):
            bad.append(f"{where}: hostProcess")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                bad.append(f"{where}: hostPort {port['hostPort']}")
        caps = sc.get("capabilities") or {}
        added = set(caps.get("add") or [])
        if not added <= BASELINE_CAPABILITIES:
            bad.append(f"{where}: adds {sorted(added - BASELINE_CAPABILITIES)}")
        # --- restricted
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{where}: allowPrivilegeEscalation is not false")
        nonroot = sc.get("runAsNonRoot")
        if nonroot is False or (nonroot is None and not pod_nonroot):
            bad.append(f"{where}: runAsNonRoot is not true")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is None and not pod_seccomp_ok:
            bad.append(f"{where}: no RuntimeDefault/Localhost seccompProfile")
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{where}: capabilities do not drop ALL")
        if not added <= {"NET_BIND_SERVICE"}:
            bad.append(f"{where}: adds capabilities beyond NET_BIND_SERVICE")
    return bad


def workloads(docs: Docs) -> list[dict[str, Any]]:
    return of_kind(docs, "Deployment") + of_kind(docs, "StatefulSet")


def test_the_check_catches_violations() -> None:
    spec = {
        "hostNetwork": True,
        "securityContext": {},
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "c",
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "privileged": True},
            }
        ],
    }
    bad = "\n".join(restricted_violations(spec))
    for expected in (
        "hostNetwork",
        "hostPath",
        "privileged",
        "SYS_ADMIN",
        "allowPrivilegeEscalation",
        "runAsNonRoot",
        "seccompProfile",
        "drop ALL",
    ):
        assert expected in bad


def test_control_plane_pods_pass_restricted(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    assert workloads(docs)
    for w in workloads(docs):
        assert restricted_violations(pod_spec(w)) == [], f"{name}: {w['metadata']['name']}"


def test_control_plane_hardening_beyond_restricted(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    for w in workloads(docs):
        spec = pod_spec(w)
        assert "runAsUser" not in spec["securityContext"] or w["kind"] == "StatefulSet"
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp, f"{c['name']}: no /tmp mount"
            volume = [v for v in spec["volumes"] if v["name"] == tmp[0]["name"]]
            assert "emptyDir" in volume[0]


def test_leoflow_pods_pin_no_uid(variant: tuple[str, Docs]) -> None:
    """The image's numeric USER is what runAsNonRoot verifies; the chart pins none."""
    _, docs = variant
    for w in of_kind(docs, "Deployment"):
        spec = pod_spec(w)
        assert "runAsUser" not in spec["securityContext"]
        assert all("runAsUser" not in c["securityContext"] for c in spec["containers"])


def test_tokens_only_where_needed_shared_account(render: Any) -> None:
    docs = render()
    api = pod_spec(one(docs, "Deployment", "leoflow-api"))
    sched = pod_spec(one(docs, "Deployment", "leoflow-scheduler"))
    assert api["automountServiceAccountToken"] is False
    assert sched["automountServiceAccountToken"] is True
    # split off: one ServiceAccount, shared
    assert [sa["metadata"]["name"] for sa in of_kind(docs, "ServiceAccount")] == [
        "leoflow-scheduler"
    ]
    assert api["serviceAccountName"] == sched["serviceAccountName"] == "leoflow-scheduler"
    for sa in of_kind(docs, "ServiceAccount"):
        assert sa["automountServiceAccountToken"] is False


def test_split_gives_the_api_an_unbound_tokenless_account(render: Any) -> None:
    for args in (("--set", "split.enabled=true"), ALL_TOGGLES):
        docs = render(*args)
        api = pod_spec(one(docs, "Deployment", "leoflow-api"))
        sched = pod_spec(one(docs, "Deployment", "leoflow-scheduler"))
        assert api["serviceAccountName"] == "leoflow-api"
        assert sched["serviceAccountName"] == "leoflow-scheduler"
        api_sa = one(docs, "ServiceAccount", "leoflow-api")
        assert api_sa["metadata"]["namespace"] == RELEASE_NS
        assert api_sa["automountServiceAccountToken"] is False
        assert api["automountServiceAccountToken"] is False
        for binding in of_kind(docs, "RoleBinding"):
            names = {s["name"] for s in binding["subjects"]}
            assert "leoflow-api" not in names, binding["metadata"]["name"]


def test_api_container_sees_no_service_account_token_volume(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    api = one(docs, "Deployment", "leoflow-api")
    assert not [v for v in pod_spec(api)["volumes"] if "projected" in v]
    mounts = container(api, "api")["volumeMounts"]
    assert not [m for m in mounts if "serviceaccount" in m["mountPath"]]
