"""What a command says about its own failure, read back by the agent."""

from __future__ import annotations

import os
from pathlib import Path

from leoflow.agent.outcome import REASON_LIMIT, take_reason


def test_a_reason_is_read_squashed_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "reason"
    path.write_text("the source\n  table   is gone\n")
    assert take_reason(str(path)) == "the source table is gone"
    assert not path.exists()
    assert take_reason(str(path)) == ""  # none written: nothing to say, nothing to remove


def test_a_long_reason_is_cut_at_the_limit_in_characters(tmp_path: Path) -> None:
    path = tmp_path / "reason"
    path.write_text("é" * (REASON_LIMIT + 50))  # two bytes a character
    reason = take_reason(str(path))
    assert len(reason) == REASON_LIMIT and reason.endswith("...")
    assert set(reason[:-3]) == {"é"}


def test_a_symlink_is_not_followed_and_is_removed(tmp_path: Path) -> None:
    """The agent may be root and the command a task user: a link to a file only root
    may read must not bring its first line into the try's message."""
    secret = tmp_path / "secret"
    secret.write_text("root:$6$hash")
    path = tmp_path / "reason"
    os.symlink(secret, path)
    assert take_reason(str(path)) == ""
    assert not os.path.lexists(path) and secret.exists()
    os.symlink(tmp_path / "nowhere", path)  # dangling: removed all the same
    assert take_reason(str(path)) == ""
    assert not os.path.lexists(path)


def test_anything_but_a_regular_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "reason"
    os.mkfifo(path)  # a read would block the agent's loop
    assert take_reason(str(path)) == ""
    assert not os.path.lexists(path)
