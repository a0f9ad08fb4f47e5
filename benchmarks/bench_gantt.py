"""The run Gantt's server-side cost at 1,000 and 3,000 task instances; prints JSON.

    .venv/bin/python benchmarks/bench_gantt.py [--samples 30]

Builds the spans of a run whose task instances each ran once, a tenth of them retried
twice (so 1,000 task instances draw 1,200 bars), and times ``layout_gantt`` plus the
SVG markup (``leoflow.api.ui.gantt.gantt_svg``): what the Gantt page adds to reading
its rows. Median and p95 of ``--samples``, and the markup's size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leoflow.api.ui.gantt import gantt_svg
from leoflow.domain.gantt import TrySpan, layout_gantt


def spans(tasks: int) -> list[TrySpan]:
    out = []
    for i in range(tasks):
        queued = 1000.0 + i * 0.5
        tries = 3 if i % 10 == 0 else 1
        for n in range(1, tries + 1):
            at = queued + (n - 1) * 30
            state = "success" if n == tries else "up_for_retry"
            out.append(TrySpan(f"task_{i:05d}", n, state, at, at + 0.2, at + 5.0))
    return out


def measure(tasks: int, samples: int) -> dict[str, float]:
    data = spans(tasks)
    timings = []
    size = 0
    for _ in range(samples):
        t0 = time.perf_counter()
        markup = gantt_svg(layout_gantt(data, now=1e5), "dag", "run")
        timings.append(time.perf_counter() - t0)
        size = len(markup)
    timings.sort()
    return {
        "bars": len(data),
        "median_ms": round(statistics.median(timings) * 1000, 2),
        "p95_ms": round(timings[int(len(timings) * 0.95) - 1] * 1000, 2),
        "svg_kb": round(size / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    out = {f"gantt_{n}_tasks": measure(n, args.samples) for n in (1000, 3000)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
