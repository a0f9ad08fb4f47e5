"""The request guard over real sockets: Lite's open API (the opt-in) against a cross-site
form post and a rebound Host, and ``leoflow api`` (Pro) against 200 MB bodies —
refused after at most about the limit, with the server's peak memory unchanged."""

from __future__ import annotations

import asyncio
import select
import signal
import socket
import time
from pathlib import Path

import httpx

from leoflow.api import owner_token
from leoflow.store import Store
from tests.integration.api.conftest import DAG_YAML, make_settings, put_dag
from tests.integration.api.test_server import _api_process, start_lite, tokens_file
from tests.support.net import free_port

MB = 1024 * 1024
HUGE = 200 * MB
CHUNK = 64 * 1024


def send_until_answered(
    port: int, head: str, total: int = HUGE, *, chunked: bool = True
) -> tuple[int, dict[str, str], bytes, int]:
    """POST ``total`` bytes of body the way curl and browsers do: reading while sending,
    and stopping once an answer has come. (status, headers, body, bytes sent)."""
    block = b"x" * CHUNK
    frame = f"{CHUNK:x}\r\n".encode() + block + b"\r\n" if chunked else block
    sent = 0
    hung_up = False  # the server closed its end: stop writing, read what it said
    pending = b""
    got = b""
    deadline = time.monotonic() + 120
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head.encode())
        sock.setblocking(False)
        while time.monotonic() < deadline:
            want_write = sent < total and not got and not hung_up
            readable, writable, _ = select.select([sock], [sock] if want_write else [], [], 1)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    data = b""
                if not data:
                    break
                got += data
                head_end = got.find(b"\r\n\r\n")
                if head_end >= 0:
                    lines = got[:head_end].decode().split("\r\n")
                    fields = dict(line.lower().split(": ", 1) for line in lines[1:])
                    body = got[head_end + 4 :]
                    if len(body) >= int(fields.get("content-length", "0")):
                        return int(lines[0].split()[1]), fields, body, sent
            if writable:
                if not pending:
                    pending = frame
                try:
                    n = sock.send(pending)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    # Not counted as sent: the bound below is on what really left.
                    hung_up = True
                    continue
                pending = pending[n:]
                if not pending:
                    sent += CHUNK
    raise AssertionError(f"no complete answer after sending {sent} bytes; got {got[:300]!r}")


def post_head(path: str, headers: dict[str, str]) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return "\r\n".join(lines) + "\r\n\r\n"


CHUNKED = {"Transfer-Encoding": "chunked"}
YAML = {"Content-Type": "application/yaml"}


async def _snapshot(store: Store) -> tuple[list[str], int]:
    dags = [d.dag_id for d in await store.list_dags()]
    return dags, len(await store.list_runs(limit=1000))


async def test_a_cross_site_form_post_cannot_apply_or_trigger_on_lite(
    store: Store, tmp_path: Path
) -> None:
    # The open API (an opt-in): the guard alone keeps a browser's page out.
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0", api_open_on_loopback=True)
    url, closer, said = await start_lite(settings, store)
    evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    form = {"Content-Type": "text/plain"}
    try:
        assert "no auth" in said[0]
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            # What <form enctype="text/plain" method="post"> on evil.example sends.
            r = await client.post("/api/v1/dags", content=DAG_YAML, headers={**evil, **form})
            assert r.status_code == 403, r.text
            # Without the browser's Origin headers, text/plain is still no DAG.
            r = await client.post("/api/v1/dags", content=DAG_YAML, headers=form)
            assert r.status_code == 415 and "application/yaml" in r.json()["detail"]
            assert await _snapshot(store) == ([], 0)

            await put_dag(store)
            trigger = '{"run_id": "pwned"}'
            for headers in ({**evil, **form}, form, {**evil, "Content-Type": "application/json"}):
                r = await client.post("/api/v1/dags/etl/runs", content=trigger, headers=headers)
                assert r.status_code in (403, 415), (headers, r.text)
            # DNS rebinding: the page's own name in Host; nothing to read.
            port = url.rsplit(":", 1)[1]
            r = await client.get("/api/v1/dags", headers={"Host": f"evil.example:{port}"})
            assert r.status_code == 400 and "LEOFLOW_API_ALLOWED_HOSTS" in r.json()["detail"]
            assert await _snapshot(store) == (["etl"], 0)

            # The CLI's shape of the same requests works.
            r = await client.post("/api/v1/dags/etl/runs", json={"run_id": "mine"})
            assert r.status_code == 201, r.text
        assert await _snapshot(store) == (["etl"], 1)
    finally:
        await closer()  # type: ignore[operator]


async def test_lite_stops_reading_a_200_mb_body_at_the_limit(store: Store, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0")
    url, closer, _ = await start_lite(settings, store)
    port = int(url.rsplit(":", 1)[1])
    owner = {"Authorization": f"Bearer {owner_token.token_for(settings.home, url)}"}
    try:
        head = post_head("/api/v1/dags", {**YAML, **CHUNKED, **owner})
        status, fields, body, sent = await asyncio.to_thread(send_until_answered, port, head)
        assert status == 413, body
        assert b"LEOFLOW_API_DAG_BODY_LIMIT" in body
        assert fields["connection"] == "close"
        # Answered at the limit: what left the client is the limit plus what the
        # socket buffers hold (a few MB on loopback), nowhere near 200 MB.
        assert sent < 40 * MB, sent

        # A client that sends all before it reads (httpx: the CLI) and a body a little
        # over the limit still gets the answer, not a reset.
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            r = await client.post(
                "/api/v1/dags", content=b"x" * (3 * MB), headers={**YAML, **owner}
            )
        assert r.status_code == 413 and "LEOFLOW_API_DAG_BODY_LIMIT" in r.json()["detail"]
        assert await _snapshot(store) == ([], 0)
    finally:
        await closer()  # type: ignore[operator]


def _peak_rss(pid: int) -> int:
    """The process's high-water resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


async def test_leoflow_api_refuses_200_mb_bodies_without_holding_them(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "LEOFLOW_HOME": str(tmp_path),
        "LEOFLOW_API_LISTEN": f"127.0.0.1:{port}",
        "LEOFLOW_API_TOKENS_FILE": str(tokens_file(tmp_path / "t.yaml", ci=("admin", "tok"))),
        "LEOFLOW_POOLS": '{"warehouse": 2}',
    }
    store = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    await store.close()
    proc = await _api_process(env)
    admin = {"Authorization": "Bearer tok"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 120  # a loaded machine starts it slowly
            while True:
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and proc.returncode is None, "never ready"
                await asyncio.sleep(0.05)
            # Warm every code path once, so the baseline includes its imports.
            yaml = {"Content-Type": "application/yaml"}
            r = await client.post("/api/v1/dags", content=DAG_YAML, headers={**admin, **yaml})
            assert r.status_code == 201, r.text
            before = _peak_rss(proc.pid)

            # Unauthenticated: 401 from the headers alone (a JSON route: FastAPI reads
            # its body before it runs the route's auth dependency).
            head = post_head(
                "/api/v1/dags/etl/runs", {"Content-Type": "application/json", **CHUNKED}
            )
            status, _, body, sent = await asyncio.to_thread(send_until_answered, port, head)
            assert status == 401 and sent < 40 * MB, (body, sent)
            # Authenticated, chunked: 413 at the limit.
            head = post_head("/api/v1/dags", {**admin, **YAML, **CHUNKED})
            status, _, body, sent = await asyncio.to_thread(send_until_answered, port, head)
            assert status == 413 and sent < 40 * MB, (body, sent)
            # A JSON route, with a Content-Length that says 200 MB: 413 at once.
            json_head = {"Content-Type": "application/json", "Content-Length": str(HUGE)}
            head = post_head("/api/v1/dags/etl/runs", {**admin, **json_head})
            status, _, body, sent = await asyncio.to_thread(
                send_until_answered, port, head, chunked=False
            )
            assert status == 413 and b"LEOFLOW_API_BODY_LIMIT" in body, body
            assert sent < 40 * MB, sent
            # Host, Origin and Content-Type hold in Pro too, behind the tokens.
            r = await client.get("/api/v1/runs", headers={**admin, "Host": "evil.example"})
            assert r.status_code == 400
            r = await client.post(
                "/api/v1/dags/etl/runs", json={}, headers={**admin, "Origin": "http://evil.example"}
            )
            assert r.status_code == 403
            r = await client.post(
                "/api/v1/dags/etl/runs",
                content="{}",
                headers={**admin, "Content-Type": "text/plain"},
            )
            assert r.status_code == 415
            # Still serving, and nothing was stored.
            r = await client.get("/api/v1/runs", headers=admin)
            assert r.status_code == 200 and r.json()["runs"] == []
            grown = _peak_rss(proc.pid) - before
        # 600 MB went at it; the peak moved by far less than one body.
        assert grown < 32 * MB, f"peak RSS grew by {grown / MB:.1f} MB"
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
