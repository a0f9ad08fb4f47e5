"""A pool agent's end removes the scratch directory Lite gave it, once it is empty:
Lite does it too, but not when Lite itself was killed (the agent ends then as well).
Then the agent also removes the dead endpoint's socket directory (leoflow run's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.agent import cli, pool
from leoflow.agent.outputs import TaskFiles


def test_the_given_directory_goes_with_what_the_tries_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "leoflow-agent-x"
    given.mkdir()
    monkeypatch.setenv("LEOFLOW_SCRATCH_DIR", str(given))
    files = TaskFiles({"up": "1"}, 100)
    env = files.prepare()  # a try's directory and the agent's output directory, in it
    assert Path(env["LEOFLOW_INPUTS_DIR"]).parent == given
    assert Path(env["LEOFLOW_OUTPUT"]).parent.parent == given
    files.remove(later=True)
    cli._close_scratch()
    assert not given.exists()


def test_a_directory_with_something_else_in_it_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "given"
    given.mkdir()
    (given / "not ours").write_text("x")
    monkeypatch.setenv("LEOFLOW_SCRATCH_DIR", str(given))
    cli._close_scratch()
    assert (given / "not ours").exists()


def _socket_in(path: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the file stays, as a dead server's does


def test_an_orphaned_agent_removes_the_dead_endpoints_socket_directory(tmp_path: Path) -> None:
    socket_dir = tmp_path / "leoflow-run-x"
    socket_dir.mkdir()
    _socket_in(socket_dir / "agent.sock")
    pool._remove_socket_dir(str(socket_dir))
    assert not socket_dir.exists()


def test_only_sockets_are_removed_from_it(tmp_path: Path) -> None:
    socket_dir = tmp_path / "leoflow-run-x"
    socket_dir.mkdir()
    _socket_in(socket_dir / "agent.sock")
    (socket_dir / "notes").write_text("x")
    pool._remove_socket_dir(str(socket_dir))
    assert [p.name for p in socket_dir.iterdir()] == ["notes"]
