"""What the loop sets going and does not wait for: launches, cancels, deliveries.

A launch that fails comes back to the loop as the try's end (``LAUNCH_FAILED``),
reported like any executor event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from leoflow.aio import stages
from leoflow.domain.execution import Executor, ExecutorEvent, Launch, LaunchError, TaskFinished
from leoflow.domain.reasons import EndReason

log = logging.getLogger("leoflow.scheduler")


class Background:
    def __init__(
        self,
        executor: Executor,
        report: Callable[[ExecutorEvent], None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.executor = executor
        self._report = report
        self._clock = clock
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        self.spawn(self.executor.cancel(ti_pk, try_number, reason))

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def launch(self, launch: Launch) -> None:
        stages.mark("launch", launch.ti_pk, launch.try_number)
        try:
            await self.executor.launch(launch)
        except LaunchError as exc:
            message = str(exc)
        except Exception as exc:
            log.exception("launching %s.%s failed", launch.dag_id, launch.task_id)
            message = f"launch failed: {type(exc).__name__}: {exc}"
        else:
            return
        self._report(
            TaskFinished(
                launch.ti_pk,
                launch.try_number,
                None,
                EndReason.LAUNCH_FAILED,
                message,
                self._clock(),
            )
        )
