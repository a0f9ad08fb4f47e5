"""Kubernetes resource quantities (``2Gi``, ``500m``, ``1e3``) as numbers."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(10) ** (3 * n) for n, s in enumerate("kMGTPE", 1)},
    **{s + "i": Decimal(2) ** (10 * n) for n, s in enumerate("KMGTPE", 1)},
}


def parse_quantity(text: object) -> Decimal:
    """The quantity's value; ValueError names what was expected."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 512Mi, 2Gi, 500m, 1.5)")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(f"{text!r} is not a number") from exc
    if suffix[:1] in ("e", "E"):
        return value * Decimal(10) ** int(suffix[1:])
    return value * _SUFFIX[suffix]
