"""Validate events against the OpenLineage spec's own JSON schemas (tests/fixtures/openlineage).

Each facet is checked against the schema of the facet file its ``_schemaURL`` names,
so a facet Leoflow writes wrongly fails here, not only the event's envelope.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "openlineage"


@cache
def _registry() -> Registry[Any]:
    resources = []
    for path in sorted(FIXTURES.glob("*.json")):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def _validator(url: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": url}, registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def facets_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    found = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        found += dataset.get("facets", {}).values()
        found += dataset.get("outputFacets", {}).values()
        found += dataset.get("inputFacets", {}).values()
    return found


def validate(event: dict[str, Any]) -> None:
    """Raise jsonschema's ValidationError unless ``event`` is a valid RunEvent whose every
    facet is valid by its own schema."""
    _validator("https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent").validate(event)
    for facet in facets_of(event):
        _validator(facet["_schemaURL"]).validate(facet)
