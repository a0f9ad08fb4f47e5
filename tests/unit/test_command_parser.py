"""`leoflow run` parses with its own part of the parser exactly as with the whole one."""

from __future__ import annotations

import contextlib
import io

import pytest

from leoflow.commands.main import build_parser, command_word


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["run", "dag.yaml"], "run"),
        (["--config", "s.yaml", "run", "dag.yaml"], "run"),
        (["--config=s.yaml", "run"], "run"),
        (["dags", "validate", "x"], "dags"),
        (["--help"], None),
        (["-h", "run"], None),
        (["--config"], None),
        ([], None),
    ],
)
def test_command_word_is_the_first_word_past_the_config_option(
    argv: list[str], word: str | None
) -> None:
    assert command_word(argv) == word


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "dag.yaml"],
        ["--config", "s.yaml", "run", "one", "--dags", "folder", "--executor", "subprocess"],
        ["run", "dag.yaml", "--conf", '{"a": 1}', "--executor", "agent"],
    ],
)
def test_the_run_parser_reads_a_run_as_the_whole_parser_does(argv: list[str]) -> None:
    assert vars(build_parser("run").parse_args(argv)) == vars(build_parser().parse_args(argv))


def _help(command: str | None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser(command).parse_args(["run", "--help"])
    return out.getvalue()


def test_run_help_is_the_same_from_either_parser() -> None:
    assert "--executor" in _help("run")
    assert _help("run") == _help(None)
