"""OpenLineage events from ``leoflow lite`` to an HTTP endpoint on a real socket."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.lineage import run_uuid
from tests.e2e.test_lite import StartLite, _cron_dag, _query, lite  # noqa: F401 - fixture
from tests.support.lite_proc import wait
from tests.support.openlineage import validate


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.events: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.keys: list[str | None] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            self.server.events.append(body)
            self.server.paths.append(self.path)
            self.server.keys.append(self.headers.get("authorization"))
        self.send_response(201)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_lite_sends_valid_ordered_events_for_runs_and_tries(
    lite: StartLite,  # noqa: F811 - the fixture imported above
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    collector: Collector,
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    body = (
        "  land: {command: 'true', produces: ['s3://lake/orders'], consumes: [raw_orders]}\n"
        "  mart: {command: 'exit 3', depends_on: [land], retries: 1,\n"
        "         consumes: ['s3://lake/orders'], produces: ['duckdb://shop/main.marts']}\n"
    )
    (folder / "flow.yaml").write_text(_cron_dag("flow", body))
    setting = {"transport": "http", "url": collector.url + "/ol", "endpoint": "api/v1/lineage",
               "api_key_env": "OL_KEY", "namespace": "e2e", "backoff": 0.05}  # fmt: skip
    env.update(LEOFLOW_LINEAGE=json.dumps(setting), OL_KEY="k-123")
    lite(folder)
    # The catchup may owe two runs (a minute's turn during the start): the first is ours.
    first = "select run_id, state from dag_runs where dag_id='flow' order by pk limit 1"
    wait(lambda: [s for _, s in _query(home, first)] == ["failed"], "the run to fail")
    run_id = _query(home, first)[0][0]
    dag_run = run_uuid("flow", run_id)

    def ended() -> bool:
        with collector.lock:
            return any(e["run"]["runId"] == dag_run and e["eventType"] == "FAIL"
                       for e in collector.events)  # fmt: skip

    wait(ended, "the DAG run's FAIL event")

    def ours(event: dict[str, Any]) -> bool:
        parent = event["run"]["facets"].get("parent", {"run": {"runId": None}})
        return dag_run in (event["run"]["runId"], parent["run"]["runId"])

    with collector.lock:
        events = [e for e in collector.events if ours(e)]
        every = list(collector.events)
        assert set(collector.paths) == {"/ol/api/v1/lineage"}
        assert set(collector.keys) == {"Bearer k-123"}
    for event in every:
        validate(event)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_run.setdefault(event["run"]["runId"], []).append(event)
    # the DAG run and three tries (land, mart's two), each START first and one end after it
    assert len(by_run) == 4
    for run_events in by_run.values():
        kinds = [e["eventType"] for e in run_events]
        assert kinds[0] == "START" and len(kinds) == 2, kinds
    jobs = {e["job"]["name"]: e for e in events if e["eventType"] != "START"}
    assert {e["job"]["namespace"] for e in events} == {"e2e"}
    assert [e["eventType"] for e in by_run[dag_run]] == ["START", "FAIL"]
    tries = [e for e in events if e["run"]["runId"] != dag_run]
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in tries} == {dag_run}
    assert {e["run"]["facets"]["parent"]["job"]["name"] for e in tries} == {"flow"}
    land = jobs["flow.land"]
    assert land["eventType"] == "COMPLETE"
    assert [(d["namespace"], d["name"]) for d in land["inputs"]] == [("e2e", "raw_orders")]
    assert [(d["namespace"], d["name"]) for d in land["outputs"]] == [("s3://lake", "orders")]
    mart_ends = [e for e in tries if e["job"]["name"] == "flow.mart" and e["eventType"] != "START"]
    assert [e["eventType"] for e in mart_ends] == ["FAIL", "FAIL"]
    assert "exited with code 3" in mart_ends[0]["run"]["facets"]["errorMessage"]["message"]
