"""An apiserver outage in the middle of a 40-task DAG (``retries: 0``), at full scale.

The scenario of ``tests/integration/kube/test_outage_dag.py`` (real scheduler, SQLite
store, Kubernetes executor, the fake apiserver refusing connections) with the
default window (10 min) and retry cap (10 s): prints whether the run succeeded, the
pods created and how long it took. The suite runs 20 s and a 1/6-scale 90 s; this
runs any length at full scale.

    python benchmarks/bench_outage.py [--outage 20]     # --outage 90: about 110 s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pytest  # noqa: E402

from tests.fakekube import FakeApiServer  # noqa: E402
from tests.integration.kube.conftest import TASK_NS, TOKEN  # noqa: E402
from tests.integration.kube.test_outage_dag import Scale, run_through_outage  # noqa: E402


async def main(outage: float) -> None:
    patch = pytest.MonkeyPatch()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with FakeApiServer(
                token=TOKEN, restricted_namespaces=[TASK_NS], bookmark_interval=1.0
            ) as server:
                # Raises (AssertionError) unless: success, every task success on try 1,
                # 40 pods, creates refused and tried again, `why` said so.
                ends = await run_through_outage(server, Path(tmp), patch, Scale(outage=outage))
                pods = len(server.pod_names(TASK_NS))
    finally:
        patch.undo()
    print(
        json.dumps(
            {
                "outage_s": outage,
                "tasks": 40,
                "retries": 0,
                "succeeded_on_try_1": sum(
                    1 for s, n, _ in ends.values() if s.value == "success" and n == 1
                ),
                "pods_created": pods,
                "judged_lost": sum(1 for _, _, reason in ends.values() if reason == "lost"),
                "wall_s": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the apiserver is gone")
    asyncio.run(main(parser.parse_args().outage))
