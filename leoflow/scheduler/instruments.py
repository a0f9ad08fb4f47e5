"""Where the scheduler's Prometheus metrics come from: real ones, or none at all.

Every process that runs a scheduler exports its metrics (``leoflow lite`` on the
API's /metrics, Pro's replica on its health port) except ``leoflow run``, which
serves nothing to scrape. Importing prometheus_client and registering a few dozen
metrics is ~5% of a one-task ``leoflow run``, so that command says ``serve_none()``
before it imports the scheduler, and every metric is then a no-op that never
imports prometheus_client. Everything else gets prometheus_client's own objects.

Never imports prometheus_client at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import prometheus_client

_served = True


def serve_none() -> None:
    """This process exports no metrics: metrics made from now on are no-ops.

    Called first by ``leoflow run``'s process entry, before any metric exists; a
    metric made earlier stays real (it costs nothing more by then)."""
    global _served
    _served = False


def served() -> bool:
    return _served


class _Nothing:
    """A metric nobody scrapes: takes every update and keeps none."""

    def labels(self, *_values: object, **_labels: object) -> _Nothing:
        return self

    def inc(self, _amount: float = 1) -> None:
        return None

    def dec(self, _amount: float = 1) -> None:
        return None

    def set(self, _value: float) -> None:
        return None

    def observe(self, _value: float) -> None:
        return None


_NOTHING = _Nothing()


def counter(
    name: str, documentation: str, labelnames: Sequence[str] = ()
) -> prometheus_client.Counter:
    if not _served:
        return cast("prometheus_client.Counter", _NOTHING)
    from prometheus_client import Counter

    return Counter(name, documentation, labelnames)


def gauge(name: str, documentation: str, labelnames: Sequence[str] = ()) -> prometheus_client.Gauge:
    if not _served:
        return cast("prometheus_client.Gauge", _NOTHING)
    from prometheus_client import Gauge

    return Gauge(name, documentation, labelnames)


def histogram(
    name: str, documentation: str, *, buckets: Sequence[float]
) -> prometheus_client.Histogram:
    if not _served:
        return cast("prometheus_client.Histogram", _NOTHING)
    from prometheus_client import Histogram

    return Histogram(name, documentation, buckets=buckets)


def register_collector(collector: Any) -> None:
    """Export ``collector`` (an object with ``collect()``) on scrape, if anything scrapes."""
    if not _served:
        return
    from prometheus_client import REGISTRY

    REGISTRY.register(collector)
