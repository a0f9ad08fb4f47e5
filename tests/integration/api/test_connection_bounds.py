"""What a connection may hold, over real sockets against the server in its own process
(its descriptors counted in /proc): floods of clients that drip a head and never end
it stay within the configured bounds — in all and per peer — while a normal request
still gets its answer; a head or a body that stalls is cut off with a 408."""

from __future__ import annotations

from pathlib import Path

from tests.support.flood import Served, ask, drip, served
from tests.support.waiting import until

GET = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
SLACK = 4  # a normal request's own connection, a descriptor the loop opens meanwhile


async def _bounded(server: Served, limit: int, what: str) -> None:
    async def within() -> bool:
        return server.descriptors() <= limit

    await until(within, f"{what}: at most {limit} descriptors (now {server.descriptors()})")


async def test_a_flood_of_dripping_clients_is_bounded_and_a_request_still_answers(
    tmp_path: Path,
) -> None:
    async with served(
        tmp_path,
        health_max=16,
        LEOFLOW_API_MAX_CONNECTIONS="60",
        LEOFLOW_API_MAX_CONNECTIONS_PER_PEER="40",
        LEOFLOW_API_HEAD_TIMEOUT="600",  # only the connection bounds act here
    ) as server:
        assert (await ask(server.api_port, GET)).startswith(b"HTTP/1.1 200")
        base = server.descriptors()
        flood = await drip(server.api_port, 150)
        # From the same peer, mid-flood: it takes a stalled connection's place.
        assert (await ask(server.api_port, GET)).startswith(b"HTTP/1.1 200")
        flood += await drip(server.api_port, 150)
        assert (await ask(server.api_port, GET)).startswith(b"HTTP/1.1 200")
        await _bounded(server, base + 40 + SLACK, "one peer's flood")
        # Another peer gets its own share, up to the total bound.
        flood += await drip(server.api_port, 100, source="127.0.0.2")
        assert (await ask(server.api_port, GET, source="127.0.0.3")).startswith(b"HTTP/1.1 200")
        await _bounded(server, base + 60 + SLACK, "two peers' floods")

        for writer in flood:
            writer.close()
        await _bounded(server, base + SLACK, "the flood gone")
        assert (await ask(server.api_port, GET)).startswith(b"HTTP/1.1 200")


async def test_a_stalled_head_or_body_is_cut_off_with_408(tmp_path: Path) -> None:
    async with served(
        tmp_path, health_max=16, LEOFLOW_API_HEAD_TIMEOUT="0.5", LEOFLOW_API_BODY_TIMEOUT="0.5"
    ) as server:
        port = server.api_port
        post = (
            b"POST /api/v1/pools HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        )
        for stalled in (
            b"",  # connected, silent
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Drip: 1",
            post + b"Content-Length: 100\r\n\r\n" + b'{"name": "x',  # 10 of 100 bytes
            post + b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"na',
        ):
            answer = await ask(port, stalled)
            assert answer.startswith(b"HTTP/1.1 408"), (stalled, answer)
            assert b"LEOFLOW_API_" in answer
        # A kept-alive connection whose next head stalls: the first answer, then 408.
        keep = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\nGET /healthz HTTP/1.1\r\n"
        answer = await ask(port, keep)
        assert answer.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 408" in answer, answer
        # A body that arrives in time is not cut: the pool is made.
        body = b'{"name": "quick", "slots": 2}'
        made = await ask(
            port, post + b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert made.startswith(b"HTTP/1.1 201"), made


async def test_a_flood_of_the_probe_server_is_bounded_and_probes_still_answer(
    tmp_path: Path,
) -> None:
    """The scheduler's /healthz server: kubelet's probe gets through a flood."""
    async with served(tmp_path, health_max=16) as server:
        base = server.descriptors()
        flood = await drip(server.health_port, 200)
        answer = await ask(server.health_port, GET)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        # At once, not once the head's 5 s bound has closed the flood: every dripper was
        # admitted (or made way) before the probe, whose answer came later.
        assert server.descriptors() <= base + 16 + SLACK
        for writer in flood:
            writer.close()
        await _bounded(server, base + SLACK, "the flood gone")
