"""What masking a task's secrets costs the agent; prints JSON.

    .venv/bin/python benchmarks/bench_masking.py [--samples 5]

For three secrets — a 20-character password, a 2 KB one-line token, a 2048-bit PEM
key (thirty lines) — the time to compile their forms, and to mask a log that never
shows them, read in 64 KB pieces (a fast writer) and in 80-byte pieces (a line at a
time), through ``leoflow.agent.masking``. Best of ``--samples``.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leoflow.agent.masking import Masker, Secrets

LINE = b"2026-12-07 INFO processing record 12345 with some payload data abcdefghij\n"


def secrets() -> dict[str, str]:
    rng = random.Random(34)
    pem_lines = [base64.b64encode(rng.randbytes(48)).decode() for _ in range(30)]
    return {
        "password_20": "Tr0ub4dor&3-h0rse!b@",
        "token_2kb": base64.b64encode(rng.randbytes(1500)).decode(),
        "pem_30_lines": "-----BEGIN PRIVATE KEY-----\n"
        + "\n".join(pem_lines)
        + "\n-----END PRIVATE KEY-----\n",
    }


def best(samples: int, work: Callable[[], object]) -> float:
    timings = []
    for _ in range(samples):
        t0 = time.perf_counter()
        work()
        timings.append(time.perf_counter() - t0)
    return round(min(timings) * 1000, 1)


def through(compiled: Secrets, data: bytes, piece: int) -> None:
    masker = Masker(compiled)
    for i in range(0, len(data), piece):
        masker.feed(data[i : i + piece])
    masker.flush()


def measure(value: str, samples: int) -> dict[str, float]:
    # re keeps compiled patterns: the first compile is the one a new agent pays.
    t0 = time.perf_counter()
    compiled = Secrets([value])
    first = round((time.perf_counter() - t0) * 1000, 1)
    big, small = LINE * 20000, LINE * 3000
    return {
        "first_compile_ms": first,
        "mask_1_5_mb_in_64_kb_reads_ms": best(samples, lambda: through(compiled, big, 65536)),
        "mask_220_kb_in_80_b_reads_ms": best(samples, lambda: through(compiled, small, 80)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    out = {name: measure(value, args.samples) for name, value in secrets().items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
