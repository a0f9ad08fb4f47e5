"""Dates inside plain text (a why-waiting answer, a reason) made into ``<time>``
elements, so the page shows them in the viewer's chosen zone as it does every other
date, instead of as raw ISO UTC."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

# What the explainers write: ISO 8601 with seconds and an offset or a Z.
_ISO = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})"
)


def timed(text: object) -> Markup:
    """``text`` escaped, each ISO date with an offset in it wrapped in ``<time>``;
    a date without an offset is left as written (its zone is unknown)."""
    escaped = str(escape("" if text is None else text))
    return Markup(
        _ISO.sub(
            lambda m: (
                f'<time datetime="{m.group(0).replace(" ", "T")}" '
                f'title="{m.group(0)}">{m.group(0)}</time>'
            ),
            escaped,
        )
    )
