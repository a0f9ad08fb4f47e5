"""Task output buffered for the store is taken out of the buffer only once written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from leoflow.scheduler.logbuffer import LogBuffer
from leoflow.store import Store
from leoflow.store.diskfull import StoreFull
from tests.support.tmpfs import fill, mounted_tmpfs


async def test_a_failed_write_keeps_the_output_for_the_next_flush(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "8m") as disk:
        store = await Store.open(f"sqlite:///{disk / 'leoflow.db'}")
        try:
            buffer = LogBuffer(store)
            first = b"".join(b"%07d\n" % i for i in range(200_000))  # 1.6 MB
            buffer.add(1, 1, first[:800_000])
            buffer.add(1, 1, first[800_000:])
            ballast = fill(disk, 64 * 1024)
            # A store that gives up at once rather than waiting for space (it is closing).
            store.space.closed = True
            with pytest.raises(StoreFull, match=r"leoflow\.db is full"):
                await buffer.flush()
            assert await store.log_size(1, 1) == 0
            buffer.add(1, 1, b"after\n")
            ballast.unlink()
            store.space.closed = False
            await buffer.flush()
            assert await store.read_log(1, 1) == first + b"after\n"
        finally:
            await store.close()


async def test_a_write_waits_for_space_and_then_goes_through(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "8m") as disk:
        store = await Store.open(f"sqlite:///{disk / 'leoflow.db'}")
        try:
            data = b"x" * 2_000_000
            ballast = fill(disk, 64 * 1024)
            append = asyncio.create_task(store.append_log(1, 1, data))
            deadline = asyncio.get_running_loop().time() + 30
            while store.space.full_since is None:
                assert not append.done(), append  # it must wait, neither fail nor succeed
                assert asyncio.get_running_loop().time() < deadline, "no full disk seen"
                await asyncio.sleep(0.05)
            ballast.unlink()
            await asyncio.wait_for(append, 30)
            assert store.space.full_since is None
            assert await store.read_log(1, 1) == data
        finally:
            await store.close()
