"""Text colours of the web UI against WCAG AA (4.5:1 for normal text), read from
the stylesheet itself, in the light and the dark theme."""

from __future__ import annotations

import re
from importlib import resources

import pytest

CSS = resources.files("leoflow.api.ui").joinpath("static", "ui.css").read_text("utf-8")
AA = 4.5
# Badges, grid squares and Gantt bars put white text on these.
STATE_VARS = (
    "success", "failed", "running", "queued", "scheduled", "retry", "upstream", "skipped",
)  # fmt: skip


def _block(selector: str) -> str:
    found = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", CSS)
    assert found, f"no {selector} block in ui.css"
    return found.group(1)


def _hex6(colour: str) -> str:
    return colour if len(colour) == 7 else "#" + "".join(c * 2 for c in colour[1:])


def _vars(selector: str) -> dict[str, str]:
    found = re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b", _block(selector))
    return {name: _hex6(colour) for name, colour in found}


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _theme(name: str) -> dict[str, str]:
    light = _vars(":root")
    return light if name == "light" else {**light, **_vars(':root[data-theme="dark"]')}


def test_the_known_pairs_are_computed_as_wcag_does() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_text_and_links_meet_aa_on_every_surface(theme: str) -> None:
    v = _theme(theme)
    for ink in ("ink", "muted", "accent"):
        for surface in ("bg", "card"):
            ratio = contrast(v[ink], v[surface])
            assert ratio >= AA, f"{theme}: --{ink} on --{surface} is {ratio:.2f}:1"


@pytest.mark.parametrize("state", STATE_VARS)
def test_white_text_on_every_state_colour_meets_aa(state: str) -> None:
    ratio = contrast(_vars(":root")[state], "#ffffff")
    assert ratio >= AA, f"white on --{state} is {ratio:.2f}:1"


def test_the_primary_button_reads_in_both_themes() -> None:
    for theme in ("light", "dark"):
        v = _theme(theme)
        assert contrast(v["accent"], v["accent-ink"]) >= AA, theme
