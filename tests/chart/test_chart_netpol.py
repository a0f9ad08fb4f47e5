"""NetworkPolicies: off by default; when on, Leoflow's own lane only (ADR 0054 rung 5)."""

from __future__ import annotations

import ipaddress
from typing import Any

from tests.chart.chartlib import ALL_TOGGLES, RELEASE_NS, TASK_NS, of_kind, one

Docs = list[dict[str, Any]]
FORBIDDEN = [  # all IPv4: an IPv6 block can never reach them
    ipaddress.IPv4Network(n)
    for n in ("169.254.169.254/32", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
]
SCHEDULER = {
    "app.kubernetes.io/name": "leoflow",
    "app.kubernetes.io/instance": "leoflow",
    "app.kubernetes.io/component": "scheduler",
}
TASK_PODS = {"app.kubernetes.io/managed-by": "leoflow"}


def ipblock_reaches_forbidden(block: dict[str, Any]) -> list[str]:
    """Forbidden ranges an ipBlock lets traffic reach (after its `except` list)."""
    cidr = ipaddress.ip_network(block["cidr"])
    excepts = [ipaddress.ip_network(e) for e in block.get("except") or []]
    return [
        str(net)
        for net in FORBIDDEN
        if net.version == cidr.version
        and cidr.overlaps(net)
        and not any(net.subnet_of(e) for e in excepts if isinstance(e, ipaddress.IPv4Network))
    ]


def test_ipblock_check_itself() -> None:
    assert ipblock_reaches_forbidden({"cidr": "0.0.0.0/0"}) == [str(n) for n in FORBIDDEN]
    assert (
        ipblock_reaches_forbidden(
            {
                "cidr": "0.0.0.0/0",
                "except": ["169.254.169.254/32", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
            }
        )
        == []
    )
    assert ipblock_reaches_forbidden({"cidr": "10.1.0.0/16"}) == ["10.0.0.0/8"]
    assert ipblock_reaches_forbidden({"cidr": "203.0.113.0/24"}) == []


def test_off_by_default(render: Any) -> None:
    assert not of_kind(render(), "NetworkPolicy")


def _task_policy(docs: Docs) -> dict[str, Any]:
    policy = one(docs, "NetworkPolicy", "leoflow-tasks")
    assert policy["metadata"]["namespace"] == TASK_NS
    assert policy["spec"]["podSelector"] == {"matchLabels": TASK_PODS}
    return policy


def _check_task_egress(policy: dict[str, Any], internet: bool) -> None:
    spec = policy["spec"]
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    assert not spec.get("ingress"), "task pods accept no ingress"
    kinds = []
    for rule in spec["egress"]:
        assert rule.get("to"), "an egress rule without `to` reaches everything"
        for peer in rule["to"]:
            if "ipBlock" in peer:
                assert ipblock_reaches_forbidden(peer["ipBlock"]) == []
        ports = sorted((p["protocol"], p["port"]) for p in rule.get("ports") or [])
        if ports == [("TCP", 53), ("UDP", 53)]:
            assert rule["to"] == [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                    }
                }
            ]
            kinds.append("dns")
        elif ports == [("TCP", 50051)]:
            assert rule["to"] == [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": RELEASE_NS}
                    },
                    "podSelector": {"matchLabels": SCHEDULER},
                }
            ]
            kinds.append("grpc")
        else:
            assert internet and not ports, f"unexpected egress rule {rule}"
            assert [p["ipBlock"]["cidr"] for p in rule["to"]] == ["0.0.0.0/0"]
            kinds.append("internet")
    assert kinds == ["dns", "grpc"] + (["internet"] if internet else [])


def test_task_policy_dns_and_grpc_only(render: Any) -> None:
    docs = render("--set", "taskNetworkPolicy.enabled=true", "--set", f"taskNamespace={TASK_NS}")
    _check_task_egress(_task_policy(docs), internet=False)
    assert not [
        p for p in of_kind(docs, "NetworkPolicy") if p["metadata"]["name"] != "leoflow-tasks"
    ]


def test_task_policy_internet_egress_excludes_metadata_and_private(render: Any) -> None:
    docs = render(*ALL_TOGGLES)
    _check_task_egress(_task_policy(docs), internet=True)


def test_no_policy_reaches_metadata_or_rfc1918(variant: tuple[str, Docs]) -> None:
    _, docs = variant
    for policy in of_kind(docs, "NetworkPolicy"):
        for rule in policy["spec"].get("egress") or []:
            for peer in rule.get("to") or []:
                if "ipBlock" in peer:
                    assert ipblock_reaches_forbidden(peer["ipBlock"]) == [], policy["metadata"]


def test_control_plane_ingress_policies(render: Any) -> None:
    docs = render(*ALL_TOGGLES)
    api = one(docs, "NetworkPolicy", "leoflow-api")
    assert api["spec"]["policyTypes"] == ["Ingress"]
    assert api["spec"]["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}]}]
    sched = one(docs, "NetworkPolicy", "leoflow-scheduler")
    assert sched["spec"]["podSelector"] == {"matchLabels": SCHEDULER}
    assert sched["spec"]["policyTypes"] == ["Ingress"]
    grpc, metrics = sched["spec"]["ingress"]
    assert grpc == {
        "from": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": TASK_NS}},
                "podSelector": {"matchLabels": TASK_PODS},
            }
        ],
        "ports": [{"port": 50051, "protocol": "TCP"}],
    }
    assert metrics["ports"] == [{"port": 9090, "protocol": "TCP"}]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]
    pg = one(docs, "NetworkPolicy", "leoflow-postgresql")
    assert pg["spec"]["ingress"][0]["ports"] == [{"port": 5432, "protocol": "TCP"}]


def test_scheduler_ingress_only_grpc_from_tasks_by_default(render: Any) -> None:
    docs = render("--set", "networkPolicy.enabled=true")
    sched = one(docs, "NetworkPolicy", "leoflow-scheduler")
    assert len(sched["spec"]["ingress"]) == 1
    assert sched["spec"]["ingress"][0]["ports"] == [{"port": 50051, "protocol": "TCP"}]
    ns_sel = sched["spec"]["ingress"][0]["from"][0]["namespaceSelector"]
    assert ns_sel == {"matchLabels": {"kubernetes.io/metadata.name": RELEASE_NS}}
