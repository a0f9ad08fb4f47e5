"""How a Kubernetes executor reports a try's outcome: at once (a pod that cannot start),
or, for a pod that ended, a short grace later so the agent's own, richer report usually
lands first (the scheduler ignores a TaskFinished for a try that is already terminal),
with the container log when the agent could not reach the control plane."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from leoflow.domain.execution import LogData, Report, TaskFinished
from leoflow.kube.client import KubeClient
from leoflow.kube.errors import KubeError
from leoflow.kube.promised_work import PromisedWork
from leoflow.kube.records import Outcome, PodRecord, terminal_outcome, waiting_outcome
from leoflow.kube.tries import AGENT_COULD_NOT_REPORT, Tries, Try


class TryOutcomes:
    """Turns what the pod cache says about a tracked try into its one report.

    ``delete_now`` deletes a pod whose try was reported stuck (it would never start).
    """

    def __init__(
        self,
        tries: Tries,
        *,
        report: Callable[[], Report | None],
        client: Callable[[], KubeClient | None],
        clock: Callable[[], float],
        agent_grace: float,
        work: PromisedWork,
        delete_now: Callable[[PodRecord], None],
    ) -> None:
        self._tries = tries
        self._report = report
        self._client = client
        self._clock = clock
        self.agent_grace = agent_grace
        self._work = work
        self._delete_now = delete_now
        self._timers: set[asyncio.TimerHandle] = set()

    def cancel_timers(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    def examine(self, tracked: Try, record: PodRecord) -> None:
        if tracked.finishing:
            return
        tracked.absent_since = None
        if record.terminal:
            # Give the agent's own report a head start; this one is the fallback.
            tracked.finishing = True
            outcome = terminal_outcome(record)
            loop = asyncio.get_running_loop()
            tracked.timer = loop.call_later(self.agent_grace, self._finish_later, tracked, outcome)
            self._timers.add(tracked.timer)
            return
        if record.deleting:
            return
        stuck = waiting_outcome(record)
        if stuck is not None:
            self.finish(tracked, stuck)
            self._delete_now(record)

    def _finish_later(self, tracked: Try, outcome: Outcome) -> None:
        if tracked.timer is not None:
            self._timers.discard(tracked.timer)
        if outcome.exit_code in AGENT_COULD_NOT_REPORT:
            # The agent never reached the control plane, so its own diagnostics are
            # only in the container log: put them where the user looks, the try's log.
            self._work.spawn(self._finish_with_container_log(tracked, outcome))
            return
        self.finish(tracked, outcome)

    async def _finish_with_container_log(self, tracked: Try, outcome: Outcome) -> None:
        try:
            client = self._client()
            assert client is not None
            text = await client.read_pod_log(tracked.name, tail_lines=200)
        except KubeError as exc:
            text = f"(the container log could not be read: {exc})\n"
        report = self._report()
        if report is not None and text:
            header = "[leoflow] the task's agent could not report; its container log follows\n"
            report(LogData(tracked.key[0], tracked.key[1], (header + text).encode()))
        self.finish(tracked, outcome)

    def finish(self, tracked: Try, outcome: Outcome) -> None:
        tracked.finishing = True
        self._tries.untrack(tracked)
        report = self._report()
        if report is None:
            return
        report(
            TaskFinished(
                tracked.key[0],
                tracked.key[1],
                outcome.exit_code,
                outcome.reason,
                outcome.message,
                self._clock(),
            )
        )
