"""Why a waiting candidate has not started: every limit that blocks it, the binding one
first — a pool that is missing or too small (nothing but an operator can fix it),
then the DAG's ``max_active_tasks``, then the pool's free slots, then
``parallelism``. The narrower limit binds: a release that frees it frees the wider
one too. A waiting candidate that nothing blocks (offered since the last
``admit()``, or left over by its ``limit``) gets the extra reason ``ready``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

from leoflow.domain.words import plural

Reason: TypeAlias = Literal[
    "pool_missing",
    "pool_too_small",
    "dag_max_active_tasks",
    "pool_slots",
    "parallelism",
    "ready",
]
REASONS: tuple[Reason, ...] = get_args(Reason)


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a waiting candidate has not started: the binding limit, then the others.

    ``used``/``limit``/``needed`` are the limit's numbers: task slots for
    ``parallelism`` and ``dag_max_active_tasks`` (needed 1), pool slots for the
    pool reasons (``limit`` is None when the pool does not exist).
    """

    reason: Reason
    message: str
    used: int
    limit: int | None
    needed: int
    also: tuple[WaitReason, ...] = field(default=())

    @property
    def all(self) -> tuple[WaitReason, ...]:
        """Every blocking limit, the binding one first."""
        return (self, *self.also)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The limits and what is held against them, as ``blockers`` reads them."""

    parallelism: int
    held: int
    pool_size: Mapping[str, int]
    pool_used: Mapping[str, int]
    dag_limit: Mapping[str, int]
    dag_used: Mapping[str, int]


def blockers(at: Occupancy, dag: str, pool: str, demand: int) -> list[WaitReason]:
    """Every limit that keeps a candidate of (``dag``, ``pool``, ``demand``) waiting."""
    out: list[WaitReason] = []
    pool_used = at.pool_used.get(pool, 0)
    size = at.pool_size.get(pool)
    if size is None:
        message = f"pool {pool} does not exist; this task needs {demand} of its slots"
        out.append(WaitReason("pool_missing", message, pool_used, None, demand))
    elif demand > size:
        message = (
            f"pool {pool} has {plural(size, 'slot')} in all; this task needs {demand}"
            " and cannot run until the pool grows"
        )
        out.append(WaitReason("pool_too_small", message, pool_used, size, demand))
    cap = at.dag_limit.get(dag)
    used = at.dag_used.get(dag, 0)
    if cap is not None and used >= cap:
        message = f"DAG {dag} has {used} of {cap} max_active_tasks running"
        out.append(WaitReason("dag_max_active_tasks", message, used, cap, 1))
    if size is not None and demand <= size and size - pool_used < demand:
        message = (
            f"pool {pool} has {max(0, size - pool_used)} of {plural(size, 'slot')} free;"
            f" this task needs {demand}"
        )
        out.append(WaitReason("pool_slots", message, pool_used, size, demand))
    if at.held >= at.parallelism:
        message = f"parallelism: {at.held} of {at.parallelism} task slots in use"
        out.append(WaitReason("parallelism", message, at.held, at.parallelism, 1))
    return out


def explain(at: Occupancy, dag: str, pool: str, demand: int) -> WaitReason:
    """The binding reason, with the other blocking limits in ``also``."""
    found = blockers(at, dag, pool, demand)
    if not found:
        return WaitReason(
            "ready",
            "nothing blocks it: it starts at the next admission round"
            " unless higher-ranked tasks take the room first",
            0,
            None,
            demand,
        )
    first, *rest = found
    return WaitReason(
        first.reason, first.message, first.used, first.limit, first.needed, tuple(rest)
    )


def binding(at: Occupancy, dag: str, pool: str, demand: int) -> Reason:
    """Only the binding reason's name (for a gauge)."""
    found = blockers(at, dag, pool, demand)
    return found[0].reason if found else "ready"
