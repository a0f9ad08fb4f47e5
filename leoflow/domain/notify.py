"""Notifications: what a DAG author may ask for in ``notify:``, and what is sent.

``notify:`` on the DAG speaks of the run (it ``failure``, ``success`` or
``deadline_missed``); on a task (or in ``defaults``) of that task's tries
(``failure`` once it is out of tries, ``retry`` for each try that will be retried,
``success``). Each rule names the secret that holds the webhook's URL, so a URL with
a token in it never sits in a DAG file, and a format: ``json`` (Leoflow's own
document) or ``slack`` (an incoming-webhook message).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

NOTIFY_EVENTS = ("failure", "retry", "success", "deadline_missed")
NotifyEvent = Literal["failure", "retry", "success", "deadline_missed"]
# The same rule as a task's ``secrets`` names (leoflow/domain/dag.py).
_SECRET_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$"


def _events(value: object) -> object:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise ValueError(f"expected a list of events out of: {', '.join(NOTIFY_EVENTS)}")
    for item in items:
        if item not in NOTIFY_EVENTS:
            raise ValueError(f"unknown event {item!r}; expected any of: {', '.join(NOTIFY_EVENTS)}")
    return tuple(items)


class NotifyRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    events: Annotated[tuple[NotifyEvent, ...], BeforeValidator(_events)]
    webhook_secret: Annotated[str, Field(pattern=_SECRET_NAME)]
    format: Literal["json", "slack"] = "json"


@dataclass(frozen=True, slots=True)
class Notification:
    event: NotifyEvent
    dag_id: str
    run_id: str
    task_id: str | None  # None: the run's own event
    try_number: int | None
    state: str
    message: str | None
    at: float

    @property
    def subject(self) -> str:
        where = (
            f"task {self.task_id} of run {self.run_id}" if self.task_id else f"run {self.run_id}"
        )
        return f"{self.dag_id}: {where}"


def rules_for(rules: tuple[NotifyRule, ...], event: NotifyEvent) -> list[NotifyRule]:
    return [rule for rule in rules if event in rule.events]


_VERB = {
    "failure": "failed",
    "retry": "failed and will be retried",
    "success": "succeeded",
    "deadline_missed": "missed its deadline",
}


def payload(fmt: Literal["json", "slack"], note: Notification) -> dict[str, Any]:
    """The request body for one notification in the rule's format."""
    when = datetime.fromtimestamp(note.at, UTC).isoformat(timespec="seconds")
    if fmt == "slack":
        text = f"Leoflow: {note.subject} {_VERB[note.event]}"
        if note.try_number:
            text += f" (try {note.try_number})"
        if note.message:
            text += f"\n>{note.message[:500]}"
        return {"text": text}
    return {
        "event": note.event,
        "dag_id": note.dag_id,
        "run_id": note.run_id,
        "task_id": note.task_id,
        "try_number": note.try_number,
        "state": note.state,
        "message": note.message,
        "at": when,
    }
