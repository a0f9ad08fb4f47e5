"""Creating and deleting task pods through an apiserver that may not answer.

A create, delete or GC call that gets no useful answer (refused, reset, timeout, 429,
5xx) is tried again with capped exponential backoff and jitter, through the client's
token bucket, for ``kube_outage_window``; only an answer that the pod is invalid or
forbidden fails a launch at once. One clock of the outage (``unreachable_since``) is
shared by every call, so a waiting try can say when the outage began.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from leoflow.domain.execution import LaunchError, LaunchWaiting, Report
from leoflow.kube.client import KubeClient
from leoflow.kube.errors import AlreadyExists, KubeError
from leoflow.kube.metrics import APISERVER_UNREACHABLE, CALL_RETRIES, LAUNCHES_WAITING
from leoflow.kube.podcache import Backoff
from leoflow.kube.tries import Key, Try, fmt_seconds
from leoflow.settings import Settings

log = logging.getLogger("leoflow.kube.executor")

# The first retry of a create or delete waits about this long; later ones double,
# up to ``kube_retry_cap``.
RETRY_BASE = 0.2


def _why_retry(exc: KubeError) -> str:
    if exc.status == 0:
        return "unreachable"
    return "throttled" if exc.status == 429 else "server_error"


def _hhmmss(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S")


class PodWrites:
    """The executor's pod creates and deletes, riding out apiserver outages."""

    def __init__(
        self,
        settings: Settings,
        client: Callable[[], KubeClient | None],
        report: Callable[[], Report | None],
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self._client = client
        self._report = report
        self._clock = clock
        # Since when the apiserver has given no useful answer to our writes (None: it
        # answers).
        self.unreachable_since: float | None = None
        self._waiting: set[Key] = set()

    async def create(
        self,
        pod: dict[str, object],
        tracked: Try,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Create the pod, riding out an apiserver that does not answer.

        ``prepare`` runs before each attempt (the pod's owner, its DAG's GC anchor, is
        made there): what it cannot get an answer for is ridden out as the create is.

        The try stays queued meanwhile and keeps its admission slot: the slot is
        what the try will use the moment the apiserver is back, and handing it on
        would only start another DAG's launch that cannot reach the apiserver
        either; holding it keeps admission's accounting unchanged and the number
        of creates at recovery bounded by the slots (no thundering herd past
        parallelism), and the token bucket paces even those.
        """
        client = self._client()
        assert client is not None
        window = self.settings.kube_outage_window
        backoff = Backoff(RETRY_BASE, self.settings.kube_retry_cap)
        first_failure: float | None = None
        try:
            while True:
                if tracked.cancelled is not None:
                    raise LaunchError(
                        f"cancelled ({tracked.cancelled}) before the task's pod was created"
                    )
                try:
                    if prepare is not None:
                        await prepare()
                    await client.create_pod(pod)
                except AlreadyExists:
                    pass  # launched already (a retry, or a restart): never a second pod
                except KubeError as exc:
                    if not exc.retryable:
                        self._answered()
                        raise LaunchError(f"the apiserver refused the task's pod: {exc}") from exc
                    now = self._clock()
                    since = self._unanswered()
                    if first_failure is None:
                        first_failure = now
                        self._note_waiting(tracked, since)
                    waited = now - first_failure
                    if waited >= window:
                        raise LaunchError(
                            f"creating the task's pod failed: the apiserver gave no useful "
                            f"answer for {fmt_seconds(waited)} (kube_outage_window "
                            f"{fmt_seconds(window)}); last: {exc}"
                        ) from exc
                    CALL_RETRIES.labels("create_pod", _why_retry(exc)).inc()
                    delay = min(max(backoff.next(), exc.retry_after or 0.0), window - waited)
                    log.warning(
                        "creating pod %s: %s; trying again in %.1fs", tracked.name, exc, delay
                    )
                    await asyncio.sleep(delay)
                    continue
                self._answered()
                return
        finally:
            if first_failure is not None:
                self._note_waiting(tracked, None)

    async def delete(
        self,
        name: str,
        *,
        grace: int | None = None,
        uid: str | None = None,
        component: str = "gc",
    ) -> bool | None:
        """True: deleted; False: gone already (404) or another pod by now (409);
        None: it failed and may be worth trying again."""
        client = self._client()
        if client is None:
            return None
        try:
            deleted = await client.delete_pod(
                name,
                grace_seconds=grace,
                uid=uid,
                component="dispatch" if component == "dispatch" else "gc",
            )
        except KubeError as exc:
            if exc.status == 409:  # the uid precondition: a different pod by now
                self._answered()
                return False
            if exc.retryable:
                self._unanswered()
                CALL_RETRIES.labels("delete_pod", _why_retry(exc)).inc()
            log.warning("deleting pod %s failed: %s", name, exc)
            return None
        self._answered()
        return deleted

    async def delete_retrying(
        self, name: str, *, grace: int | None, uid: str | None, component: str = "gc"
    ) -> bool:
        """Delete, trying again through an outage for up to ``kube_outage_window``."""
        backoff = Backoff(RETRY_BASE, self.settings.kube_retry_cap)
        deadline = self._clock() + self.settings.kube_outage_window
        while True:
            done = await self.delete(name, grace=grace, uid=uid, component=component)
            if done is not None:
                return done
            left = deadline - self._clock()
            if left <= 0:
                log.error(
                    "deleting pod %s: no answer within kube_outage_window %s; giving up",
                    name,
                    fmt_seconds(self.settings.kube_outage_window),
                )
                return False
            await asyncio.sleep(min(backoff.next(), left))

    def _unanswered(self) -> float:
        if self.unreachable_since is None:
            self.unreachable_since = self._clock()
            APISERVER_UNREACHABLE.set(1)
        return self.unreachable_since

    def _answered(self) -> None:
        if self.unreachable_since is not None:
            self.unreachable_since = None
            APISERVER_UNREACHABLE.set(0)

    def _note_waiting(self, tracked: Try, since: float | None) -> None:
        """Tell the scheduler why the try waits (``since`` None: it no longer does)."""
        if since is None:
            self._waiting.discard(tracked.key)
        else:
            self._waiting.add(tracked.key)
        LAUNCHES_WAITING.set(len(self._waiting))
        report = self._report()
        if report is None:
            return
        message = None
        if since is not None:
            message = (
                f"apiserver unreachable since {_hhmmss(since)} UTC; retrying (the try fails "
                f"if it lasts kube_outage_window {fmt_seconds(self.settings.kube_outage_window)})"
            )
        report(
            LaunchWaiting(
                tracked.key[0],
                tracked.key[1],
                "apiserver_unreachable" if since is not None else None,
                message,
                self._clock(),
            )
        )
