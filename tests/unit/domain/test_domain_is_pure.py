"""The domain opens no files: import-linter forbids the I/O modules, this the builtins.

``open`` and friends need no import, so the domain-pure contract in ``.importlinter``
cannot see them; reading a DAG file is ``leoflow.dagfile``'s job.
"""

from __future__ import annotations

import ast
from pathlib import Path

import leoflow.domain

FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval", "compile", "__import__", "breakpoint"}


def _calls(source: str) -> list[tuple[str, int]]:
    return [
        (node.func.id, node.lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FORBIDDEN_CALLS
    ]


def test_the_domain_calls_no_io_builtins() -> None:
    folder = Path(leoflow.domain.__file__).parent
    files = sorted(folder.rglob("*.py"))
    assert len(files) > 10  # the scan did find the domain's modules
    offenders = [
        f"{path.relative_to(folder)}:{line}: {name}()"
        for path in files
        for name, line in _calls(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_scan_finds_a_builtin_call() -> None:
    assert _calls("def f(p):\n    return open(p).read()\n") == [("open", 2)]
