"""docs/install-kubernetes.md: its example objects are valid, never templated, and the
APF FlowSchemas classify every apiserver call Leoflow makes exactly once."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import yaml

from leoflow.kube.calls import CALLS
from tests.chart.chartlib import CHART, REPO

DOC = REPO / "docs" / "install-kubernetes.md"


def _objects() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    docs = [d for b in blocks for d in yaml.safe_load_all(b) if isinstance(d, dict)]
    return [d for d in docs if "apiVersion" in d and "kind" in d]


def test_doc_objects_are_valid_kubernetes() -> None:
    objects = _objects()
    kinds = {o["kind"] for o in objects}
    assert {
        "ResourceQuota",
        "LimitRange",
        "PriorityClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "Node",
    } <= kinds
    version = kubernetes_validate.latest_version()
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


def test_platform_objects_are_not_templated() -> None:
    templates = "".join(p.read_text() for p in (CHART / "templates").iterdir())
    for kind in (
        "ResourceQuota",
        "LimitRange",
        "PriorityClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
    ):
        assert f"kind: {kind}" not in templates


def test_flowschemas_classify_every_call_once() -> None:
    namespaces = {"task": "leoflow-tasks", "release": "leoflow-system"}
    schemas = [o for o in _objects() if o["kind"] == "FlowSchema"]
    for call in CALLS:
        matched = []
        for fs in schemas:
            for rule in fs["spec"]["rules"]:
                sa = [s["serviceAccount"] for s in rule["subjects"]]
                assert sa == [{"name": "leoflow-scheduler", "namespace": "leoflow-system"}]
                for rr in rule["resourceRules"]:
                    if (
                        call.verb in rr["verbs"]
                        and call.group in rr["apiGroups"]
                        and call.resource in rr["resources"]
                        and namespaces[call.scope] in rr["namespaces"]
                    ):
                        matched.append(fs["metadata"]["name"])
        assert len(matched) == 1, f"{call.name}: matched by {matched}"
    precedences = [fs["spec"]["matchingPrecedence"] for fs in schemas]
    assert max(precedences) < 9000  # before the built-in service-accounts schema
