"""The owner token file: written 0600, read only when it is sound and this user's, and
given only to the loopback port it names while this user listens there."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from leoflow.api import owner_token
from tests.support.net import free_port

NOBODY = 65534


def test_written_owner_only_and_given_only_to_its_own_loopback_port(tmp_path: Path) -> None:
    port = free_port()
    path = owner_token.write(tmp_path, f"http://127.0.0.1:{port}", "t" * 43)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["api-token"]  # no staging file left
    for server in (f"http://127.0.0.1:{port}", f"http://localhost:{port}/", f"http://[::1]:{port}"):
        assert owner_token.token_for(tmp_path, server) == "t" * 43
    for server in (f"http://127.0.0.1:{port + 1}", f"http://example.com:{port}", "not a url"):
        assert owner_token.token_for(tmp_path, server) is None
    assert owner_token.load_or_create(tmp_path) == "t" * 43


def test_a_file_others_may_read_or_a_link_is_not_taken(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    path = owner_token.write(tmp_path, url, "t" * 43)
    path.chmod(0o644)
    assert owner_token.token_for(tmp_path, url) is None
    assert owner_token.load_or_create(tmp_path) != "t" * 43  # a new one instead
    real = tmp_path / "elsewhere"
    path.rename(real)
    real.chmod(0o600)
    path.symlink_to(real)
    assert owner_token.token_for(tmp_path, url) is None


@contextmanager
def _listening_as(uid: int, port: int) -> Iterator[None]:
    """A socket listening on ``port`` owned by ``uid`` (a forked child that became it)."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        try:
            os.setgid(uid)
            os.setuid(uid)
            sock = socket.socket()
            sock.bind(("127.0.0.1", port))
            sock.listen()
            os.write(ready_w, b"1")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"1"
        yield
    finally:
        os.write(done_w, b"1")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)


def test_not_given_to_a_port_another_user_listens_on(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run this test as root: it listens as another user")
        pytest.skip("needs root to listen as another user; CI runs it as root")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    owner_token.write(tmp_path, url, "t" * 43)
    with _listening_as(NOBODY, port):
        # Lite is down and someone else took its port: it must not get the token.
        assert owner_token.listener_uids(port) == {NOBODY}
        assert owner_token.token_for(tmp_path, url) is None
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", port))
        mine.listen()
        assert owner_token.token_for(tmp_path, url) == "t" * 43
