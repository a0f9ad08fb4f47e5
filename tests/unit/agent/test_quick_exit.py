"""A returning entry point ends its process without teardown, and loses nothing on the way."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(source: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_returned_code_is_the_exit_status_and_buffered_output_arrives() -> None:
    done = _python(
        """
        import sys
        from leoflow.agent import quick_exit
        quick_exit.arm()
        for i in range(20000):
            print(f"line {i}")  # a pipe: block-buffered, so this needs the final flush
        print("to stderr", file=sys.stderr)
        sys.exit(quick_exit.returned(3))
        """
    )
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    assert len(lines) == 20000 and lines[-1] == "line 19999"
    assert done.stderr.strip() == "to stderr"


def test_threads_are_joined_and_later_atexit_functions_run_before_the_exit() -> None:
    done = _python(
        """
        import atexit, threading, time
        from leoflow.agent import quick_exit
        quick_exit.arm()
        atexit.register(lambda: print("atexit ran"))
        def late():
            time.sleep(0.2)
            print("thread finished")
        threading.Thread(target=late).start()
        raise SystemExit(quick_exit.returned(0))
        """
    )
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["thread finished", "atexit ran"]


def test_a_command_that_raised_gets_the_usual_exit_with_its_traceback() -> None:
    done = _python(
        """
        from leoflow.agent import quick_exit
        quick_exit.arm()
        raise RuntimeError("boom")
        """
    )
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr


def test_codes_beyond_a_byte_wrap_as_sys_exit_would() -> None:
    done = _python(
        """
        import sys
        from leoflow.agent import quick_exit
        quick_exit.arm()
        sys.exit(quick_exit.returned(256 + 143))
        """
    )
    assert done.returncode == 143
