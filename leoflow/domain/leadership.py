"""What a scheduler replica needs from leader election, whatever holds the lease.

Two implementations share these semantics (client-go's): a Kubernetes Lease
(``leoflow/kube/leader.py``) and a row in the state store
(``leoflow/store/leader.py``). One leader at a time; the others take over once
the lease has not changed for ``lease_duration`` by their own clock; a leader that
cannot renew within ``renew_deadline`` stops leading first; releasing hands over
in about one retry period.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol


class Elector(Protocol):
    is_leader: bool

    async def run(
        self,
        lead: Callable[[], Coroutine[Any, Any, None]],
        *,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        """Forever: wait for the lease, run ``lead()`` while held, cancel it when lost."""
        ...

    async def release(self) -> None:
        """Give the lease up now (on shutdown), so another replica leads at once."""
        ...


def check_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    if not lease_duration > renew_deadline > retry_period > 0:
        raise ValueError("leader election needs lease_duration > renew_deadline > retry_period > 0")
