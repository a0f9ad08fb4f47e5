"""A command started through ``lifeline`` dies with its parent, whichever way
(setpriv in front, or the ``preexec_fn`` hook) it was started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from leoflow.agent import lifeline as lifeline_module
from leoflow.agent.lifeline import lifeline
from tests.support.procfs import comm, gone


def test_a_found_command_goes_through_setpriv_and_needs_no_hook() -> None:
    if lifeline_module._setpriv() is None:
        pytest.fail("this machine has no setpriv taking --pdeathsig (util-linux)")
    argv, hook = lifeline(["sleep", "1"], os.environ)
    assert argv[1:] == ["--pdeathsig", "KILL", "--", "sleep", "1"] and hook is None


def test_the_hook_stays_where_setpriv_cannot_take_over(tmp_path: Path) -> None:
    missing, hook = lifeline(["no-such-program-anywhere"], os.environ)
    assert missing == ["no-such-program-anywhere"] and hook is not None
    switched, hook = lifeline(["sleep", "1"], os.environ, switches_user=True)
    assert switched == ["sleep", "1"] and hook is not None
    # A relative path is looked for from the command's own working directory.
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    here, hook = lifeline(["./job.sh"], os.environ, cwd=str(tmp_path))
    assert here[-1] == "./job.sh" and hook is None
    elsewhere, hook = lifeline(["./job.sh"], os.environ, cwd="/")
    assert elsewhere == ["./job.sh"] and hook is not None


PARENT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    sys.path.insert(0, sys.argv[1])
    from leoflow.agent import lifeline as module
    if sys.argv[2] == "hook":
        module._setpriv = lambda: None
    argv, hook = module.lifeline(["sleep", "120"], os.environ)
    child = subprocess.Popen(argv, preexec_fn=hook)
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("way", ["setpriv", "hook"])
def test_the_command_gets_sigkill_when_its_parent_is_killed(way: str) -> None:
    root = str(Path(lifeline_module.__file__).parents[2])
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, root, way], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        # The request is made by the child itself (setpriv, or the hook before exec):
        # wait until it runs `sleep`, so the request is in place before the kill.
        deadline = time.monotonic() + 60
        while comm(child) != "sleep":
            assert time.monotonic() < deadline, f"{child} never became sleep ({way})"
            time.sleep(0.01)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 60
        while not gone(child):
            assert time.monotonic() < deadline, f"sleep {child} outlived its parent ({way})"
            time.sleep(0.02)
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
