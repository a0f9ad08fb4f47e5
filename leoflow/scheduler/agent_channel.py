"""The Channel method: one bidirectional stream per agent process, carrying batches of
every task's messages, each with its own token, each answered on its own.

Order and independence: the messages of one try (one (task instance, try), whichever
stream or token brought them) are handled one after another in arrival order, so its
log chunks are stored in order and before its Complete; different tries proceed
concurrently, so a slow Start never holds up another task. Heartbeats are answered at
once, queued behind nothing. A message that
is refused gets its own status in its reply; nothing else on the stream is touched.

A broken stream loses nothing here: what a message had started runs to its end (its
reply is simply not delivered) and the agent resends every message it has no reply
for. A resent log chunk carries its offset and a resent Complete its item id, so
neither is recorded twice (``AgentOps``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from leoflow.protocol.agent_v1 import AGENT_ID_METADATA, pb
from leoflow.scheduler.agent_ops import AgentOps, Refuse, TryKey, parse, status_of
from leoflow.scheduler.agent_warm import WarmOps

Context = Any  # grpc.aio.ServicerContext; grpc ships no type information
# Replies per ReplyBatch: keeps a batch of Start replies (with environments) well
# under the message size limit.
_REPLIES_PER_BATCH = 256
# A batch stays well under the agent's 4 MiB message limit: Start replies carry a
# task's env and inputs (up to 1 MiB), so a batch is cut by size too.
_BATCH_BYTES = 1024 * 1024


def _batch_end(pending: list[Any]) -> int:
    """How many of the pending replies go in the next batch (at least one)."""
    size = 0
    for count, reply in enumerate(pending[:_REPLIES_PER_BATCH]):
        size += reply.ByteSize()
        if count and size > _BATCH_BYTES:
            return count
    return min(len(pending), _REPLIES_PER_BATCH)


_OK = grpc.StatusCode.OK
_CODE_NUMBER = {code: code.value[0] for code in grpc.StatusCode}
_METHOD = {
    "exchange": "Channel.Exchange",
    "start": "Channel.Start",
    "heartbeat": "Channel.Heartbeat",
    "log": "Channel.Log",
    "complete": "Channel.Complete",
    "resolve_secret": "Channel.ResolveSecret",
    "pod_exchange": "Channel.PodExchange",
    "next_task": "Channel.NextTask",
}


class ChannelHandler:
    """Serves every Channel stream of one endpoint (the per-try order spans them)."""

    def __init__(
        self, ops: AgentOps, counts: dict[tuple[str, str], int], warm: WarmOps | None = None
    ) -> None:
        self._ops = ops
        self._warm = warm
        self._counts = counts
        self._tails: dict[TryKey, asyncio.Task[None]] = {}
        self._streams: set[_Stream] = set()

    async def serve(self, requests: AsyncIterator[bytes], context: Context) -> None:
        agent_id = ""
        for key, value in context.invocation_metadata() or ():
            if key == AGENT_ID_METADATA:
                agent_id = str(value)[:64]
        # Headers at once: the agent waits for them before it writes (see its channel).
        await context.send_initial_metadata(())
        stream = _Stream(context, agent_id or secrets.token_hex(16))
        self._streams.add(stream)
        try:
            async for raw in requests:
                try:
                    batch = parse(pb.AgentBatch, raw)
                except Refuse as refusal:
                    stream.reply(
                        pb.ItemReply(code=_CODE_NUMBER[refusal.code], details="malformed batch")
                    )
                    continue
                for item in batch.items:
                    await self._dispatch(item, stream)
            await stream.finish()
        finally:
            stream.close()
            self._streams.discard(stream)

    async def _dispatch(self, item: Any, stream: _Stream) -> None:
        kind = item.WhichOneof("body")
        if kind is None:
            self._answer(stream, item.id, "?", Refuse(grpc.StatusCode.INVALID_ARGUMENT, "empty"))
            return
        ops = self._ops
        if kind == "exchange":
            stream.spawn(self._run(stream, item, kind, self._exchange(item.exchange, stream.peer)))
            return
        if kind in ("pod_exchange", "next_task"):  # a warm pod's own messages
            stream.spawn(self._run(stream, item, kind, self._warm_op(kind, item, stream.peer)))
            return
        token = item.session_token
        try:
            claims = ops.claims(token)
        except Refuse as refusal:
            self._answer(stream, item.id, kind, refusal)
            return
        key = (claims.ti_pk, claims.try_number)
        if kind == "heartbeat":
            # Inline (served from memory, cheaper than a task of its own) and never
            # queued behind the try's other messages: a log append waiting for a full
            # disk must not starve the heartbeats that keep the try alive.
            await self._run(stream, item, kind, ops.heartbeat(token))
            return
        work: Awaitable[Any]
        if kind == "start":
            work = ops.start(token, item.start)
        elif kind == "log":
            work = self._log(token, item.log)
        elif kind == "complete":
            work = ops.complete(token, item.complete, (stream.agent_id, item.id))
        else:
            work = ops.resolve_secret(token, item.resolve_secret)
        previous = self._tails.get(key)
        task = asyncio.create_task(self._after(previous, self._run(stream, item, kind, work)))
        self._tails[key] = task
        stream.track(task)
        task.add_done_callback(lambda done: self._untail(key, done))

    def _untail(self, key: TryKey, task: asyncio.Task[None]) -> None:
        if self._tails.get(key) is task:
            del self._tails[key]

    @staticmethod
    async def _after(previous: asyncio.Task[None] | None, work: Awaitable[None]) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        await work

    async def _warm_op(self, kind: str, item: Any, peer: str) -> Any:
        if self._warm is None:
            raise Refuse(grpc.StatusCode.UNIMPLEMENTED, "this endpoint has no warm pods")
        if kind == "pod_exchange":
            return await self._warm.pod_exchange(item.pod_exchange, peer)
        return await self._warm.next_task(item.session_token, item.next_task)

    async def _exchange(self, request: Any, peer: str) -> Any:
        response = await self._ops.exchange(request, peer)
        if request.HasField("start"):
            # The agent asked to start with the session just opened: its command goes
            # back in this reply, a round trip less per task. Whatever refuses or fails
            # here, the reply lacks ``start`` and the agent sends Start on its own,
            # which answers (or retries) as usual.
            with contextlib.suppress(Exception):
                started = await self._ops.start(response.session_token, request.start)
                response.start.CopyFrom(started)
                key = (_METHOD["start"], "OK")
                self._counts[key] = self._counts.get(key, 0) + 1
        return response

    async def _log(self, token: str, chunk: Any) -> Any:
        stored = await self._ops.append_log(token, chunk, at_offset=True)
        return pb.LogsAck(bytes_received=stored)

    async def _run(self, stream: _Stream, item: Any, kind: str, work: Awaitable[Any]) -> None:
        try:
            response = await work
        except Exception as exc:
            self._answer(stream, item.id, kind, exc)
            return
        key = (_METHOD[kind], "OK")
        self._counts[key] = self._counts.get(key, 0) + 1
        reply = pb.ItemReply(id=item.id)
        getattr(reply, kind).CopyFrom(response)
        stream.reply(reply)

    def _answer(self, stream: _Stream, item_id: int, kind: str, exc: Exception) -> None:
        code, details = status_of(exc, _METHOD.get(kind, "Channel"))
        key = (_METHOD.get(kind, "Channel"), code.name)
        self._counts[key] = self._counts.get(key, 0) + 1
        stream.reply(pb.ItemReply(id=item_id, code=_CODE_NUMBER[code], details=details))

    async def stop(self) -> None:
        for stream in list(self._streams):
            stream.close()


class _Stream:
    """One agent's stream: replies wait here until its writer takes them as a batch."""

    def __init__(self, context: Context, agent_id: str) -> None:
        self.context = context
        self.agent_id = agent_id
        self.peer = str(context.peer())
        self._pending: list[Any] = []
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Future[None]] = set()
        self._closed = False
        self._writer = asyncio.create_task(self._write_loop())

    def spawn(self, work: Awaitable[None]) -> None:
        self.track(asyncio.ensure_future(work))

    def track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def reply(self, reply: Any) -> None:
        if not self._closed:
            self._pending.append(reply)
            self._wake.set()

    async def _write_loop(self) -> None:
        write: Callable[[bytes], Awaitable[None]] = self.context.write
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = self._pending[: _batch_end(self._pending)]
                del self._pending[: len(batch)]
                try:
                    await write(pb.ReplyBatch(replies=batch).SerializeToString())
                except Exception:  # the agent went away; it resends what it lacks
                    self.close()
                    return
            if self._closed:
                return

    def close(self) -> None:
        self._closed = True
        self._pending.clear()
        self._wake.set()

    async def finish(self) -> None:
        """The agent stopped sending: answer what is in hand, then end the stream."""
        while self._tasks and not self._closed:
            await asyncio.wait(list(self._tasks))
        self._closed = True
        self._wake.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self._writer
