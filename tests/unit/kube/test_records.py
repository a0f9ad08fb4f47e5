"""Slim pod records and the outcome a finished or stuck pod gives its try."""

from __future__ import annotations

import sys
from typing import Any

from leoflow.kube.records import (
    OOM_MESSAGE,
    PodRecord,
    parse_pod,
    parse_time,
    terminal_outcome,
    waiting_outcome,
)

HARDENING_GUIDE_OOM = (
    "out of memory: the kernel killed this task's process. Raise the task's memory "
    "limit (resources.limits.memory); if it uses an engine with its own memory "
    "budget, such as DuckDB, set that budget too, because it sizes itself from "
    "detected RAM and may not see the container's limit."
)


def pod(phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "lf-d-t-7-2",
            "uid": "u-1",
            "resourceVersion": "12",
            "creationTimestamp": "2026-11-30T06:00:00Z",
            "labels": {"leoflow.io/ti": "7", "leoflow.io/try": "2"},
        },
        "spec": {"containers": [{"name": "task", "image": "x"}]},
        "status": {"phase": phase, **status},
    }


def terminated(code: int, reason: str, message: str = "") -> list[dict[str, Any]]:
    state: dict[str, Any] = {"exitCode": code, "reason": reason}
    if message:
        state["message"] = message
    state["finishedAt"] = "2026-11-30T06:01:00Z"
    return [{"name": "task", "state": {"terminated": state}}]


def waiting(reason: str, message: str = "") -> list[dict[str, Any]]:
    return [{"name": "task", "state": {"waiting": {"reason": reason, "message": message}}}]


def test_parse_keeps_the_fields_it_needs() -> None:
    record = parse_pod(pod("Failed", containerStatuses=terminated(137, "OOMKilled")))
    assert record == PodRecord(
        name="lf-d-t-7-2",
        uid="u-1",
        ti_pk=7,
        try_number=2,
        phase="Failed",
        exit_code=137,
        terminated_reason="OOMKilled",
        finished_at="2026-11-30T06:01:00Z",
        creation_timestamp="2026-11-30T06:00:00Z",
    )
    assert record.key == (7, 2) and record.terminal and not record.deleting


def test_parse_reads_pending_scheduling_and_deletion() -> None:
    raw = pod(
        "Pending",
        conditions=[
            {"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}
        ],
    )
    raw["metadata"]["deletionTimestamp"] = "2026-11-30T06:02:00Z"
    record = parse_pod(raw)
    assert record.scheduling_message == "0/3 nodes are available"
    assert record.deleting and not record.terminal


def test_parse_tolerates_a_bare_pod() -> None:
    record = parse_pod({"metadata": {"name": "x", "uid": "u"}})
    assert record.phase == "Pending" and record.key is None


def test_oom_gives_the_hardening_guide_message() -> None:
    outcome = terminal_outcome(
        parse_pod(pod("Failed", containerStatuses=terminated(137, "OOMKilled")))
    )
    assert (outcome.reason, outcome.exit_code) == ("oom", 137)
    assert outcome.message == OOM_MESSAGE == HARDENING_GUIDE_OOM


def test_exit_code_and_success() -> None:
    failed = terminal_outcome(parse_pod(pod("Failed", containerStatuses=terminated(2, "Error"))))
    assert (failed.reason, failed.exit_code) == ("exit_code", 2)
    assert "exited with code 2" in failed.message
    ok = terminal_outcome(parse_pod(pod("Succeeded", containerStatuses=terminated(0, "Completed"))))
    assert (ok.reason, ok.exit_code) == ("success", 0)


def test_agent_exit_codes_are_explained() -> None:
    outcome = terminal_outcome(parse_pod(pod("Failed", containerStatuses=terminated(3, "Error"))))
    assert "could not reach the control plane" in outcome.message


def test_evicted_carries_the_kubelets_message() -> None:
    message = "The node was low on resource: memory."
    outcome = terminal_outcome(parse_pod(pod("Failed", reason="Evicted", message=message)))
    assert outcome.reason == "evicted"
    assert message in outcome.message


def test_failed_without_exit_says_why() -> None:
    outcome = terminal_outcome(parse_pod(pod("Failed", reason="NodeLost", message="gone")))
    assert outcome.reason == "lost" and "NodeLost" in outcome.message


def test_image_pull_failures() -> None:
    for reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
        record = parse_pod(pod("Pending", containerStatuses=waiting(reason, "nope")))
        outcome = waiting_outcome(record)
        assert outcome is not None and outcome.reason == "image_pull"
        assert reason in outcome.message


def test_non_numeric_user_is_explained() -> None:
    msg = (
        "container has runAsNonRoot and image has non-numeric user (leoflow), "
        "cannot verify user is non-root"
    )
    record = parse_pod(pod("Pending", containerStatuses=waiting("CreateContainerConfigError", msg)))
    outcome = waiting_outcome(record)
    assert outcome is not None and outcome.reason == "launch_failed"
    assert msg in outcome.message and "USER numeric" in outcome.message


def test_ordinary_waiting_is_not_an_outcome() -> None:
    record = parse_pod(pod("Pending", containerStatuses=waiting("ContainerCreating")))
    assert waiting_outcome(record) is None


def test_parse_time() -> None:
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time(None) is None and parse_time("soon") is None


def test_record_is_small() -> None:
    """A slim record, not a pod: its own size stays well under the 2 KB budget."""
    record = parse_pod(pod("Failed", containerStatuses=terminated(1, "Error", "x" * 20)))
    size = sys.getsizeof(record) + sum(sys.getsizeof(getattr(record, f)) for f in record.__slots__)
    assert size < 2048
