"""How many live streams (``/ui/events``, a followed log) the web UI serves at once.

Each stream renders its page again every tick; 200 of them on one DAG page once
slowed a trigger to half a minute. So streams are bounded per session — a new one
makes the session's oldest end, with a ``superseded`` event that tells its tab to
stop (the newest tab is the one looked at) — and in total: past that bound a new
stream is answered 503 and the browser retries later. The page streams also share
a render budget: with many open, each ticks less often, so together they render at
most ``ui_live_renders_per_second`` pages a second whatever their number.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from prometheus_client import Gauge

from leoflow.aio.waits import wait_set
from leoflow.settings import Settings

OPEN_STREAMS = Gauge("leoflow_ui_live_streams", "Web UI live streams open in this process")
TOTAL_SETTING = "ui_max_streams (LEOFLOW_UI_MAX_STREAMS)"


@dataclass(eq=False)
class Ticket:
    """One open stream's place; ``stop`` is set when it must end, ``why`` says why."""

    session: str
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    why: str = ""

    async def pause(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the stream must end; True if it must."""
        return await wait_set(self.stop, seconds)

    def end(self, why: str) -> None:
        if not self.stop.is_set():
            self.why = why
            self.stop.set()


@dataclass
class LiveStreams:
    max_total: int = 64
    max_per_session: int = 8
    renders_per_second: float = 20.0
    base_interval: float = 1.0
    _open: dict[Ticket, None] = field(default_factory=dict)  # oldest first
    _closing: bool = False

    @classmethod
    def of(cls, settings: Settings) -> LiveStreams:
        return cls(
            settings.ui_max_streams,
            settings.ui_max_streams_per_session,
            settings.ui_live_renders_per_second,
        )

    @property
    def count(self) -> int:
        return len(self._open)

    def open(self, session: str) -> Ticket | None:
        """A place for a new stream of ``session``, or None: the total bound is reached."""
        if self._closing:
            return None
        mine = [t for t in self._open if t.session == session]
        if len(mine) >= self.max_per_session:
            self.release(mine[0])
            mine[0].end("superseded")
        elif len(self._open) >= self.max_total:
            return None
        ticket = Ticket(session)
        self._open[ticket] = None
        OPEN_STREAMS.inc()
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The stream ended (or was never started): free its place. Idempotent."""
        if ticket in self._open:
            del self._open[ticket]
            OPEN_STREAMS.dec()

    def close_all(self) -> None:
        """The server is stopping: every stream ends now, and none opens."""
        self._closing = True
        for ticket in list(self._open):
            ticket.end("closing")

    def interval(self) -> float:
        """Seconds between a page stream's renders, so that all of them together stay
        within the render budget."""
        return max(self.base_interval, len(self._open) / self.renders_per_second)

    def refusal(self) -> str:
        return (
            f"too many live streams are open ({self.max_total}, {TOTAL_SETTING}); try again shortly"
        )
