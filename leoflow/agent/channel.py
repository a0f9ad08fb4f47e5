"""The agent's one long-lived stream to the control plane (the ``Channel`` method).

Every message of every task this process runs is an item on it, with its own
task's token. Items wait in a queue; the writer sends whatever waits as one batch,
so a hundred tasks' heartbeats cost one message, and a lone Complete goes at once.

Each item stays here until its reply comes. When the stream breaks (the endpoint
restarted, a replica died, the connection was reset) a new one is opened, with
backoff, until ``connect_timeout`` has passed without a reply, and every item still
without a reply is sent again, in its original order and with its original id: log
chunks carry their offset and Complete its id, so the endpoint stores neither twice.
Only an Exchange is never resent (its ticket is single-use): one in flight when the
stream broke fails as unreachable. An item answered UNAVAILABLE (the control plane's
database is down) is sent again after a backoff, within the same time limit.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from leoflow.agent.client import CHANNEL_OPTIONS, Refused, Unreachable
from leoflow.protocol.agent_v1 import AGENT_ID_METADATA, method_path, pb

# A batch's size, roughly: under the endpoint's message limit (1 MiB at the least)
# with 256 KiB log chunks.
_BATCH_BYTES = 512 * 1024
_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 2.0
_CODES = {code.value[0]: code for code in grpc.StatusCode}


@dataclass(eq=False)
class _Item:
    item: Any
    kind: str
    future: asyncio.Future[Any]
    resend: bool
    size: int
    written: bool = False
    resent: bool = False
    retry_at: float | None = None
    backoff: float = _FIRST_BACKOFF
    first_sent: float = field(default_factory=time.monotonic)


class Channel:
    def __init__(self, target: str, *, connect_timeout: float, credentials: Any = None) -> None:
        """``credentials`` (from ``channel_credentials``): TLS; None: plaintext."""
        self.target = target
        self.connect_timeout = connect_timeout
        if credentials is not None:
            self._grpc = grpc.aio.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
        else:
            self._grpc = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._open = self._grpc.stream_stream(
            method_path("Channel"),
            request_serializer=_serialize,
            response_deserializer=pb.ReplyBatch.FromString,
            _registered_method=True,
        )
        self._metadata = ((AGENT_ID_METADATA, secrets.token_hex(16)),)
        self._ids = itertools.count(1)
        self._unacked: dict[int, _Item] = {}  # in id order
        self._queue: list[_Item] = []
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._closed = False
        self._abandoned: Unreachable | None = None
        self.streams_opened = 0

    # -- sending -------------------------------------------------------------------------

    def submit(
        self, kind: str, message: Any, token: str | None, *, resend: bool = True
    ) -> asyncio.Future[Any]:
        """Queue one item; the future gets its reply's body, or Refused/Unreachable."""
        if self._closed:
            raise RuntimeError("the agent's channel is closed")
        if self._abandoned is not None:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_exception(self._abandoned)
            return future
        item = pb.AgentItem(id=next(self._ids), session_token=token or "")
        getattr(item, kind).CopyFrom(message)
        size = 64 + len(item.session_token) + (len(message.data) if kind == "log" else 0)
        entry = _Item(item, kind, asyncio.get_running_loop().create_future(), resend, size)
        self._unacked[item.id] = entry
        self._queue.append(entry)
        self._wake.set()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return entry.future

    async def call(self, kind: str, message: Any, token: str | None, *, resend: bool = True) -> Any:
        return await self.submit(kind, message, token, resend=resend)

    def connect_ahead(self) -> None:
        """Open the connection now (in gRPC's background, without a stream), so the
        first item's stream does not wait for it; a failure here costs nothing, the
        first item's stream dials again."""
        if not self._closed and self._abandoned is None:
            self._grpc.get_state(try_to_connect=True)

    def abandon(self, why: str) -> None:
        """Nobody is left to answer (Lite, whose endpoint this is, died): fail what
        waits and whatever is sent from now on at once, instead of dialing a dead
        address for ``connect_timeout``."""
        self._abandoned = Unreachable(why)
        if self._runner is not None:
            self._runner.cancel()
        self._fail_all(self._abandoned)

    async def close(self) -> None:
        self._closed = True
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        self._fail_all(Unreachable("the agent is stopping"))
        await self._grpc.close()

    # -- the stream ------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = _FIRST_BACKOFF
        broken_since: float | None = None
        last_error = ""
        attempts = 0
        while self._unacked:
            if broken_since is not None:
                elapsed = time.monotonic() - broken_since
                if elapsed + backoff > self.connect_timeout:
                    self._fail_all(
                        Unreachable(
                            f"could not reach the control plane at {self.target}: "
                            f"{attempts} attempt{'s' if attempts != 1 else ''} over "
                            f"{elapsed:.1f}s (LEOFLOW_AGENT_CONNECT_TIMEOUT="
                            f"{self.connect_timeout:g}s); last error: {last_error}"
                        )
                    )
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            call = self._open(metadata=self._metadata)
            self.streams_opened += 1
            attempts += 1
            # The endpoint answers a new stream with its headers at once: until they
            # come, nothing written could have reached it, so nothing is in doubt.
            await call.initial_metadata()
            writer = None
            try:
                if not call.done():
                    self._requeue_for_new_stream()
                    writer = asyncio.create_task(self._write(call))
                async for batch in call:
                    broken_since, backoff, attempts = None, _FIRST_BACKOFF, 0
                    self._deliver(batch.replies)
                code, last_error = await call.code(), await call.details()
            except grpc.aio.AioRpcError as exc:
                code, last_error = exc.code(), exc.details() or ""
            finally:
                if writer is not None:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)
            if code not in _TRANSIENT:
                self._fail_all(Refused("Channel", code, last_error or "the stream was refused"))
                return
            if broken_since is None:
                broken_since = time.monotonic()

    def _requeue_for_new_stream(self) -> None:
        queue = []
        for entry in list(self._unacked.values()):
            if entry.written and not entry.resend:
                self._settle(entry, Unreachable("the connection broke while it was in flight"))
            elif entry.retry_at is None:
                entry.resent = entry.resent or entry.written
                queue.append(entry)
        self._queue = queue
        self._wake.set()

    async def _write(self, call: Any) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            taken, size = 0, 0
            for entry in self._queue:
                if taken and size + entry.size > _BATCH_BYTES:
                    break
                taken += 1
                size += entry.size
            batch, self._queue = self._queue[:taken], self._queue[taken:]
            for entry in batch:
                entry.written = True
            await call.write(pb.AgentBatch(items=[entry.item for entry in batch]))

    def _deliver(self, replies: Any) -> None:
        for reply in replies:
            entry = self._unacked.get(reply.id)
            if entry is None:
                continue
            code = _CODES.get(reply.code, grpc.StatusCode.UNKNOWN)
            if code is grpc.StatusCode.OK:
                self._settle(entry, getattr(reply, entry.kind))
            elif code is grpc.StatusCode.UNAVAILABLE and self._retry_later(entry):
                continue
            else:
                self._settle(entry, Refused(entry.kind, code, reply.details, resent=entry.resent))

    def _retry_later(self, entry: _Item) -> bool:
        if time.monotonic() - entry.first_sent + entry.backoff > self.connect_timeout:
            return False
        entry.retry_at = time.monotonic() + entry.backoff
        asyncio.get_running_loop().call_later(entry.backoff, self._retry_now, entry)
        entry.backoff = min(entry.backoff * 2, _MAX_BACKOFF)
        return True

    def _retry_now(self, entry: _Item) -> None:
        entry.retry_at = None
        if entry.item.id in self._unacked and not self._closed:
            self._queue.append(entry)
            self._wake.set()

    def _settle(self, entry: _Item, result: Any) -> None:
        self._unacked.pop(entry.item.id, None)
        if entry.future.done():  # its caller stopped waiting
            return
        if isinstance(result, Exception):
            entry.future.set_exception(result)
        else:
            entry.future.set_result(result)

    def _fail_all(self, error: Exception) -> None:
        for entry in list(self._unacked.values()):
            self._settle(entry, error)
        self._queue = []


# OK: the endpoint ended the stream (it is stopping); the others: the connection.
_TRANSIENT = {
    grpc.StatusCode.OK,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()  # type: ignore[no-any-return]
