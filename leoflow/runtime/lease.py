"""Holding the store's lease: Lite's for as long as it runs, and the election settings
both editions build it from."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from leoflow.settings import Settings
from leoflow.store import Store

if TYPE_CHECKING:
    from leoflow.store.leader import DbElectionConfig, DbLeaderElector


class StartupError(Exception):
    """Lite cannot start as configured; the message says which setting to change."""


def db_election_config(settings: Settings, identity: str) -> DbElectionConfig:
    from leoflow.store.leader import DbElectionConfig

    election = settings.leader_election
    return DbElectionConfig(
        identity=identity,
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
    )


class LiteLease:
    """Lite's hold on the store's lease, renewed in the background, so a
    ``leoflow scheduler`` pointed at the same store does not lead beside it."""

    def __init__(self, elector: DbLeaderElector) -> None:
        self.elector = elector
        self.keeper = asyncio.create_task(elector.keep(), name="leoflow-lite-lease")

    @property
    def lost(self) -> bool:
        return self.keeper.done()

    async def close(self) -> None:
        self.keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.keeper
        await self.elector.release()


async def claim_lease(settings: Settings, store: Store) -> LiteLease:
    from leoflow.store.leader import LeaseHeld, claim_or_refuse, default_identity

    config = db_election_config(settings, settings.identity or default_identity())
    try:
        elector = await claim_or_refuse(store, config, settings.resolved_database_url)
    except LeaseHeld as exc:
        raise StartupError(str(exc)) from None
    return LiteLease(elector)
