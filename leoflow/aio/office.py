"""Holding office under a lease: the loop both leader electors run, whatever the lease is.

An elector (``leoflow/kube/leader.py`` on a Kubernetes Lease,
``leoflow/store/leader.py`` on a row of the state store) knows how to make one
attempt at its lease and how to wait for it; what happens between winning and
losing it is the same for both and lives here:

- ``renew_until_lost``: renew every retry period; return (stepping down) once no
  renewal has succeeded for the renew deadline, counting an attempt that hangs
  past the deadline as failed;
- ``hold_office``: forever, wait for the lease, run the leader's work beside the
  renewal, and cancel the work the moment the lease is lost. Work that returns
  or raises gives the lease up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

log = logging.getLogger("leoflow.aio.office")


class OfficeHolder(Protocol):
    """What ``hold_office`` drives: an elector with its lease's own attempts."""

    is_leader: bool

    async def acquire(self) -> None:
        """Return once the lease is held."""

    async def keep(self) -> None:
        """Renew; return once the lease is lost."""

    async def release(self) -> None:
        """Give the lease up now, so another replica leads at once."""


async def renew_until_lost(
    attempt: Callable[[], Awaitable[bool]],
    *,
    retry_period: float,
    renew_deadline: float,
    clock: Callable[[], float],
    what: str,
) -> None:
    """Call ``attempt`` every ``retry_period``; return once none succeeds for ``renew_deadline``."""
    last = clock()
    while True:
        await asyncio.sleep(retry_period)
        try:
            async with asyncio.timeout(max(0.01, last + renew_deadline - clock())):
                ok = await attempt()
        except TimeoutError:
            ok = False
        if ok:
            last = clock()
        elif clock() - last >= renew_deadline:
            log.error("could not renew %s for %.1fs: stepping down", what, clock() - last)
            return


async def hold_office(
    holder: OfficeHolder,
    lead: Callable[[], Coroutine[Any, Any, None]],
    *,
    on_change: Callable[[bool], None] | None,
    identity: str,
    what: str,
) -> None:
    """Forever: wait for the lease, run ``lead()`` while it is held, cancel it when lost."""
    while True:
        await holder.acquire()
        holder.is_leader = True
        log.info("leading as %s (%s)", identity, what)
        if on_change is not None:
            on_change(True)
        work = asyncio.create_task(lead(), name="leoflow-leader-work")
        renew = asyncio.create_task(holder.keep(), name="leoflow-lease-renew")
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
            await holder.release()
            if exc is not None:
                log.error("leader work stopped: %r; gave %s up", exc, what)
        holder.is_leader = False


class LeaseTimings(Protocol):
    @property
    def identity(self) -> str: ...
    @property
    def retry_period(self) -> float: ...
    @property
    def renew_deadline(self) -> float: ...


class LeaseLoop:
    """``keep()`` and ``run()`` for an elector that can make one attempt at its lease.

    A subclass sets ``config`` and provides ``try_acquire_or_renew`` (one attempt),
    ``acquire`` and ``release``; an attempt that raises one of ``attempt_errors``
    counts as not held. ``lease_label`` is how the logs name its lease; ``clock``
    (monotonic) times renewals and the lease's observed age, ``wall`` is what the
    lease record shows people.
    """

    config: LeaseTimings
    attempt_errors: tuple[type[Exception], ...] = (Exception,)

    def __init__(
        self,
        lease_label: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.lease_label = lease_label
        self._clock = clock
        self._wall = wall
        self._observed_at = 0.0
        self.is_leader = False

    async def try_acquire_or_renew(self) -> bool:
        raise NotImplementedError

    def count_attempt(self, held: bool) -> None:
        """Called after each attempt (a metric)."""

    async def _attempt(self) -> bool:
        try:
            won = await self.try_acquire_or_renew()
        except self.attempt_errors as exc:
            log.warning("%s: %s", self.lease_label, exc)
            won = False
        self.count_attempt(won)
        return won

    async def acquire(self) -> None:
        raise NotImplementedError

    async def release(self) -> None:
        raise NotImplementedError

    async def keep(self) -> None:
        """Renew until leadership is lost (no renewal within renew_deadline); then return."""
        await renew_until_lost(
            self._attempt,
            retry_period=self.config.retry_period,
            renew_deadline=self.config.renew_deadline,
            clock=self._clock,
            what=self.lease_label,
        )
        self.is_leader = False

    async def run(
        self,
        lead: Callable[[], Coroutine[Any, Any, None]],
        *,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        """Forever: wait for the lease, run ``lead()`` while it is held, cancel it when lost.

        ``lead()`` returning or raising also gives the lease up.
        """
        await hold_office(
            self, lead, on_change=on_change, identity=self.config.identity, what=self.lease_label
        )
