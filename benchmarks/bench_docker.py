"""The docker executor: what a container per task costs, and where it goes.

- launch → agent's first RPC: a chain of 20 `true` tasks run with `--executor docker`;
  per task, from queued (the executor is handed the launch: the container is created
  then) to started (the agent's Start RPC, after its Exchange), median of 20;
- where that goes: the engine's own create, start, wait and remove of a container
  running `true` from the same image (median of 20), and the agent's interpreter and
  grpc import inside a container (`leoflow agent --version`-like: its module import);
- W1: 200 independent `true` tasks, max_active_tasks 8, `--executor docker` against
  `--executor agent`, whole `leoflow run` wall time, as a ratio.

Needs an engine (DOCKER_HOST, default /var/run/docker.sock) and the image
(LEOFLOW_TEST_IMAGE, default localhost/leoflow:ci); without them it prints why and
exits 0, so `make bench` runs where there is none.

    python benchmarks/bench_docker.py [--skip-w1]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_lite import fan_out, run_once

IMAGE = os.environ.get("LEOFLOW_TEST_IMAGE", "localhost/leoflow:ci")
HOST = os.environ.setdefault("DOCKER_HOST", "unix:///var/run/docker.sock")  # runs inherit it
API = "/v1.41"


def engine() -> httpx.Client:
    transport = httpx.HTTPTransport(uds=HOST.removeprefix("unix://"))
    return httpx.Client(transport=transport, base_url="http://engine", timeout=120)


def launch_to_first_rpc(tmp: Path) -> list[float]:
    lines = []
    for i in range(20):
        lines.append(f'  t{i:02d}:\n    command: ["true"]')
        if i:
            lines.append(f"    depends_on: [t{i - 1:02d}]")
    dag = tmp / "chain.yaml"
    dag.write_text(f"dag_id: dchain\nimage: {IMAGE}\ntasks:\n" + "\n".join(lines) + "\n")
    home = tmp / "chain-home"
    run_once(dag, "docker", home)
    with sqlite3.connect(home / "leoflow.db") as db:
        rows = db.execute("select queued_at, started_at from task_instances").fetchall()
    return [started - queued for queued, started in rows]


def engine_cycle(client: httpx.Client, cmd: list[str]) -> dict[str, float]:
    body: dict[str, Any] = {
        "Image": IMAGE, "Entrypoint": cmd[:1], "Cmd": cmd[1:],
        "HostConfig": {"NetworkMode": "host", "CapDrop": ["ALL"],
                       "SecurityOpt": ["no-new-privileges"]},
    }  # fmt: skip
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    ref = client.post(API + "/containers/create", json=body).raise_for_status().json()["Id"]
    t1 = time.perf_counter()
    client.post(f"{API}/containers/{ref}/start").raise_for_status()
    t2 = time.perf_counter()
    client.post(f"{API}/containers/{ref}/wait", params={"condition": "not-running"})
    t3 = time.perf_counter()
    client.delete(f"{API}/containers/{ref}", params={"force": "true"}).raise_for_status()
    t4 = time.perf_counter()
    times.update(create=t1 - t0, start=t2 - t1, run=t3 - t2, remove=t4 - t3)
    return times


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(s[k] for s in samples) * 1000, 1) for k in samples[0]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-w1", action="store_true")
    args = parser.parse_args()
    try:
        with engine() as client:
            client.get(API + "/_ping").raise_for_status()
            if client.get(f"{API}/images/{IMAGE.replace('/', '%2F')}/json").status_code != 200:
                print(json.dumps({"skipped": f"image {IMAGE} not built (make image)"}))
                return 0
            bare = [engine_cycle(client, ["true"]) for _ in range(20)]
            agent_import = [
                engine_cycle(client, ["/opt/leoflow/bin/python", "-c", "import leoflow.agent.cli"])
                for _ in range(20)
            ]
    except httpx.TransportError as exc:
        print(json.dumps({"skipped": f"no container engine at {HOST}: {exc}"}))
        return 0
    result: dict[str, Any] = {
        "engine_true_ms": medians(bare),
        "engine_agent_import_ms": medians(agent_import),
    }
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as folder:
        tmp = Path(folder)
        first_rpc = launch_to_first_rpc(tmp)
        result["launch_to_first_rpc_ms"] = {
            "median": round(statistics.median(first_rpc) * 1000, 1),
            "min": round(min(first_rpc) * 1000, 1),
            "max": round(max(first_rpc) * 1000, 1),
        }
        if not args.skip_w1:
            dag = fan_out(tmp / "fanout.yaml")
            dag.write_text(f"image: {IMAGE}\n" + dag.read_text())  # the agent executor ignores it
            docker, _ = run_once(dag, "docker", tmp / "w1-docker")
            agent, _ = run_once(dag, "agent", tmp / "w1-agent")
            result["w1_seconds"] = {"docker": round(docker, 2), "agent": round(agent, 2)}
            result["w1_ratio_docker_over_agent"] = round(docker / agent, 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
