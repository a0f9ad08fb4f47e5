"""PodGc's loop: pods deleted once, ``gc_age`` after they ended; stopped by cancel."""

from __future__ import annotations

import asyncio

from leoflow.kube.pod_gc import PodGc
from leoflow.kube.records import PodRecord


def _pod(name: str) -> PodRecord:
    return PodRecord(name=name, uid=f"uid-{name}", ti_pk=1, try_number=1, phase="Succeeded")


async def test_a_stop_as_a_pod_turns_terminal_ends_the_loop() -> None:
    """``leoflow run --executor kubernetes`` hung at exit: its last pod turned
    terminal (waking GC) in the iteration GC was cancelled, and GC, with a pod due
    in gc_age, waited on instead of stopping."""
    gc = PodGc(gc_age=3600.0, clock=asyncio.get_running_loop().time)
    pods = {p.name: p for p in (_pod("first"), _pod("last"))}
    deleted: list[str] = []

    async def delete(name: str, uid: str) -> bool:
        deleted.append(name)
        return True

    gc.schedule(pods["first"])  # due in an hour: GC's wait has a bound
    task = asyncio.create_task(gc.run(pods.get, delete))
    for _ in range(3):
        await asyncio.sleep(0)  # GC is inside its wait now
    gc.schedule(pods["last"])
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert task in done and task.cancelled()
    assert deleted == []  # nothing was due


async def test_each_pod_is_deleted_once_when_due() -> None:
    gc = PodGc(gc_age=0.05, clock=asyncio.get_running_loop().time)
    pod = _pod("done")
    deleted: list[str] = []
    gone = asyncio.Event()

    async def delete(name: str, uid: str) -> bool:
        deleted.append(name)
        gone.set()
        return True

    task = asyncio.create_task(gc.run({pod.name: pod}.get, delete))
    gc.schedule(pod)
    assert deleted == []  # not before gc_age after it ended
    await asyncio.wait_for(gone.wait(), 10)
    gc.schedule(pod)  # seen terminal again (a relist): still deleted once
    await asyncio.sleep(0.1)
    assert deleted == ["done"] and list(gc.deleted) == ["done"]
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    assert task.cancelled()
