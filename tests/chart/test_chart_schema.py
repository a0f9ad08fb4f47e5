"""Every rendered object validates against the Kubernetes OpenAPI schema (strict)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

Docs = list[dict[str, Any]]
K8S_VERSION = kubernetes_validate.latest_version()


def test_schema_version_is_recent() -> None:
    major, minor = (int(p) for p in K8S_VERSION.split(".")[:2])
    assert (major, minor) >= (1, 29)


def test_rendered_objects_are_valid(variant: tuple[str, Docs]) -> None:
    name, docs = variant
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(
                f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}"
            )
    assert errors == [], f"{name} (Kubernetes {K8S_VERSION}):\n" + "\n".join(errors)


def test_strict_validation_catches_an_unknown_field() -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "x"},
        "automountServiceAccountTokens": False,
    }
    try:
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError:
        return
    raise AssertionError("strict validation accepted an unknown field")
