"""Pod Security Admission, ``restricted`` level, with the real checks and messages.

Leoflow promises its task pods pass ``restricted`` with default settings;
this is where a test finds out. The checks and their wording follow
k8s.io/pod-security-admission/policy: baseline checks first, then restricted ones,
each group sorted by check ID (Go byte order), restricted checks overriding their
baseline twins (capabilities, seccomp). The message is
``violates PodSecurity "restricted:latest": <reason> (<detail>), ...`` as transcript 03.

Simplified (wording may differ from the real server, verdicts do not): appArmor,
seLinuxOptions, procMount and windowsHostProcess details.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

JsonObj = dict[str, Any]
Check = Callable[[JsonObj], tuple[str, str] | None]

SAFE_SYSCTLS = frozenset(
    {
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
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
ALLOWED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})


def _containers(spec: JsonObj) -> Iterator[JsonObj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _sc(container: JsonObj) -> JsonObj:
    return container.get("securityContext") or {}


def _pod_sc(spec: JsonObj) -> JsonObj:
    return spec.get("securityContext") or {}


def _plural(single: str, plural: str, n: int) -> str:
    return single if n == 1 else plural


def _quote(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _go_quoted_list(names: list[str]) -> str:
    return "[" + " ".join(f'"{n}"' for n in names) + "]"


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_quote(names)}"


# ---- baseline ------------------------------------------------------------------------


def app_armor(spec: JsonObj) -> tuple[str, str] | None:
    bad: list[str] = []
    for owner, sc in [("pod", _pod_sc(spec))] + [
        (f'container "{c["name"]}"', _sc(c)) for c in _containers(spec)
    ]:
        profile = (sc.get("appArmorProfile") or {}).get("type")
        if profile not in (None, "RuntimeDefault", "Localhost"):
            bad.append(owner)
    if bad:
        return (
            "forbidden AppArmor profile",
            f'{" and ".join(bad)} must not set appArmorProfile.type to "Unconfined"',
        )
    return None


def host_namespaces(spec: JsonObj) -> tuple[str, str] | None:
    used = sorted(k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k))
    return ("host namespaces", ", ".join(used)) if used else None


def host_path_volumes(spec: JsonObj) -> tuple[str, str] | None:
    names = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    if names:
        return "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_quote(names)}"
    return None


def host_ports(spec: JsonObj) -> tuple[str, str] | None:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p["hostPort"]) for p in c.get("ports") or [] if p.get("hostPort")]
        if used:
            bad.append(c["name"])
            ports.update(used)
    if not bad:
        return None
    plist = sorted(ports)
    detail = (
        f"{_containers_phrase(bad)} {_plural('uses', 'use', len(bad))} "
        f"{_plural('hostPort', 'hostPorts', len(plist))} {', '.join(plist)}"
    )
    return "hostPort", detail


def privileged(spec: JsonObj) -> tuple[str, str] | None:
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("privileged")]
    if bad:
        return (
            "privileged",
            f"{_containers_phrase(bad)} must not set securityContext.privileged=true",
        )
    return None


def proc_mount(spec: JsonObj) -> tuple[str, str] | None:
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("procMount") not in (None, "Default")]
    if bad:
        return (
            "procMount",
            f'{_containers_phrase(bad)} must not set securityContext.procMount to "Unmasked"',
        )
    return None


def se_linux(spec: JsonObj) -> tuple[str, str] | None:
    owners = [("pod", _pod_sc(spec))] + [
        (f'container "{c["name"]}"', _sc(c)) for c in _containers(spec)
    ]
    bad: list[str] = []
    for owner, sc in owners:
        opts = sc.get("seLinuxOptions") or {}
        if opts.get("type", "") not in SELINUX_TYPES or opts.get("user") or opts.get("role"):
            bad.append(owner)
    if bad:
        return "seLinuxOptions", f"{' and '.join(bad)} set forbidden securityContext.seLinuxOptions"
    return None


def sysctls(spec: JsonObj) -> tuple[str, str] | None:
    names = [s["name"] for s in _pod_sc(spec).get("sysctls") or [] if s["name"] not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(names)) if names else None


def windows_host_process(spec: JsonObj) -> tuple[str, str] | None:
    scs = [_pod_sc(spec)] + [_sc(c) for c in _containers(spec)]
    if any((sc.get("windowsOptions") or {}).get("hostProcess") for sc in scs):
        return (
            "hostProcess",
            "pod or containers must not set securityContext.windowsOptions.hostProcess=true",
        )
    return None


# ---- restricted ----------------------------------------------------------------------


def allow_privilege_escalation(spec: JsonObj) -> tuple[str, str] | None:
    bad = [
        c["name"] for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False
    ]
    if bad:
        return (
            "allowPrivilegeEscalation != false",
            f"{_containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false",
        )
    return None


def capabilities_restricted(spec: JsonObj) -> tuple[str, str] | None:
    missing_drop: list[str] = []
    adding: list[str] = []
    caps: set[str] = set()
    for c in _containers(spec):
        cap = _sc(c).get("capabilities")
        if cap is None:
            missing_drop.append(c["name"])
            continue
        if "ALL" not in (cap.get("drop") or []):
            missing_drop.append(c["name"])
        extra = [a for a in cap.get("add") or [] if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c["name"])
            caps.update(extra)
    details: list[str] = []
    if missing_drop:
        details.append(
            f'{_containers_phrase(missing_drop)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_containers_phrase(adding)} must not include {_quote(sorted(caps))} "
            "in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def restricted_volumes(spec: JsonObj) -> tuple[str, str] | None:
    bad = sorted(
        {
            v["name"]
            for v in spec.get("volumes") or []
            if not any(t in v for t in ALLOWED_VOLUME_TYPES)
        }
    )
    if bad:
        return "restricted volume types", f"volumes {_go_quoted_list(bad)} have restricted types"
    return None


def _pod_or_containers(
    spec: JsonObj, field: str, good: Callable[[Any], bool]
) -> tuple[list[str], list[str], bool, set[str]]:
    """(bad setters, implicitly bad containers, pod set a good value, bad values)."""
    bad_setters: list[str] = []
    bad_values: set[str] = set()
    pod_value = _pod_sc(spec).get(field)
    pod_ok = False
    if pod_value is not None:
        if good(pod_value):
            pod_ok = True
        else:
            bad_setters.append("pod")
            bad_values.add(str(pod_value.get("type") if isinstance(pod_value, dict) else pod_value))
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        value = _sc(c).get(field)
        if value is not None:
            if not good(value):
                explicit.append(c["name"])
                bad_values.add(str(value.get("type") if isinstance(value, dict) else value))
        elif not pod_ok:
            implicit.append(c["name"])
    if explicit:
        bad_setters.append(_containers_phrase(explicit))
    return bad_setters, implicit, pod_ok, bad_values


def run_as_non_root(spec: JsonObj) -> tuple[str, str] | None:
    bad, implicit, _, _ = _pod_or_containers(spec, "runAsNonRoot", lambda v: v is True)
    if bad:
        return (
            "runAsNonRoot != true",
            f"{' and '.join(bad)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def run_as_user(spec: JsonObj) -> tuple[str, str] | None:
    bad: list[str] = ["pod"] if _pod_sc(spec).get("runAsUser") == 0 else []
    containers = [c["name"] for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if containers:
        bad.append(_containers_phrase(containers))
    return ("runAsUser=0", f"{' and '.join(bad)} must not set runAsUser=0") if bad else None


def seccomp_restricted(spec: JsonObj) -> tuple[str, str] | None:
    def good(v: Any) -> bool:
        return isinstance(v, dict) and v.get("type") in ("RuntimeDefault", "Localhost")

    bad, implicit, _, values = _pod_or_containers(spec, "seccompProfile", good)
    if bad:
        return (
            "seccompProfile",
            f"{' and '.join(bad)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}",
        )
    if implicit:
        return (
            "seccompProfile",
            f"pod or {_containers_phrase(implicit)} must set securityContext.seccompProfile.type "
            'to "RuntimeDefault" or "Localhost"',
        )
    return None


# Order: baseline IDs sorted, then restricted IDs sorted (capabilities_baseline and
# seccompProfile_baseline are overridden by their restricted versions).
CHECKS: tuple[Check, ...] = (
    app_armor,  # appArmorProfile
    host_namespaces,  # hostNamespaces
    host_path_volumes,  # hostPathVolumes
    host_ports,  # hostPorts
    privileged,  # privileged
    proc_mount,  # procMount
    se_linux,  # seLinuxOptions
    sysctls,  # sysctls
    windows_host_process,  # windowsHostProcess
    allow_privilege_escalation,  # allowPrivilegeEscalation
    capabilities_restricted,  # capabilities_restricted
    restricted_volumes,  # restrictedVolumes
    run_as_non_root,  # runAsNonRoot
    run_as_user,  # runAsUser
    seccomp_restricted,  # seccompProfile_restricted
)


def restricted_violations(pod: JsonObj) -> list[str]:
    """Each violated rule as ``reason (detail)``, in the real evaluator's order."""
    spec = pod.get("spec") or {}
    out: list[str] = []
    for check in CHECKS:
        result = check(spec)
        if result is not None:
            reason, detail = result
            out.append(f"{reason} ({detail})" if detail else reason)
    return out


def restricted_message(pod: JsonObj) -> str | None:
    """The text after ``pods "x" is forbidden: ``, or None when the pod is allowed."""
    violations = restricted_violations(pod)
    if not violations:
        return None
    return 'violates PodSecurity "restricted:latest": ' + ", ".join(violations)
