"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

A replica that holds the Lease renews it every ``retry_period``; if it cannot
renew for ``renew_deadline`` it stops leading at once — before the Lease can
expire for the others (``lease_duration`` > ``renew_deadline``). The others try
every ``retry_period`` and take the Lease once it has not changed for
``lease_duration`` by their own clock (the observed time, as client-go uses, so
clocks need not agree). Releasing on shutdown clears the holder, so a rolling
update hands over in about one retry period instead of a lease duration.

What happens between winning and losing the lease (renewing, running the
leader's work, cancelling it) is shared with the other elector: ``leoflow/aio/office.py``.

A standby does not wait for its next retry tick once the Lease it watches is due
to expire: it wakes at (when it observed the last renewal) + lease duration, so
after a kill -9 another replica leads within lease duration + one retry period
(the observation lag), not that plus up to one more retry period of polling lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import Counter

from leoflow.aio.office import LeaseLoop
from leoflow.domain.leadership import check_timings
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
        check_timings(self.lease_duration, self.renew_deadline, self.retry_period)


def _micro_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector(LeaseLoop):
    """Runs ``lead()`` while this replica holds the Lease; cancels it the moment it does not."""

    attempt_errors = (KubeError,)

    def __init__(
        self, client: KubeClient, config: ElectionConfig, **clocks: Callable[[], float]
    ) -> None:
        """``clocks``: ``clock=`` (monotonic) and ``wall=`` (wall time), see LeaseLoop."""
        super().__init__(f"the lease {config.lease_name}", **clocks)
        self.client = client
        self.config: ElectionConfig = config
        self._observed: tuple[object, ...] | None = None
        self._observed_duration = config.lease_duration
        self._lease: JsonObj | None = None

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

    def count_attempt(self, held: bool) -> None:
        LEADER_ATTEMPTS.labels(outcome="held" if held else "not_held").inc()

    def acquire_wait(self) -> float:
        """How long a standby sleeps before its next attempt: one retry period, or
        less if the Lease it observed expires sooner (then just past the expiry)."""
        wait = self.config.retry_period
        holder = self._observed[0] if self._observed is not None else None
        if holder and holder != self.config.identity:
            expires = self._observed_at + self._observed_duration - self._clock()
            wait = min(wait, max(0.0, expires) + EXPIRY_MARGIN)
        return wait

    async def acquire(self) -> None:
        while True:  # polling is the protocol: the Lease has no way to notify us
            if await self._attempt():
                return
            await asyncio.sleep(self.acquire_wait())
