"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

A replica that holds the Lease renews it every ``retry_period``; if it cannot
renew for ``renew_deadline`` it stops leading at once — before the Lease can
expire for the others (``lease_duration`` > ``renew_deadline``). The others try
every ``retry_period`` and take the Lease once it has not changed for
``lease_duration`` by their own clock (the observed time, as client-go uses, so
clocks need not agree). Releasing on shutdown clears the holder, so a rolling
update hands over in about one retry period instead of a lease duration.

A standby does not wait for its next retry tick once the Lease it watches is due
to expire: it wakes at (when it observed the last renewal) + lease duration, so
after a kill -9 another replica leads within lease duration + one retry period
(the observation lag), not that plus up to one more retry period of polling lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter

from leoflow.kube.client import KubeClient
from leoflow.kube.errors import Conflict, KubeError
from leoflow.kube.objects import JsonObj

log = logging.getLogger("leoflow.kube.leader")

LEADER_ATTEMPTS = Counter(
    "leoflow_lease_attempts_total",
    "Lease acquire/renew attempts by whether we hold it after",
    ["outcome"],
)


# A standby woken for a Lease's expiry attempts this long after it, so that its own
# "expired?" check (strictly after observed + duration) already says yes.
EXPIRY_MARGIN = 0.01


@dataclass(frozen=True)
class ElectionConfig:
    lease_name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > retry_period > 0"
            )


def _micro_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs ``lead()`` while this replica holds the Lease; cancels it the moment it does not."""

    def __init__(
        self,
        client: KubeClient,
        config: ElectionConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.config = config
        self._clock = clock
        self._wall = wall
        self._observed: tuple[object, ...] | None = None
        self._observed_at = 0.0
        self._observed_duration = config.lease_duration
        self._lease: JsonObj | None = None
        self.is_leader = False

    # --------------------------------------------------------------- the record

    def _spec(self, acquire: bool, previous: JsonObj | None) -> JsonObj:
        now = _micro_time(self._wall())
        old = (previous or {}).get("spec", {})
        transitions = int(old.get("leaseTransitions") or 0)
        if acquire and old.get("holderIdentity") not in (None, "", self.config.identity):
            transitions += 1
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": now if acquire else old.get("acquireTime", now),
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: JsonObj) -> None:
        spec = lease.get("spec", {})
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        self._observed_duration = float(
            spec.get("leaseDurationSeconds") or self.config.lease_duration
        )
        self._lease = lease

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's tryAcquireOrRenew: True if we hold the Lease now."""
        lease = await self.client.get_lease(self.config.lease_name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.config.lease_name},
                "spec": self._spec(True, None),
            }
            try:
                self._observe(await self.client.create_lease(body))
            except Conflict:
                return False  # another replica created it first
            return True
        self._observe(lease)
        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity") or ""
        mine = holder == self.config.identity
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        expired = self._clock() > self._observed_at + duration
        if not mine and holder and not expired:
            return False
        updated = dict(lease)
        updated["spec"] = self._spec(not mine, lease)
        try:
            self._observe(await self.client.update_lease(self.config.lease_name, updated))
        except Conflict:
            return False  # someone wrote it since we read it
        return True

    async def release(self) -> None:
        """Give the Lease up now so another replica takes it in one retry period."""
        if not self.is_leader or self._lease is None:
            return
        updated = dict(self._lease)
        spec = dict(updated.get("spec", {}))
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(self._wall()))
        updated["spec"] = spec
        with contextlib.suppress(KubeError):
            await self.client.update_lease(self.config.lease_name, updated)
            log.info("released the lease %s", self.config.lease_name)
        self.is_leader = False

    # ------------------------------------------------------------------ the loop

    async def _attempt(self) -> bool:
        try:
            won = await self.try_acquire_or_renew()
        except KubeError as exc:
            log.warning("lease %s: %s", self.config.lease_name, exc)
            won = False
        LEADER_ATTEMPTS.labels(outcome="held" if won else "not_held").inc()
        return won

    def acquire_wait(self) -> float:
        """How long a standby sleeps before its next attempt: one retry period, or
        less if the Lease it observed expires sooner (then just past the expiry)."""
        wait = self.config.retry_period
        holder = self._observed[0] if self._observed is not None else None
        if holder and holder != self.config.identity:
            expires = self._observed_at + self._observed_duration - self._clock()
            wait = min(wait, max(0.0, expires) + EXPIRY_MARGIN)
        return wait

    async def _acquire(self) -> None:
        while True:  # polling is the protocol: the Lease has no way to notify us
            if await self._attempt():
                return
            await asyncio.sleep(self.acquire_wait())

    async def _renew(self) -> None:
        """Returns when leadership is lost: no successful renewal within renew_deadline."""
        last = self._clock()
        while True:
            await asyncio.sleep(self.config.retry_period)
            try:
                ok = await asyncio.wait_for(
                    self._attempt(), max(0.01, last + self.config.renew_deadline - self._clock())
                )
            except TimeoutError:
                ok = False
            if ok:
                last = self._clock()
            elif self._clock() - last >= self.config.renew_deadline:
                log.error(
                    "could not renew the lease %s for %.1fs: stepping down",
                    self.config.lease_name,
                    self._clock() - last,
                )
                return

    async def run(
        self,
        lead: Callable[[], Coroutine[Any, Any, None]],
        *,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        """Forever: wait for the Lease, run ``lead()`` while it is held, cancel it when lost.

        ``lead()`` returning or raising also gives the Lease up.
        """
        while True:
            await self._acquire()
            self.is_leader = True
            log.info("leading as %s (lease %s)", self.config.identity, self.config.lease_name)
            if on_change is not None:
                on_change(True)
            work = asyncio.create_task(lead(), name="leoflow-leader-work")
            renew = asyncio.create_task(self._renew(), name="leoflow-lease-renew")
            try:
                done, _ = await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (work, renew):
                    task.cancel()
                for task in (work, renew):
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                if on_change is not None:
                    on_change(False)
            if work in done:
                exc = work.exception() if not work.cancelled() else None
                await self.release()
                if exc is not None:
                    log.error("leader work stopped: %r; gave the lease up", exc)
            self.is_leader = False
