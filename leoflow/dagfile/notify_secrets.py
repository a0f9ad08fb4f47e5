"""A ``notify:`` webhook secret that does not exist is a load error, where it was written.

Checked only where the loading process sees the secrets the scheduler will read
(``LoadOptions.known_secrets``): Lite's folder, ``leoflow run``, and the API inside
``leoflow lite``. A rule set in ``defaults`` is reported once, under ``defaults``,
not once per task that inherits it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from leoflow.domain.dag import DagSpec, TaskFields
from leoflow.domain.notify import NotifyRule

Loc = tuple[str, ...]


def missing_webhook_secrets(
    spec: DagSpec, raw: Mapping[str, Any], known: Collection[str], where: str
) -> list[tuple[Loc, str]]:
    """(field path, message) for every rule whose ``webhook_secret`` is not in ``known``."""
    names = set(known)
    problems: list[tuple[Loc, str]] = []

    def check(prefix: Loc, rules: tuple[NotifyRule, ...] | list[NotifyRule]) -> None:
        for index, rule in enumerate(rules):
            if rule.webhook_secret not in names:
                problems.append(
                    (
                        (*prefix, "notify", str(index), "webhook_secret"),
                        f"webhook secret {rule.webhook_secret!r} does not exist in {where}: "
                        "create it, or name a secret that exists",
                    )
                )

    check((), spec.notify)
    defaults = raw.get("defaults")
    if isinstance(defaults, dict) and "notify" in defaults:
        check(("defaults",), TaskFields.model_validate(defaults).notify or [])
    tasks = raw.get("tasks")
    for task_id, task in spec.tasks.items():
        written = tasks.get(task_id) if isinstance(tasks, dict) else None
        if isinstance(written, dict) and "notify" in written:
            check(("tasks", task_id), task.notify)
    return problems
