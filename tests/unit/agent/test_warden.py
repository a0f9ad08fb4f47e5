"""A warden kills the process groups it was told of when the process that started it
dies, whichever way: a SIGKILL, or a clean exit that left a group behind; never a
group that was struck off."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from leoflow.agent import warden as warden_module
from leoflow.agent.lifeline import lifeline
from leoflow.agent.warden import Warden
from tests.support.procfs import comm, gone

# Starts a warden (whose nap, while it has groups listed, is an hour: our death must
# end it) and two commands, each in a session of its own, each with a
# background `sleep` in its group; lists both with the warden, strikes the second
# off, prints the pids (leaders and background sleeps) and waits to be killed.
PARENT = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from leoflow.agent import warden as warden_module
    from leoflow.agent.warden import Warden
    warden_module.NAP = 3600  # the warden naps while groups are listed: not this long
    warden = Warden.start()
    assert warden is not None
    pids = []
    for name in ("kept", "forgotten"):
        r, w = os.pipe()
        pid = os.posix_spawn(
            "/bin/sh", ["sh", "-c", "sleep 120 & echo $!; exec sleep 120"], dict(os.environ),
            file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)], setsid=True,
        )
        os.close(w)
        background = int(os.read(r, 64).split()[0])
        warden.watch(pid)
        pids += [pid, background]
    warden.forget(pids[2])
    print(*pids, flush=True)
    if sys.argv[2] == "exit":
        os._exit(0)
    time.sleep(120)
    """
)


def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("end", ["sigkill", "exit"])
def test_the_listed_groups_die_with_the_parent_and_the_forgotten_one_lives(end: str) -> None:
    root = str(Path(warden_module.__file__).parents[2])
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, root, end], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    kept, kept_background, forgotten, forgotten_background = map(
        int, parent.stdout.readline().split()
    )
    everyone = (kept, kept_background, forgotten, forgotten_background)
    try:
        for pid in everyone:
            _wait(lambda pid=pid: comm(pid) == "sleep", f"{pid} never became sleep")
        if end == "sigkill":
            parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
        for pid in (kept, kept_background):
            _wait(lambda pid=pid: gone(pid), f"sleep {pid} outlived its parent ({end})")
        # The warden has acted (the kept group is gone); the struck-off group lives on.
        assert not gone(forgotten) and not gone(forgotten_background)
    finally:
        parent.kill()
        for pid in everyone:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_closed_warden_is_reaped_and_commands_go_back_to_the_per_command_way() -> None:
    warden = Warden.start()
    assert warden is not None and warden.alive
    argv, hook = lifeline(["sleep", "1"], os.environ, warden=warden)
    assert argv == ["sleep", "1"] and hook is None  # the warden stands in
    warden.close()
    assert not warden.alive
    with pytest.raises(ChildProcessError):  # already reaped by close(): no zombie left
        os.waitpid(warden.pid, os.WNOHANG)
    warden.watch(12345)  # a no-op now, never an error
    argv, _ = lifeline(["sleep", "1"], os.environ, warden=warden)
    assert argv[-2:] == ["sleep", "1"] and argv != ["sleep", "1"]  # setpriv in front again


def test_a_warden_that_died_is_noticed_at_the_next_line() -> None:
    warden = Warden.start()
    assert warden is not None
    os.kill(warden.pid, signal.SIGKILL)
    os.waitpid(warden.pid, 0)
    warden.watch(os.getpid())  # EPIPE: the warden is gone
    assert not warden.alive


def test_close_does_not_wait_out_the_wardens_nap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warden_module, "NAP", 3600.0)
    warden = Warden.start()
    assert warden is not None
    sleeper = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        warden.watch(sleeper.pid)  # listed: the warden reads it, then naps
        time.sleep(0.2)
        warden.forget(sleeper.pid)
        closing = threading.Thread(target=warden.close)
        closing.start()
        closing.join(60)
        assert not closing.is_alive(), "close() waited for the warden's nap to end"
        assert sleeper.poll() is None  # struck off before the close: left alone
    finally:
        sleeper.kill()
        sleeper.wait()
