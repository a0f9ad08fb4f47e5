"""Loopback is no boundary between users: another local user can neither drive Lite's
API nor read its owner token, while the owner's CLI needs no extra step; the open API
is an explicit opt-in that warns.

The other user's clients (httpx, the leoflow CLI) run in a subprocess with that
user's uid (``tests.support.as_user``). The second user is made with ``useradd`` (the
test runs as root, as CI does); without root and outside CI the test is skipped,
saying why; in CI it fails."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import REPO
from tests.support.lite_proc import start_lite, stop, wait
from tests.support.net import free_port


@dataclass(frozen=True)
class OtherUser:
    name: str
    uid: int
    gid: int
    home: str


@pytest.fixture
def other_user() -> Iterator[OtherUser]:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run this test as root: it creates a second local user")
        pytest.skip("needs root to create a second local user (useradd); CI runs it as root")
    name = f"lfprobe{secrets.token_hex(3)}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, f"useradd failed: {made.stderr}"
    home = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    entry = pwd.getpwnam(name)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    try:
        yield OtherUser(name, entry.pw_uid, entry.pw_gid, str(home))
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


def _as(user: OtherUser, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` (``probe BASE`` or a leoflow command) run as ``user``
    (``tests.support.as_user``), with an environment of its own: its HOME, its own
    LEOFLOW_HOME, no other LEOFLOW_*."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    clean.update({"HOME": user.home, "USER": user.name, "LEOFLOW_HOME": f"{user.home}/.leoflow"})
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tests.support.as_user", str(user.uid), str(user.gid), *argv],
        env=clean,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _tcp_listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets' inodes in /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return ports


def _serving(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_another_local_user_cannot_drive_lite_and_the_owner_cli_can(
    other_user: OtherUser,
    env: dict[str, str],
    tmp_path: Path,
    leoflow: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "hello.yaml").write_text("dag_id: hello\ntasks:\n  a: {command: 'echo hi'}\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # A home others may enter (as many distributions make ~): only the file's mode protects it.
    home = Path(tempfile.mkdtemp(prefix="lite-home-"))
    home.chmod(0o755)
    env["LEOFLOW_HOME"] = str(home)  # the owner's `leoflow` fixture uses it too
    proc = start_lite(env, folder, tmp_path / "lite.out", LEOFLOW_API_LISTEN=f"127.0.0.1:{port}")
    try:
        wait(lambda: _serving(base), "Lite to serve its API")
        token_file = home / "api-token"
        info = token_file.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()

        # The other user, with httpx and with the leoflow CLI: refused, nothing changes.
        probe = _as(other_user, "probe", base)
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.split() == ["401", "401", "401"]
        for argv in (("dags", "list"), ("runs",), ("trigger", "hello")):
            cli = _as(other_user, *argv, "--server", base)
            assert cli.returncode == 1 and "401" in cli.stderr, (argv, cli.stderr)
        # Pointing its CLI at the owner's home does not help: the file is not readable.
        stolen = _as(other_user, "dags", "list", "--server", base, LEOFLOW_HOME=str(home))
        assert stolen.returncode == 1 and "401" in stolen.stderr, stolen.stderr
        reader = subprocess.run(
            ["cat", str(token_file)], user=other_user.uid, capture_output=True, check=False
        )
        assert reader.returncode != 0 and not reader.stdout

        # Its agents dial a Unix socket only Lite's user may reach: the API is its one port.
        assert _tcp_listening_ports(proc.pid) == {port}

        # The owner's CLI needs nothing more than before.
        listed = leoflow("dags", "list", "--server", base)
        assert listed.returncode == 0, listed.stderr
        assert "hello" in listed.stdout and "stolen" not in listed.stdout
        assert leoflow("trigger", "hello", "--server", base).returncode == 0
    finally:
        stop(proc)
        shutil.rmtree(home, ignore_errors=True)


def test_the_open_api_is_an_opt_in_and_warns(
    other_user: OtherUser, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "lite.out"
    proc = start_lite(
        env,
        folder,
        out,
        LEOFLOW_API_LISTEN=f"127.0.0.1:{port}",
        LEOFLOW_API_OPEN_ON_LOOPBACK="true",
    )
    try:
        wait(lambda: _serving(base), "Lite to serve its API")
        wait(lambda: "WARNING" in out.read_text(), "the warning")
        assert "every user of this host" in out.read_text()
        assert not (home / "api-token").exists()
        probe = _as(other_user, "probe", base)
        assert probe.stdout.split()[0] == "200", probe.stderr
    finally:
        stop(proc)
