"""Metrics are prometheus_client's own unless the process serves none (`leoflow run`)."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
from leoflow.scheduler import instruments
if sys.argv[1] == "none":
    instruments.serve_none()
from leoflow.scheduler import metrics
metrics.RUNNING.inc()
metrics.TASKS_FINISHED.labels(state="success").inc()
metrics.QUEUE_DEPTH.labels(reason="parallelism").set(3)
metrics.DISPATCH_LATENCY.observe(0.01)
print("prometheus_client" in sys.modules, type(metrics.RUNNING).__name__)
if sys.argv[1] == "served":
    from prometheus_client import REGISTRY
    print(REGISTRY.get_sample_value("leoflow_running_tasks"),
          REGISTRY.get_sample_value("leoflow_task_tries_finished_total", {"state": "success"}),
          REGISTRY.get_sample_value("leoflow_grpc_requests_total", {"method": "x", "code": "OK"}))
"""


def _probe(mode: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_by_default_metrics_are_real_and_registered() -> None:
    assert _probe("served") == ["True", "Gauge", "1.0", "1.0", "None"]


def test_a_process_that_serves_none_never_imports_prometheus_client() -> None:
    assert _probe("none") == ["False", "_Nothing"]


def test_the_grpc_call_counts_are_exported_on_scrape() -> None:
    probe = (
        "from leoflow.scheduler.agent_endpoint import GRPC_REQUESTS\n"
        "from prometheus_client import REGISTRY\n"
        "GRPC_REQUESTS.counts[('Heartbeat', 'OK')] = 7\n"
        "print(REGISTRY.get_sample_value('leoflow_grpc_requests_total',"
        " {'method': 'Heartbeat', 'code': 'OK'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert float(done.stdout) == 7
