"""Writes to a helper's stdin go straight into the pipe, and whatever a full pipe
refuses is written later without blocking the loop and without losing a byte."""

from __future__ import annotations

import asyncio
import os
import sys

from leoflow.executor.spawn import spawn_piped

# Reads nothing until told to on stdin's first line, then echoes everything back.
_SLOW_READER = (
    "import sys, time\n"
    "first = sys.stdin.buffer.readline()\n"
    "time.sleep(0.3)\n"
    "sys.stdout.buffer.write(first)\n"
    "sys.stdout.buffer.write(sys.stdin.buffer.read())\n"
)


async def _echoed(payloads: list[bytes]) -> tuple[bytes, int]:
    got: list[bytes] = []
    child = await spawn_piped([sys.executable, "-c", _SLOW_READER], dict(os.environ), got.append)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        for payload in payloads:
            await child.write(payload)
    finally:
        child.close_stdin()
        code = await asyncio.wait_for(child.wait(), 30)
        await asyncio.wait_for(child.output_closed(), 30)
        ticker.cancel()
    assert code == 0
    return b"".join(got), ticks


async def test_small_lines_arrive_whole_and_in_order() -> None:
    lines = [f'{{"op": "run", "key": "{i}:1"}}\n'.encode() for i in range(500)]
    echoed, _ = await _echoed(lines)
    assert echoed == b"".join(lines)


async def test_more_than_a_full_pipe_waits_without_blocking_the_loop() -> None:
    # Far more than a pipe holds (64 KiB by default): most of it waits for the reader.
    big = bytes(range(256)) * 16 * 1024  # 4 MiB
    echoed, ticks = await _echoed([b"start\n", big, b"end\n"])
    assert echoed == b"start\n" + big + b"end\n"
    # The reader slept 0.3 s before reading: the loop kept running meanwhile.
    assert ticks >= 5


async def test_closing_stdin_wakes_a_write_that_waits_for_room() -> None:
    # The reader never reads: the write fills the pipe and waits; closing stdin under
    # it must end that write with BrokenPipeError, not leave it waiting forever.
    child = await spawn_piped(
        [sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), lambda _: None
    )
    try:
        write = asyncio.create_task(child.write(b"x" * (4 * 1024 * 1024)))
        while child._blocked is None:  # the state this test is about: a write waiting
            await asyncio.sleep(0.01)
            assert not write.done()
        child.close_stdin()
        try:
            await asyncio.wait_for(write, 30)
        except BrokenPipeError:
            pass
        else:
            raise AssertionError("the write returned though its data was never taken")
    finally:
        os.kill(child.pid, 9)
        await asyncio.wait_for(child.wait(), 30)
