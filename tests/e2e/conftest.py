"""End to end: the real `leoflow` command in a subprocess, on a private LEOFLOW_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LEOFLOW = str(Path(sys.executable).parent / "leoflow")

Leoflow = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    values["LEOFLOW_HOME"] = str(home)
    return values


@pytest.fixture
def leoflow(env: dict[str, str]) -> Leoflow:
    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [LEOFLOW, *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


# The container engine and the built image (tests/support/containers.py).
from tests.support.containers import container_image, dbt_image, docker_host  # noqa: E402, F401
