"""Leader election on the store's lease row, with a Kubernetes Lease's semantics.

For ``leoflow scheduler`` without the Kubernetes executor (a VM deployment: two
schedulers on one PostgreSQL). The row (``scheduler_lease``) is written only by
compare-and-set on its version. As in client-go (and ``leoflow/kube/leader.py``):

- the holder renews every ``retry_period``; if it cannot for ``renew_deadline``
  it stops leading at once, before the lease can expire for the others
  (``lease_duration`` > ``renew_deadline``);
- the others try every ``retry_period`` and take the row once it has not changed
  for ``lease_duration`` by their own monotonic clock, counted from when they saw
  it change: the holder's wall clock in ``renew_time`` is for people, so clocks
  need not agree;
- releasing clears the holder, so a restart hands over in about a retry period.

What happens between winning and losing the lease (renewing, running the
leader's work, cancelling it) is shared with the other elector: ``leoflow/aio/office.py``.

Fencing is unchanged: whoever leads bumps the epoch in ``take_office``, and a
deposed leader's writes are refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace

from prometheus_client import Counter

from leoflow.aio.office import LeaseLoop
from leoflow.domain.leadership import check_timings
from leoflow.store.rows import LeaseRow
from leoflow.store.store import Store

log = logging.getLogger("leoflow.store.leader")

LEASE_ATTEMPTS = Counter(
    "leoflow_db_lease_attempts_total",
    "Database lease acquire/renew attempts by whether we hold it after",
    ["outcome"],
)


@dataclass(frozen=True)
class DbElectionConfig:
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        check_timings(self.lease_duration, self.renew_deadline, self.retry_period)


def default_identity() -> str:
    """``<host>-<pid>``: what a refusal names, and what tells a dead local holder."""
    return f"{socket.gethostname()}-{os.getpid()}"


def holder_is_dead_here(holder: str) -> bool:
    """True when ``holder`` names a process of this host that no longer exists."""
    prefix = socket.gethostname() + "-"
    if not holder.startswith(prefix) or not holder[len(prefix) :].isdigit():
        return False
    pid = int(holder[len(prefix) :])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class DbLeaderElector(LeaseLoop):
    """Runs ``lead()`` while this replica holds the lease row; cancels it when it does not."""

    def __init__(
        self, store: Store, config: DbElectionConfig, **clocks: Callable[[], float]
    ) -> None:
        """``clocks``: ``clock=`` (monotonic) and ``wall=`` (wall time), see LeaseLoop."""
        super().__init__("the database lease", **clocks)
        self.store = store
        self.config: DbElectionConfig = config
        self._observed: tuple[str, int] | None = None
        self._row: LeaseRow | None = None

    def _observe(self, row: LeaseRow) -> None:
        record = (row.holder, row.version)
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        self._row = row

    def observed(self) -> LeaseRow | None:
        """The lease row as last read or written here."""
        return self._row

    def held_by_other(self, row: LeaseRow) -> bool:
        """Someone else holds ``row`` and it has not expired by our observation."""
        if not row.holder or row.holder == self.config.identity:
            return False
        return self._clock() <= self._observed_at + row.lease_duration

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's tryAcquireOrRenew: True if we hold the lease now."""
        row = await self.store.get_lease()
        self._observe(row)
        if self.held_by_other(row):
            return False
        return await self._take(row)

    async def _take(self, row: LeaseRow) -> bool:
        mine = row.holder == self.config.identity
        now = self._wall()
        transitions = row.transitions + (1 if row.holder and not mine else 0)
        new = LeaseRow(
            holder=self.config.identity,
            acquire_time=row.acquire_time if mine else now,
            renew_time=now,
            lease_duration=self.config.lease_duration,
            transitions=transitions,
            version=row.version,
        )
        written = await self.store.write_lease(row.version, new)
        if written is None:
            return False  # someone wrote it since we read it
        self._observe(written)
        return True

    async def take_over(self, row: LeaseRow) -> bool:
        """Take ``row`` now although it is not expired by observation: its holder is
        known dead (Lite: a process of this host that is gone)."""
        return await self._take(row)

    async def release(self) -> None:
        """Give the lease up now so another replica takes it in one retry period."""
        if not self.is_leader or self._row is None:
            return
        row = self._row
        released = replace(row, holder="", lease_duration=1.0, renew_time=self._wall())
        try:
            if await self.store.write_lease(row.version, released) is not None:
                log.info("released the database lease")
        except Exception as exc:  # the database is gone: the lease expires by itself
            log.warning("could not release the database lease: %s", exc)
        self.is_leader = False

    # ------------------------------------------------------------------ the loop

    def count_attempt(self, held: bool) -> None:
        LEASE_ATTEMPTS.labels(outcome="held" if held else "not_held").inc()

    async def acquire(self) -> None:
        while True:  # polling: a row cannot notify us
            if await self._attempt():
                self.is_leader = True
                return
            await asyncio.sleep(self.config.retry_period)


class LeaseHeld(Exception):
    """Another live scheduler holds the lease; the message names it."""

    def __init__(self, holder: str, url: str, detail: str) -> None:
        super().__init__(
            f"the store {url} is led by another live scheduler, {holder} ({detail}); "
            "stop it first, or give this one its own database"
        )
        self.holder = holder


async def claim_or_refuse(store: Store, config: DbElectionConfig, url: str) -> DbLeaderElector:
    """Take the lease for a process that must not wait its turn (Lite), or raise LeaseHeld.

    A holder is live when its renewal is recent by our wall clock, or when the row
    changes while we watch it for a lease duration; a holder that is a dead process
    of this host is taken over at once. The caller keeps the lease with ``keep()``.
    """
    elector = DbLeaderElector(store, config)
    if await elector.try_acquire_or_renew():
        elector.is_leader = True
        return elector
    row = elector.observed()
    assert row is not None
    if holder_is_dead_here(row.holder) and await elector.take_over(row):
        log.warning("took the database lease over from %s, a process that is gone", row.holder)
        elector.is_leader = True
        return elector
    age = elector._wall() - row.renew_time
    if 0 <= age < row.lease_duration:
        raise LeaseHeld(row.holder, url, f"renewed {age:.1f}s ago")
    # Stale by our wall clock, which may disagree with the holder's: watch the row.
    log.warning(
        "the store's lease is held by %s, last renewed %.0fs ago by its clock: watching it "
        "for up to %.0fs before taking it over",
        row.holder,
        age,
        row.lease_duration,
    )
    seen = row.version
    while True:
        await asyncio.sleep(config.retry_period)
        if await elector.try_acquire_or_renew():
            elector.is_leader = True
            return elector
        row = elector.observed()
        assert row is not None
        if row.version != seen and row.holder:
            raise LeaseHeld(row.holder, url, "it renewed the lease while we watched")
        seen = row.version
