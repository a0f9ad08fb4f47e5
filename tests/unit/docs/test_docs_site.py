"""The documentation site builds with MkDocs in strict mode (what CI runs through this
test): a link to a page or an anchor that does not exist, or a page left out of the
nav, fails the build. And the build fetches nothing: no web fonts, no external assets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
MKDOCS = str(Path(sys.executable).parent / "mkdocs")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MKDOCS, "build", "--strict", "--clean", "-f", str(root / "mkdocs.yml"), "-d", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copy(REPO / "README.md", root / "README.md")
    return root


def test_the_site_builds_in_strict_mode_with_no_external_asset(tmp_path: Path) -> None:
    done = _build(_copy(tmp_path), tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    pages = list((tmp_path / "site").rglob("*.html"))
    assert len(pages) > 30
    for page in pages:
        html = page.read_text()
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page
        external = re.findall(r'<(?:link|script|img)[^>]+(?:src|href)="https?://', html)
        assert not external, (page, external)


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    index = root / "docs" / "index.md"
    broken = "[a page](no-such-page.md) and [an anchor](how-to/dbt.md#no-such-heading)"
    index.write_text(index.read_text() + f"\n{broken}\n")
    done = _build(root, tmp_path / "site")
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "no-such-page.md" in said and "no-such-heading" in said, said
