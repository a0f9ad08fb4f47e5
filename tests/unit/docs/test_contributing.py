"""What docs/CONTRIBUTING.md says of the contributor loop holds: `make test-fast` is the
unit tests without the slow ones, and what it says CI installs, .ci/run installs."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_make_test_fast_runs_the_unit_tests_without_the_slow_ones() -> None:
    done = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "test-fast"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (command,) = [line for line in done.stdout.splitlines() if "pytest" in line]
    words = shlex.split(command)
    assert words[words.index("-m", words.index("pytest")) + 1] == "not slow"
    assert words[-1] == "tests/unit"


def test_what_contributing_says_ci_installs_the_ci_script_installs() -> None:
    contributing = (REPO / "docs" / "CONTRIBUTING.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    for step in (
        "make dev",
        "make helm",
        "make lint",
        "scripts/container-engine.sh install",
        "apt-get install -y chromium",
        "make test",
    ):
        assert step in ci, step
    for said in ("npm", "chromium", "Podman", "`make image`", "`make image-dbt`"):
        assert said in contributing, said
    makefile = (REPO / "Makefile").read_text()
    assert "test: $(STAMP) .tools/bin/helm $(DBT_STAMP)" in makefile


def test_the_readme_two_commands_are_make_targets_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("\n## Two commands\n") :]
    block = section[section.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert "\nrun: " in makefile and "\ntest: " in makefile
    assert "\nmake test\n" in (REPO / ".ci" / "run").read_text()
