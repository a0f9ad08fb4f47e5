"""Request accounting and injected faults.

Leoflow promises apiserver cost O(1) in running tasks and counts requests per verb;
tests assert that through :class:`RequestLog`, keyed the way RBAC names things
(verb, API group, resource[/subresource]) so the same records can be compared with
the Role and with ``leoflow/kube/calls.py``. :class:`Faults` holds the failures a
test arms: the next N matching requests answer with an error status, or every
matching request waits first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestInfo:
    """What the apiserver's request-info resolver makes of a URL and method."""

    verb: str  # RBAC verb: get list watch create update patch delete deletecollection
    group: str
    resource: str  # with subresource: "pods/log", "pods/status", "pods/binding"
    namespace: str
    name: str
    path: str

    @property
    def base_resource(self) -> str:
        """``pods`` for ``pods/log``."""
        return self.resource.split("/")[0]


Predicate = Callable[[RequestInfo], bool]


def always(_: RequestInfo) -> bool:
    """The default predicate: every request."""
    return True


@dataclass
class RequestLog:
    """Per-verb counters plus every (verb, group, resource, namespace) ever seen."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    seen: set[tuple[str, str, str, str]] = field(default_factory=set)
    requests: list[RequestInfo] = field(default_factory=list)

    def record(self, info: RequestInfo) -> None:
        """Count one request (called for every request the server parses)."""
        self.counts[(info.verb, info.group, info.resource)] += 1
        self.seen.add((info.verb, info.group, info.resource, info.namespace))
        self.requests.append(info)

    def reset(self) -> None:
        """Zero the counters and the request list; ``seen`` keeps growing (it is 'ever')."""
        self.counts.clear()
        self.requests.clear()


@dataclass
class _Failure:
    remaining: int
    status: int
    message: str
    when: Predicate


@dataclass
class _Latency:
    seconds: float
    when: Predicate


class Faults:
    """Armed failures; the server consults it for each request before handling it."""

    def __init__(self) -> None:
        self._failures: list[_Failure] = []
        self._latencies: list[_Latency] = []

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        when: Predicate = always,
        message: str = "injected fault",
    ) -> None:
        """The next ``n`` requests matching ``when`` answer ``status`` with a Status body."""
        self._failures.append(_Failure(n, status, message, when))

    def add_latency(self, seconds: float, when: Predicate = always) -> None:
        """Every matching request waits ``seconds`` before it is handled."""
        self._latencies.append(_Latency(seconds, when))

    def clear(self) -> None:
        """Disarm everything."""
        self._failures.clear()
        self._latencies.clear()

    def take_failure(self, info: RequestInfo) -> tuple[int, str] | None:
        """Consume one armed failure matching the request, if any."""
        for failure in self._failures:
            if failure.remaining > 0 and failure.when(info):
                failure.remaining -= 1
                if failure.remaining == 0:
                    self._failures.remove(failure)
                return failure.status, failure.message
        return None

    def delay(self, info: RequestInfo) -> float:
        """Total latency to add for the request."""
        return sum(lat.seconds for lat in self._latencies if lat.when(info))
