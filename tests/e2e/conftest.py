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


# `leoflow lite` (and `leoflow scheduler`) hold the store's lease and stop leading when
# no renewal gets through for renew_deadline (10 s by default): a process that a loaded
# machine leaves without CPU that long steps down, and Lite exits ("lost the store's
# lease"). Seen with 8 suites on 2 cores: 24.8 s without a renewal. What these tests
# check is not the lease's timing, so its deadline outlasts any test; the lease's
# refusals and takeovers (test_lite_lease.py) do not depend on it.
PATIENT_LEASE = {
    "LEOFLOW_LEADER_ELECTION__RENEW_DEADLINE": "3600",
    "LEOFLOW_LEADER_ELECTION__LEASE_DURATION": "3660",
}


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    values["LEOFLOW_HOME"] = str(home)
    values.update(PATIENT_LEASE)
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
