"""What is offered to admission: a ready task instance and what it needs to start."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Must equal leoflow.domain.dag.DEFAULT_POOL; repeated here to keep admission
# stdlib-only (a test checks they agree).
DEFAULT_POOL = "default_pool"
DEFAULT_POOL_SLOTS = 128
INT64 = 1 << 63  # bound of a 64-bit signed int


def check_limit(what: str, n: int) -> None:
    """Limits are counts: 0 pauses, a negative number is a mistake."""
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A ready task instance and what it needs to start."""

    key: int
    dag_id: str
    pool: str
    pool_slots: int
    priority: int
    run_order: float
    ready_order: float

    def __post_init__(self) -> None:
        # Admission packs the order into one int (lanes.entry_of): key and priority
        # must be 64-bit signed ints, as a store's primary key and a priority are.
        if not -INT64 <= self.key < INT64:
            raise ValueError(f"task instance {self.key}: key must be a 64-bit int")
        if not (isinstance(self.priority, int) and -INT64 <= self.priority < INT64):
            raise ValueError(f"task instance {self.key}: priority must be a 64-bit int")
        if self.pool_slots < 1:
            raise ValueError(f"task instance {self.key}: pool_slots must be >= 1")
        if math.isnan(self.run_order) or math.isnan(self.ready_order):
            raise ValueError(f"task instance {self.key}: run_order and ready_order must be numbers")
