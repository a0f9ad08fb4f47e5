"""Web UI page latency over a real socket; prints one JSON document.

    .venv/bin/python benchmarks/bench_ui.py [--postgres-url URL] [--runs 100000]
        [--samples 100] [--rounds 1]

Seeds PostgreSQL as benchmarks/bench_api.py does (benchmarks/seeding.py: ``--runs``
runs of 50 DAGs, 3 task instances each, plus 20 wide runs of 300 task instances, and
the DAG rows the pages need), starts the real ``leoflow api`` process, logs in to the UI with a
viewer token and measures, one request at a time, the full round trip (server time
plus loopback transfer) of each page: p50/p95/p99; with ``--rounds N`` each page is
measured N times and ``p95_median_ms`` is the median of the N p95s.

Target (issue 12): p95 <= 100 ms per page.

Log search (issue 31): one wide task instance gets a 16 MiB log (262,144 numbered
lines); ``log_search_16mib`` times ``/ui/log/search`` for its first line, its last
line and a word on no line (the whole log read), and ``log_page_at_line`` a page
around a line near the end. They are reported apart, not in ``worst_p95_ms``.
    .venv/bin/python benchmarks/bench_ui.py --thousand [--seconds 15]

The 1,000-task DAG page instead (issue 31), no PostgreSQL: a real ``leoflow lite`` with
a DAG of 1,000 tasks (ten layers of 100, each task waiting for a gate file), one run
of it going, and Debian's Chromium: the page's HTML bytes, its first contentful paint
(median of 5 loads), and, once the gate opens and the tasks run, the bytes of each
live update the page receives for ``--seconds``. Targets: HTML < 300 KB, first
paint < 500 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from benchmarks.seeding import (  # noqa: E402
    DAGS,
    TOKEN,
    WIDE_RUNS,
    add_dags,
    fresh_database,
    seed,
    start_api,
    summary,
)
from leoflow.store import Store  # noqa: E402

TARGET_P95_MS = 100
LOG_LINES = 262_144  # of 64 bytes: 16 MiB


async def add_big_log(url: str, run_id: str) -> str:
    """A 16 MiB log on ``wide``'s run ``run_id``, task_150, try 1; its UI query."""
    store = await Store.open(url)
    try:
        run = await store.find_run("wide", run_id)
        assert run is not None
        tis = await store.list_task_instances(run_pk=run.pk)
        ti = next(t for t in tis if t.task_id == "task_150")
        block = 16_384  # lines per append: 1 MiB
        for first in range(1, LOG_LINES + 1, block):
            data = b"".join(b"line %07d %s\n" % (i, b"x" * 50) for i in range(first, first + block))
            await store.append_log(ti.pk, 1, data)
    finally:
        await store.close()
    return f"dag=wide&run={run_id}&task=task_150&try=1"


async def measure(client: httpx.AsyncClient, paths: list[str], samples: int) -> dict[str, float]:
    rng = random.Random(5)
    for path in paths[:5]:
        (await client.get(path)).raise_for_status()
    timings = []
    for _ in range(samples):
        path = rng.choice(paths)
        t0 = time.perf_counter()
        response = await client.get(path)
        timings.append(time.perf_counter() - t0)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
    out = summary(timings)
    out["bytes"] = len(response.content)
    return out


async def bench(url: str, runs: int, samples: int, rounds: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = await seed(url, runs)
    await add_dags(url)
    out["seed_seconds"] = round(time.perf_counter() - t0, 2)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_api(url, Path(tmp))
        try:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                login = await client.post(
                    "/ui/login", json={"token": TOKEN}, headers={"Origin": base}
                )
                login.raise_for_status()
                rng = random.Random(3)
                small = [f"scheduled__{rng.randrange(runs)}" for _ in range(50)]
                wide = [f"scheduled__{runs + i}" for i in range(WIDE_RUNS)]

                def dag_of(run_id: str) -> str:
                    return f"dag_{int(run_id.split('__')[1]) % DAGS:03d}"

                cases = {
                    "dags_list": ["/", "/?page=2", "/?q=dag_01", "/?state=running"],
                    "dag_graph_grid_3_tasks": [f"/dags/dag_{i:03d}" for i in range(DAGS)],
                    "dag_graph_grid_300_tasks": ["/dags/wide"],
                    "dag_old_run_selected": [f"/dags/{dag_of(r)}?run={r}" for r in small],
                    "run_3_tasks": [f"/dags/{dag_of(r)}/runs/{r}" for r in small],
                    "run_300_tasks_page": [f"/dags/wide/runs/{r}" for r in wide],
                    "run_300_tasks_filtered": [
                        f"/dags/wide/runs/{r}?state=unfinished&q=task_1" for r in wide
                    ],
                    "run_300_tasks_gantt": [f"/dags/wide/runs/{r}/gantt" for r in wide],
                    "task_instance": [f"/dags/wide/runs/{r}/tasks/task_150" for r in wide],
                    "waiting": ["/waiting"],
                    "pools": ["/pools"],
                }
                log = await add_big_log(url, wide[0])
                log_cases = {
                    "log_search_16mib": [
                        f"/ui/log/search?{log}&q=line%200000001%20",
                        f"/ui/log/search?{log}&q=line%20{LOG_LINES:07d}",
                        f"/ui/log/search?{log}&q=nowhere",
                    ],
                    "log_page_at_line": [f"/ui/log?{log}&line={LOG_LINES - 100}"],
                }
                out["load_avg_before"] = os.getloadavg()
                for name, paths in log_cases.items():
                    out[name] = await measure(client, paths, max(10, samples // 10))
                p95s: dict[str, list[float]] = {name: [] for name in cases}
                for _ in range(rounds):
                    for name, paths in cases.items():
                        out[name] = await measure(client, paths, samples)
                        p95s[name].append(out[name]["p95_ms"])
                out["load_avg_after"] = os.getloadavg()
                for name, values in p95s.items():
                    # The median of the rounds' p95s: one noisy round (a shared machine)
                    # does not decide the figure.
                    out[name]["p95_rounds_ms"] = values
                    out[name]["p95_median_ms"] = statistics.median(values)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    worst = max(
        v["p95_median_ms"] for v in out.values() if isinstance(v, dict) and "p95_median_ms" in v
    )
    out["worst_p95_ms"] = worst
    out["target_p95_ms"] = TARGET_P95_MS
    out["meets_target"] = worst <= TARGET_P95_MS
    return out


THOUSAND_HTML_BOUND = 300 * 1024
THOUSAND_PAINT_MS = 500
DOM_LOADED = "() => performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
# The page's first contentful paint, from the browser's own paint timing (buffered:
# the entry may come after the load event).
FIRST_PAINT = """() => new Promise((resolve) => {
  new PerformanceObserver((list) => {
    const e = list.getEntriesByName('first-contentful-paint')[0];
    if (e) resolve(e.startTime);
  }).observe({ type: 'paint', buffered: true });
})"""


def _thousand_dag(gate: Path) -> str:
    # Waiting tasks poll the gate once a second: they must not load the machine measured.
    wait = f"while [ ! -f {gate} ]; do sleep 1; done"
    lines = ["dag_id: big", "max_active_tasks: 32", "tasks:"]
    for i in range(1000):
        dep = f", depends_on: [t{i - 100:04d}]" if i >= 100 else ""
        lines.append(f"  t{i:04d}: {{command: '{wait}'{dep}}}")
    return "\n".join(lines) + "\n"


def thousand(seconds: float) -> dict[str, Any]:
    """The 1,000-task DAG page in Chromium against a real ``leoflow lite``."""
    import shutil
    import subprocess
    import urllib.request

    from playwright.sync_api import sync_playwright

    from leoflow.api import owner_token
    from tests.support.net import free_port

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "dags").mkdir()
        (root / "home").mkdir()
        gate = root / "gate"
        (root / "dags" / "big.yaml").write_text(_thousand_dag(gate))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
        env.update(LEOFLOW_HOME=str(root / "home"), LEOFLOW_API_LISTEN=f"127.0.0.1:{port}")
        leoflow = str(Path(sys.executable).parent / "leoflow")
        with open(root / "lite.out", "w") as out:
            proc = subprocess.Popen(
                [leoflow, "lite", "--dags", str(root / "dags")],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
            )  # fmt: skip
        try:
            for _ in range(600):
                try:
                    urllib.request.urlopen(base + "/healthz", timeout=2).read()
                    break
                except OSError:
                    time.sleep(0.2)
            token = owner_token.token_for(root / "home", base)
            auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            for path in ("/api/v1/dags/big/unpause", "/api/v1/dags/big/runs"):
                request = urllib.request.Request(base + path, data=b"{}", headers=auth)
                urllib.request.urlopen(request, timeout=30).read()
            chromium = shutil.which("chromium")
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
                )
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                login = context.request.post(
                    base + "/ui/login", data=json.dumps({"token": token}),
                    headers={"Content-Type": "application/json", "Origin": base},
                )  # fmt: skip
                assert login.status == 200, login.text()
                html = context.request.get(base + "/dags/big").body()
                page = context.new_page()
                paints, loads = [], []
                for _ in range(5):
                    page.goto(base + "/dags/big", wait_until="load")
                    paints.append(page.evaluate(FIRST_PAINT))
                    loads.append(page.evaluate(DOM_LOADED))
                page.wait_for_selector("#graph g.node")
                graph_ms = page.evaluate("() => performance.now()")
                page.evaluate(
                    """() => { window.__sizes = [];
                    window.leoflowUi.live.source.addEventListener('update',
                      (e) => window.__sizes.push(new TextEncoder().encode(e.data).length)); }"""
                )
                gate.touch()
                time.sleep(seconds)
                sizes: list[int] = page.evaluate("() => window.__sizes")
                browser.close()
        except Exception:
            print((root / "lite.out").read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    return {
        "html_bytes": len(html),
        "html_bound_bytes": THOUSAND_HTML_BOUND,
        "first_contentful_paint_ms_median": round(statistics.median(paints), 1),
        "first_contentful_paint_ms": [round(x, 1) for x in paints],
        "dom_content_loaded_ms_median": round(statistics.median(loads), 1),
        "graph_drawn_after_ms": round(graph_ms, 1),
        "paint_target_ms": THOUSAND_PAINT_MS,
        "live_seconds": seconds,
        "live_updates": len(sizes),
        "live_bytes_total": sum(sizes),
        "live_bytes_per_update_mean": round(sum(sizes) / len(sizes), 1) if sizes else 0,
        "live_bytes_per_update_max": max(sizes, default=0),
        "meets_target": len(html) < THOUSAND_HTML_BOUND
        and statistics.median(paints) < THOUSAND_PAINT_MS,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres-url", default=os.environ.get("LEOFLOW_TEST_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="report the median p95 of N")
    parser.add_argument("--thousand", action="store_true", help="the 1,000-task DAG page")
    parser.add_argument("--seconds", type=float, default=15.0, help="live updates measured")
    args = parser.parse_args()
    if args.thousand:
        out = await asyncio.to_thread(thousand, args.seconds)
        print(json.dumps({"ui_thousand_tasks": out}, indent=2))
        return

    async with fresh_database("leoflow_bench_ui", args.postgres_url) as url:
        out = await bench(url, args.runs, args.samples, args.rounds)
    print(json.dumps({"postgresql_ui": {"runs_requested": args.runs, **out}}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
