"""Fixtures for the Helm chart tests: a helm binary and cached renderings.

helm comes from $LEOFLOW_HELM or .tools/bin/helm (scripts/install-helm.sh). Without
it the tests fail, never skip: the chart is unverified without helm.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chart.chartlib import VARIANTS, helm_path, render_docs


@pytest.fixture(scope="session")
def helm() -> Path:
    return helm_path()


@pytest.fixture(scope="session")
def render(helm: Path) -> Callable[..., list[dict[str, Any]]]:
    def _render(*args: str) -> list[dict[str, Any]]:
        return render_docs(helm, *args)

    return _render


@pytest.fixture(params=sorted(VARIANTS), scope="session")
def variant(request: pytest.FixtureRequest, helm: Path) -> tuple[str, list[dict[str, Any]]]:
    """(name, rendered objects) for each of: defaults, all toggles, production example."""
    name = request.param
    return name, render_docs(helm, *VARIANTS[name])
