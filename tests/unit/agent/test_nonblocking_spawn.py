"""A command started off the loop gets what ``subprocess`` with ``process_group=0``
would give it, and its output and exit reach the protocol as asyncio's would. So does
one started on the loop's own thread (``on_loop``, for an agent's only task)."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from pathlib import Path

import pytest

from leoflow.agent import nonblocking_spawn
from leoflow.agent.child import ChildProtocol

PATH = os.environ.get("PATH", os.defpath)


class Recorder(ChildProtocol):
    """ChildProtocol's futures, with the output kept instead of shipped."""

    def __init__(self) -> None:
        super().__init__(shipper=None)  # type: ignore[arg-type]
        self.out = bytearray()
        self.err = bytearray()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        (self.out if fd == 1 else self.err).extend(data)


@pytest.fixture(params=[False, True], ids=["worker", "on_loop"])
def on_loop(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def _run(
    argv: list[str], env: dict[str, str], cwd: str | None = None, *, on_loop: bool = False
) -> Recorder:
    started = await nonblocking_spawn.spawn(Recorder, argv, env, cwd, on_loop=on_loop)
    assert started is not None, "this machine (Linux, glibc, pidfd) should take the off-loop path"
    transport, proto = started
    await proto.exited
    await proto.pipes_closed
    transport.close()
    proto.pid = transport.get_pid()  # type: ignore[attr-defined]
    return proto


SHOW = (
    "echo out; echo err >&2; echo pgid=$(cut -d' ' -f5 /proc/$$/stat) pid=$$; "
    "pwd; read line || echo stdin-empty; "
    "echo FOO=$FOO; exit 7"
)


async def test_output_exit_group_cwd_env_stdin_and_signals(tmp_path: Path, on_loop: bool) -> None:
    env = {"PATH": PATH, "FOO": "bar"}
    proto = await _run(["sh", "-c", SHOW], env, cwd=str(tmp_path), on_loop=on_loop)
    out = proto.out.decode()
    assert proto.exited.result() == 7
    assert proto.err.decode() == "err\n"
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and " " not in line)
    assert lines["FOO"] == "bar"
    assert f"pgid={proto.pid} pid={proto.pid}" in out  # type: ignore[attr-defined]
    assert f"\n{tmp_path}\n" in out and "stdin-empty" in out
    # The masks of the spawned process itself (a shell's own would show what it blocks
    # around its forks).
    argv = ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]
    proto = await _run(argv, {"PATH": PATH}, on_loop=on_loop)
    masks = dict(line.split(":\t") for line in proto.out.decode().splitlines())
    assert int(masks["SigBlk"], 16) == 0  # an empty signal mask
    assert int(masks["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1)) == 0  # SIGPIPE back to default


async def test_a_signal_death_is_minus_the_signal() -> None:
    proto = await _run(["sh", "-c", "kill -TERM $$"], {"PATH": PATH})
    assert proto.exited.result() == -signal.SIGTERM


async def test_failures_raise_as_subprocess_does(tmp_path: Path, on_loop: bool) -> None:
    env = {"PATH": PATH}
    spawn = functools.partial(nonblocking_spawn.spawn, Recorder, on_loop=on_loop)
    with pytest.raises(FileNotFoundError):
        await spawn(["no-such-program-anywhere"], env, None)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(PermissionError):
        await spawn([str(script)], env, None)
    with pytest.raises(FileNotFoundError):
        await spawn(["true"], env, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="null byte"):
        await spawn(["echo", "a\0b"], env, None)
    with pytest.raises(ValueError, match="environment variable name"):
        await spawn(["true"], {**env, "A=B": "1"}, None)


async def test_a_path_of_its_own_is_searched_here_and_a_miss_takes_the_usual_path(
    tmp_path: Path,
) -> None:
    program = tmp_path / "only-here"
    program.write_text("#!/bin/sh\necho found-it\n")
    program.chmod(0o755)
    proto = await _run(["only-here"], {"PATH": f"{tmp_path}:{PATH}"})
    assert proto.out == b"found-it\n"
    # Not on its own PATH: None, so the caller's usual path says "command not found".
    missing = await nonblocking_spawn.spawn(Recorder, ["no-such"], {"PATH": str(tmp_path)}, None)
    assert missing is None


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
async def test_twenty_at_once_each_get_their_own_output() -> None:
    protos = await asyncio.gather(
        *(_run([sys.executable, "-c", f"print({i})"], {"PATH": PATH}) for i in range(20))
    )
    assert [bytes(p.out) for p in protos] == [f"{i}\n".encode() for i in range(20)]


async def test_paused_output_waits_in_the_pipe_and_nothing_is_lost() -> None:
    """The shipper's back-pressure pauses both pipes: the command then blocks on a full
    pipe instead of the agent buffering its output, and resumes where it stopped."""
    size = 1 << 20  # well past a pipe's 64 KiB
    script = f"import sys; sys.stdout.buffer.write(b'x' * {size}); sys.stderr.write('done')"
    started = await nonblocking_spawn.spawn(Recorder, [sys.executable, "-c", script], {}, None)
    assert started is not None
    transport, proto = started
    proto.pause(True)
    await asyncio.sleep(0.3)  # the command fills the pipe and blocks on it
    assert not proto.exited.done()
    assert len(proto.out) < size
    proto.pause(False)
    assert await proto.exited == 0
    await proto.pipes_closed
    assert bytes(proto.out) == b"x" * size and bytes(proto.err) == b"done"
    transport.close()


async def test_closing_before_eof_still_tells_the_protocol_each_pipe_ended() -> None:
    """As asyncio's transport does: closed pipes end with pipe_connection_lost (the
    agent's drain waits for it), once each, and the command is still reaped."""
    lost: list[int] = []

    class Counting(Recorder):
        def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
            lost.append(fd)
            super().pipe_connection_lost(fd, exc)

    started = await nonblocking_spawn.spawn(Counting, ["sleep", "0.2"], {"PATH": PATH}, None)
    assert started is not None
    transport, proto = started
    transport.close()
    transport.close()
    await asyncio.wait_for(proto.pipes_closed, 5)
    assert sorted(lost) == [1, 2]
    assert await asyncio.wait_for(proto.exited, 5) == 0
    assert sorted(lost) == [1, 2]
