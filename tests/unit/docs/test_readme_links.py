"""The README is a landing page of links into docs/ and the examples: each relative link
names a file or folder of this repository (the docs site's strict build checks the
links inside docs/, not the README's)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_every_relative_link_of_the_readme_exists() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [t.split("#")[0] for t in targets if not t.startswith(("http://", "https://"))]
    assert len(relative) > 20
    missing = [t for t in relative if t and not (REPO / t).exists()]
    assert not missing, missing
