"""The asset events a producing task's success records, in the success's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from leoflow.store.base import StoreBase, now
from leoflow.store.schema import asset_events

_ev = asset_events.c


@dataclass(frozen=True)
class TaskAssetEvent:
    """One produced asset's event of one successful try."""

    ti_pk: int
    try_number: int
    dag_id: str
    run_id: str
    task_id: str
    uri: str
    extra: str | None  # JSON text, already checked (leoflow.domain.assets.events)


class AssetEventWrites(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._add_task_event = self._insert(asset_events).on_conflict_do_nothing(
            index_elements=[_ev.ti_pk, _ev.try_number, _ev.uri]
        )

    def _insert_task_events(self, conn: Connection, events: Sequence[TaskAssetEvent]) -> None:
        at = now()
        for event in events:  # once per try and asset, whoever writes the success twice
            row = {
                "uri": event.uri, "created_at": at, "source": "task", "dag_id": event.dag_id,
                "run_id": event.run_id, "task_id": event.task_id,
                "try_number": event.try_number, "ti_pk": event.ti_pk, "extra": event.extra,
            }  # fmt: skip
            self._insert_one(conn, self._add_task_event, row)
