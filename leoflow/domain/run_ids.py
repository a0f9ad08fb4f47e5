"""Run ids Leoflow makes up when the caller gives none.

``<run type>__<UTC time to the second>_<random hex>``: readable, sorted by time, and
unique in practice. The random part is short, so two runs of one DAG triggered in the
same second (a loop of triggers makes a thousand) can still draw the same id; the
database's unique key then refuses the second, and the store draws again in the same
transaction (``leoflow.store.runs``), up to ``GENERATED_ID_TRIES`` times. A scheduled
run's id has no random part: it is its logical date, and a second run for one date is
meant to be refused.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

GENERATED_ID_TRIES = 5
_RANDOM_BYTES = 4  # 8 hex digits


def generated_run_id(run_type: str, when: float) -> str:
    """A fresh id for a run of ``run_type`` at ``when`` (epoch seconds)."""
    stamp = datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
    if run_type == "scheduled":
        return f"{run_type}__{stamp}"
    return f"{run_type}__{stamp}_{secrets.token_hex(_RANDOM_BYTES)}"
