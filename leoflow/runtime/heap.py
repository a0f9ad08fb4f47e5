"""The scheduler's start-up heap, frozen once it is in office.

A leading scheduler holds a large, long-lived heap made while it started: the
modules of kubernetes_asyncio, SQLAlchemy, grpc and pydantic, the pod cache, the
book. ``leoflow``'s entry point freezes only what its argument parsing imported
(``leoflow.agent.startup_gc``), so every full collection walked all of the rest
again: under load a single one stalled the loop for 0.4-0.6 s, on the path from an
upstream's end to its downstream pod's create (``benchmarks/bench_pro_scale.py``).
Moving it into the permanent generation (``gc.freeze``) leaves later collections
only what the scheduler allocates as it runs, which they still collect as usual.
"""

from __future__ import annotations

import gc


def freeze_startup() -> None:
    """Collect the start-up garbage once, then freeze what is alive."""
    gc.collect()
    gc.freeze()
