"""The wave protocol of ``leoflow dbt-task`` (``leoflow.dbt.wave``) on real files: who
leads, which peers it may run, and what a peer then reports. No dbt runs here (the
e2e tests run it: tests/e2e/test_dbt_wave.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from leoflow.dbt import wave
from leoflow.dbt.task import reason_from_results

PLAN = {
    "version": 1,
    "waves": {
        "1": {
            "dbt.a": {"uid": "model.p.a", "select": ["fqn:p.a"], "dbt_deps": ["dbt.s"],
                      "other_deps": ["extract"]},
            "dbt.b": {"uid": "model.p.b", "select": ["fqn:p.b"], "dbt_deps": ["dbt.s"],
                      "other_deps": []},
            "dbt.c": {"uid": "model.p.c", "select": ["fqn:p.c"], "dbt_deps": ["dbt.t"],
                      "other_deps": []},
            "dbt.d": {"uid": "model.p.d", "select": ["fqn:p.d"], "dbt_deps": [],
                      "other_deps": ["load"]},
        }
    },
}  # fmt: skip


def _env(tmp: Path, try_number: int = 1) -> dict[str, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    plan = tmp / "plan.json"
    plan.write_text(json.dumps(PLAN))
    return {
        wave.ENV_PLAN: str(plan),
        wave.ENV_WAVE: "1",
        wave.ENV_RUNS: str(tmp / "runs"),
        "LEOFLOW_RUN_ID": "manual__2026-12-02T03:00:00+00:00_abc",
        "LEOFLOW_TRY_NUMBER": str(try_number),
    }


def test_the_leader_runs_only_the_peers_it_can_prove_ready_and_each_peer_reports_its_own(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    states = wave.run_states(env)
    assert states is not None
    states.put("dbt.s", wave.SUCCESS)  # t has not run: c waits; d waits for load
    leader = wave.load("dbt.a", env)
    assert leader is not None
    assert wave.begin(leader) == ("lead", None)
    assert leader.peers == ["dbt.b"]
    argv = ["dbt", "run", "--select", "fqn:p.a", "--project-dir", "/p", "--target", "dev"]
    assert wave.batch_argv(leader, argv) == [
        "dbt", "build", "--select", "fqn:p.a", "fqn:p.b", "--indirect-selection", "empty",
        "--project-dir", "/p", "--target", "dev",
    ]  # fmt: skip
    results = {
        "results": [
            {"unique_id": "model.p.a", "status": "success"},
            {"unique_id": "model.p.b", "status": "error", "message": "Binder Error: no col"},
        ]
    }
    filed = wave.file_results(leader, results, reason_from_results)
    assert filed["dbt.a"].ok and not filed["dbt.b"].ok
    assert (states.get("dbt.b") or {})["state"] == wave.FAILED

    peer = wave.load("dbt.b", env)
    assert peer is not None
    assert wave.begin(peer) == ("attach", "dbt.a")
    result = wave.attached_result(peer, "dbt.a")
    assert result is not None and not result.ok
    assert result.reason == "dbt model b failed: Binder Error: no col"

    # c and d were left out; c starting later leads nobody (a and b have started).
    late = wave.load("dbt.c", env)
    assert late is not None and wave.begin(late) == ("alone", None)


def test_a_retry_never_batches_and_a_newer_upstream_makes_a_filed_result_stale(
    tmp_path: Path,
) -> None:
    assert wave.load("dbt.a", _env(tmp_path, try_number=2)) is None
    env = _env(tmp_path)
    states = wave.run_states(env)
    assert states is not None
    states.put("dbt.s", wave.SUCCESS)
    leader = wave.load("dbt.b", env)
    assert leader is not None and wave.begin(leader) == ("alone", None)
    assert leader.peers == []  # a waits for extract, which b does not wait for

    other = _env(tmp_path / "again")
    states = wave.run_states(other)
    assert states is not None
    states.put("dbt.s", wave.SUCCESS)
    leader = wave.load("dbt.a", other)
    assert leader is not None and wave.begin(leader) == ("lead", None)
    results = {"results": [{"unique_id": f"model.p.{n}", "status": "success"} for n in "ab"]}
    wave.file_results(leader, results, reason_from_results)
    # s ran again (cleared) after the batch read it: b's filed result is stale.
    states.put("dbt.s", wave.SUCCESS)
    later = os.stat(states.path("dbt.s")).st_mtime + 10
    os.utime(states.path("dbt.s"), (later, later))
    peer = wave.load("dbt.b", other)
    assert peer is not None and wave.begin(peer) == ("attach", "dbt.a")
    assert wave.attached_result(peer, "dbt.a") is None  # so it runs alone
