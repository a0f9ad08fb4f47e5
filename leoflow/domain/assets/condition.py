"""Asset schedules: ``schedule: {assets: ...}`` parsed, and when it is met.

What a DAG file may write under ``schedule``:

- ``{assets: [A, B]}``: a run once every listed asset has a new event (all of them);
- ``{assets: {any: [A, B]}}``: once any has; ``{all: [...]}`` says all explicitly;
- nested: ``{assets: [A, {any: [B, C]}]}`` is A and (B or C);
- ``{cron: "0 6 * * *", assets: [...]}``: either fires (Airflow's AssetOrTimeSchedule).

The canonical form kept on the spec is a tree of ``{"all": [...]}`` / ``{"any": [...]}``
with normalised URIs at the leaves. Pure: no store, no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from leoflow.domain.assets.uri import AssetUriError, normalize_uri

Condition = dict[str, Any]
# A condition deeper than this is a mistake, and recursion has to stop somewhere.
MAX_DEPTH = 16
MAX_ASSETS = 1000


class ScheduleError(ValueError):
    """A malformed asset schedule; ``loc`` is the field path under ``schedule``."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        self.loc = loc
        self.message = message
        super().__init__(f"{'.'.join(('schedule', *loc))}: {message}")


def parse_schedule(value: object) -> tuple[str | None, Condition | None]:
    """``(cron, condition)`` of a ``schedule`` value: a cron string, or a mapping with
    ``cron`` and/or ``assets``."""
    if value is None or isinstance(value, str):
        return value, None
    if not isinstance(value, Mapping):
        raise ScheduleError((), "expected a cron expression or a mapping with assets and/or cron")
    unknown = sorted(str(k) for k in value if k not in ("cron", "assets"))
    if unknown:
        raise ScheduleError((unknown[0],), "unknown field; a schedule has assets and cron")
    cron = value.get("cron")
    if cron is not None and not isinstance(cron, str):
        raise ScheduleError(("cron",), f"expected a cron expression (a string), got {cron!r}")
    if "assets" not in value:
        if cron is None:
            raise ScheduleError((), "expected assets, cron or both")
        return cron, None
    condition = parse_condition(value["assets"], ("assets",), 0)
    if len(condition_uris(condition)) > MAX_ASSETS:
        raise ScheduleError(("assets",), f"a schedule names at most {MAX_ASSETS} assets")
    return cron, condition


def parse_condition(value: object, loc: tuple[str, ...] = (), depth: int = 0) -> Condition:
    """The canonical tree of one condition (a list, ``{all: ...}``, ``{any: ...}``)."""
    if depth > MAX_DEPTH:
        raise ScheduleError(loc, f"asset conditions nest at most {MAX_DEPTH} deep")
    if isinstance(value, list | tuple):
        return {"all": _members(value, loc, depth)}
    if isinstance(value, Mapping):
        if len(value) != 1 or next(iter(value)) not in ("all", "any"):
            raise ScheduleError(
                loc,
                f"expected {{all: [...]}} or {{any: [...]}}, got keys {sorted(map(str, value))}",
            )
        ((key, members),) = value.items()
        if not isinstance(members, list | tuple):
            raise ScheduleError((*loc, key), f"expected a list of assets, got {members!r}")
        return {key: _members(members, (*loc, key), depth)}
    raise ScheduleError(
        loc, f"expected a list of assets, {{all: [...]}} or {{any: [...]}}, got {value!r}"
    )


def _members(values: list[Any] | tuple[Any, ...], loc: tuple[str, ...], depth: int) -> list[Any]:
    if not values:
        raise ScheduleError(loc, "expected at least one asset")
    out: list[Any] = []
    for index, member in enumerate(values):
        where = (*loc, str(index))
        if isinstance(member, list | tuple | Mapping):
            out.append(parse_condition(member, where, depth + 1))
            continue
        try:
            out.append(normalize_uri(member))
        except AssetUriError as exc:
            raise ScheduleError(where, str(exc)) from None
    return out


def condition_uris(condition: Condition) -> list[str]:
    """Every asset the condition names, each once, in the order written."""
    found: dict[str, None] = {}
    stack: list[Any] = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found[node] = None
        else:
            stack.extend(reversed(next(iter(node.values()))))
    return list(found)


def is_met(condition: Condition, fresh: Collection[str]) -> bool:
    """Whether the assets with a new event (``fresh``) meet the condition."""
    ((key, members),) = condition.items()
    results = (m in fresh if isinstance(m, str) else is_met(m, fresh) for m in members)
    return all(results) if key == "all" else any(results)


def waiting_for(condition: Condition, fresh: Collection[str]) -> list[str]:
    """The assets whose new event would bring the condition closer: those not fresh
    that are needed (an unmet ``all``'s members, an unmet ``any``'s every member)."""
    if is_met(condition, fresh):
        return []
    out: dict[str, None] = {}
    ((_, members),) = condition.items()
    for member in members:
        if isinstance(member, str):
            if member not in fresh:
                out[member] = None
        else:
            out.update(dict.fromkeys(waiting_for(member, fresh)))
    return list(out)
