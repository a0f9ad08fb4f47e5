"""In a pod or container the task, not its agent, is the kernel's OOM victim."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from leoflow.agent.cgroup import OOM_SCORE_BOOST, prefer_as_oom_victim


@pytest.fixture
def child() -> Iterator[int]:
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def test_in_a_container_the_task_is_raised(child: int) -> None:
    before = adj(child)
    prefer_as_oom_victim(child, in_container=True)
    assert adj(child) == min(1000, before + OOM_SCORE_BOOST)


def test_on_a_lite_host_nothing_changes(child: int, monkeypatch: pytest.MonkeyPatch) -> None:
    before = adj(child)
    prefer_as_oom_victim(child, in_container=False)
    monkeypatch.delenv("LEOFLOW_POD_NAME", raising=False)
    prefer_as_oom_victim(child)
    assert adj(child) == before


def test_a_pod_is_told_by_its_downward_api_name(
    child: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEOFLOW_POD_NAME", "lf-x-1-1")
    before = adj(child)
    prefer_as_oom_victim(child)
    assert adj(child) == min(1000, before + OOM_SCORE_BOOST)


def test_a_process_gone_is_no_error() -> None:
    process = subprocess.Popen(["true"])
    process.wait()
    prefer_as_oom_victim(process.pid, in_container=True)
