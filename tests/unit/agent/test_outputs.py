"""The agent's scratch directory: input files and variables, and reading the output back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leoflow.agent.outputs import ENV_INPUT_LIMIT, TaskFiles, input_env_name
from leoflow.agent.scratch import SCRATCH


@pytest.fixture(autouse=True)
def _tmpdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def test_the_env_name_rule() -> None:
    assert input_env_name("load-2.b") == "LEOFLOW_INPUT_LOAD_2_B"
    assert input_env_name("Extract_Orders") == "LEOFLOW_INPUT_EXTRACT_ORDERS"


def test_inputs_are_files_and_small_ones_also_variables(tmp_path: Path) -> None:
    big = json.dumps("x" * ENV_INPUT_LIMIT)
    files = TaskFiles({"a": "[1]", "big": big}, 65536)
    env = files.prepare()
    # The inputs are the try's own directory; the output a fresh name beside the others.
    inputs = Path(env["LEOFLOW_INPUTS_DIR"])
    assert inputs == Path(files.root) and inputs.parent == tmp_path
    assert sorted(os.listdir(inputs)) == ["a.json", "big.json"]
    assert Path(env["LEOFLOW_OUTPUT"]).parent.parent == tmp_path
    assert Path(env["LEOFLOW_OUTPUT"]).parent != inputs
    assert (inputs / "a.json").read_text() == "[1]"
    assert (inputs / "big.json").read_text() == big
    assert env["LEOFLOW_INPUT_A"] == "[1]"
    assert "LEOFLOW_INPUT_BIG" not in env  # over 64 KB: the file only
    Path(env["LEOFLOW_OUTPUT"]).write_text("1")
    files.remove()
    assert not Path(files.root).exists() and not Path(env["LEOFLOW_OUTPUT"]).exists()


def test_whatever_the_command_added_goes_with_the_directory() -> None:
    files = TaskFiles({"a": "1"}, 100)
    root = Path(files.prepare()["LEOFLOW_INPUTS_DIR"])
    (root / "extra" / "deeper").mkdir(parents=True)
    (root / "extra" / "deeper" / "f").write_text("x")
    (root / "a.json").unlink()  # and what it took away is no obstacle
    files.remove()
    assert not root.exists()


def test_no_output_written_is_none_and_a_written_one_is_its_text() -> None:
    files = TaskFiles({}, 100)
    env = files.prepare()
    assert "LEOFLOW_INPUTS_DIR" not in env
    assert files.take_output() == (None, "")
    Path(env["LEOFLOW_OUTPUT"]).write_text('{"ok": true}')
    assert files.take_output() == ('{"ok": true}', "")


def test_a_too_big_or_broken_output_says_why() -> None:
    files = TaskFiles({}, 10)
    path = Path(files.prepare()["LEOFLOW_OUTPUT"])
    path.write_text(json.dumps("x" * 20))
    assert files.take_output() == (None, "the output is over the limit of 10 bytes (0 KB)")
    path.write_text("{")
    output, error = files.take_output()
    assert output is None and error.startswith("the output is not valid JSON: ")
    path.write_bytes(b'"\xff"')
    assert files.take_output()[1].startswith("the output is not valid JSON: ")


def test_a_symlink_planted_as_the_output_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('"only root may read this"')
    files = TaskFiles({}, 100)
    os.symlink(secret, files.prepare()["LEOFLOW_OUTPUT"])
    output, error = files.take_output()
    assert output is None
    assert error.startswith("the output file $LEOFLOW_OUTPUT could not be read")


def test_an_old_scheduler_takes_no_output_and_gets_no_variable() -> None:
    files = TaskFiles({"a": "1"}, 0)
    env = files.prepare()
    assert "LEOFLOW_OUTPUT" not in env and env["LEOFLOW_INPUT_A"] == "1"
    assert files.take_output() == (None, "")


def test_a_try_without_inputs_gets_a_fresh_name_in_one_private_directory(tmp_path: Path) -> None:
    first, second = TaskFiles({}, 100), TaskFiles({}, 100)
    one, two = Path(first.prepare()["LEOFLOW_OUTPUT"]), Path(second.prepare()["LEOFLOW_OUTPUT"])
    assert first.root == second.root == ""  # no directory of their own
    assert one != two and one.parent == two.parent and one.parent.parent == tmp_path
    mode = os.lstat(one.parent).st_mode
    assert mode & 0o777 == 0o700 and not one.exists()
    one.write_text("[1]")
    assert first.take_output() == ("[1]", "")
    first.remove(later=True)
    assert not one.exists()
    second.remove()  # nothing was written: nothing to remove, no error
    # A shared directory replaced meanwhile (not ours any more) is not used again.
    shared = one.parent
    shared.rmdir()
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    third = TaskFiles({}, 100)
    assert Path(third.prepare()["LEOFLOW_OUTPUT"]).parent != shared


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_something_planted_where_an_input_goes_fails_the_setup_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """A command running as the agent does can reach a directory made ahead: a FIFO
    there must not block the agent's loop, nor a link have it write elsewhere."""
    ready = tmp_path / "ready"
    ready.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.json"
    if planted == "fifo":
        os.mkfifo(ready / "a.json")
    else:
        os.symlink(target, ready / "a.json")
    monkeypatch.setattr(SCRATCH, "take", lambda base, inputs=False: str(ready))
    files = TaskFiles({"a": "[1]"}, 100)
    with pytest.raises(FileExistsError):
        files.prepare()
    assert not target.exists()
