"""A standby wakes at the observed renewal + lease duration, not on its next retry tick."""

from __future__ import annotations

from typing import Any

from leoflow.kube.leader import EXPIRY_MARGIN, ElectionConfig, LeaderElector


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def lease(holder: str, renew: str, duration: int = 15) -> dict[str, Any]:
    return {
        "metadata": {"name": "l", "resourceVersion": "1"},
        "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration},
    }


def standby(clock: Clock) -> LeaderElector:
    config = ElectionConfig("l", "b", lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
    return LeaderElector(None, config, clock=clock)  # type: ignore[arg-type]


def test_a_standby_sleeps_a_retry_period_while_the_lease_is_far_from_expiry() -> None:
    clock = Clock(100.0)
    elector = standby(clock)
    elector._observe(lease("a", "t1"))
    clock.now = 101.0
    assert elector.acquire_wait() == 2.0


def test_a_standby_wakes_just_past_the_expiry_it_observed() -> None:
    clock = Clock(100.0)
    elector = standby(clock)
    elector._observe(lease("a", "t1"))
    clock.now = 113.5  # 1.5 s before observed + lease duration
    assert abs(elector.acquire_wait() - (1.5 + EXPIRY_MARGIN)) < 1e-9
    elector._observe(lease("a", "t1"))  # the same record again: the clock does not restart
    assert abs(elector.acquire_wait() - (1.5 + EXPIRY_MARGIN)) < 1e-9
    clock.now = 116.0  # overdue: try at once
    assert elector.acquire_wait() == EXPIRY_MARGIN


def test_a_renewal_restarts_the_expiry_clock_and_the_lease_duration_is_the_leases() -> None:
    clock = Clock(100.0)
    elector = standby(clock)
    elector._observe(lease("a", "t1"))
    clock.now = 114.0
    elector._observe(lease("a", "t2", duration=5))  # renewed, with a shorter duration
    clock.now = 118.5
    assert abs(elector.acquire_wait() - (0.5 + EXPIRY_MARGIN)) < 1e-9


def test_no_holder_means_the_plain_retry_period() -> None:
    clock = Clock(100.0)
    elector = standby(clock)
    elector._observe(lease("", "t1", duration=1))
    clock.now = 100.5
    assert elector.acquire_wait() == 2.0
