"""The API over a real socket: Lite in-process (auth policy, notify, token file
reload), the ``leoflow api`` process (refusals, schema check, SIGTERM), and a log
followed while the task still runs."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api import owner_token
from leoflow.api.app import create_app
from leoflow.api.auth import hash_token
from leoflow.api.server import (
    ApiConfigError,
    RunningApi,
    serve_api,
    start_api_in_process,
    start_server,
)
from leoflow.domain.states import TaskState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings, put_dag
from tests.integration.api.seed import move, seed
from tests.support.net import free_port


def tokens_file(path: Path, **tokens: tuple[str, str]) -> Path:
    lines = ["tokens:"]
    for name, (role, token) in tokens.items():
        lines.append(f"  - {{name: {name}, role: {role}, sha256: {hash_token(token)}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


async def start_lite(settings: object, store: Store, **kw: object) -> tuple[str, object, list[str]]:
    said: list[str] = []
    closer = await start_api_in_process(settings, store, said.append, **kw)  # type: ignore[arg-type]
    match = re.search(r"(http://[^/ ]+)/api/v1", said[0])
    assert match, said
    return match.group(1), closer, said


async def test_lite_without_tokens_needs_the_owner_token_it_keeps_in_an_owner_only_file(
    store: Store, tmp_path: Path
) -> None:
    await put_dag(store)
    woken: list[int] = []
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0")
    url, closer, said = await start_lite(settings, store, notify=lambda: woken.append(1))
    path = owner_token.token_path(settings.home)
    try:
        assert "owner token" in said[0] and str(path) in said[1]
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
        token = owner_token.token_for(settings.home, url)
        assert token is not None
        # Another port, or a name that is not loopback, never gets it.
        assert owner_token.token_for(settings.home, "http://127.0.0.1:1") is None
        assert owner_token.token_for(settings.home, "http://example.com" + url[-6:]) is None
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/api/v1/dags")).status_code == 401
            assert (await client.post("/api/v1/dags/etl/runs", json={})).status_code == 401
            owner = {"Authorization": f"Bearer {token}"}
            listed = await client.get("/api/v1/dags", headers=owner)
            assert listed.json()["dags"][0]["dag_id"] == "etl"
            made = await client.post("/api/v1/dags/etl/runs", json={"run_id": "x"}, headers=owner)
            assert made.status_code == 201 and woken == [1]
            # The printed one-time link logs a browser in, once.
            match = re.search(r"(/login/once\?code=\S+)", said[1])
            assert match, said
            first = await client.get(match.group(1))
            assert first.status_code == 303 and "leoflow_session" in first.cookies
            assert (await client.get("/")).status_code == 200  # the session cookie
            client.cookies.clear()
            assert (await client.get(match.group(1))).status_code == 401
            assert (await client.get("/", follow_redirects=False)).status_code == 303
    finally:
        await closer()  # type: ignore[operator]
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(base_url=url) as client:
            await client.get("/healthz")
    # The next start keeps the token (a logged-in browser and the CLI stay in).
    url, closer, _ = await start_lite(settings, store)
    try:
        assert owner_token.token_for(settings.home, url) == token
        async with httpx.AsyncClient(base_url=url) as client:
            owner = {"Authorization": f"Bearer {token}"}
            assert (await client.get("/api/v1/dags", headers=owner)).status_code == 200
    finally:
        await closer()  # type: ignore[operator]


async def test_an_open_api_on_loopback_is_an_opt_in_that_warns(
    store: Store, tmp_path: Path
) -> None:
    await put_dag(store)
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0", api_open_on_loopback=True)
    url, closer, said = await start_lite(settings, store)
    try:
        assert "no auth" in said[0]
        assert any("WARNING" in line and "every user of this host" in line for line in said)
        assert not owner_token.token_path(settings.home).exists()
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/api/v1/dags")).status_code == 200
    finally:
        await closer()  # type: ignore[operator]


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "192.0.2.10:8080", ":8080"])
async def test_lite_refuses_a_non_loopback_address_without_tokens(
    store: Store, tmp_path: Path, listen: str
) -> None:
    settings = make_settings(tmp_path, api_listen=listen)
    with pytest.raises(ApiConfigError, match="LEOFLOW_API_TOKENS_FILE") as info:
        await start_api_in_process(settings, store, print)
    assert "LEOFLOW_API_LISTEN" in str(info.value)


async def test_lite_with_a_tokens_file_needs_tokens_and_reloads_it(
    store: Store, tmp_path: Path
) -> None:
    path = tokens_file(tmp_path / "tokens.yaml", ci=("viewer", "first-token"))
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0", api_tokens_file=path)
    url, closer, said = await start_lite(settings, store)
    try:
        assert "bearer tokens" in said[0]
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/api/v1/runs")).status_code == 401
            ok = await client.get("/api/v1/runs", headers={"Authorization": "Bearer first-token"})
            assert ok.status_code == 200
            tokens_file(path, ci=("viewer", "second-token-longer"))
            old = await client.get("/api/v1/runs", headers={"Authorization": "Bearer first-token"})
            assert old.status_code == 401
            new = {"Authorization": "Bearer second-token-longer"}
            assert (await client.get("/api/v1/runs", headers=new)).status_code == 200
            path.write_text("tokens: [{name: x, role: superuser, sha256: 00}]\n")
            # A broken file keeps the last good tokens.
            assert (await client.get("/api/v1/runs", headers=new)).status_code == 200
    finally:
        await closer()  # type: ignore[operator]


async def test_a_malformed_tokens_file_is_an_error_naming_it(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens: [{name: ci, role: root, sha256: abc}]\n")
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0", api_tokens_file=path)
    with pytest.raises(ApiConfigError, match="LEOFLOW_API_TOKENS_FILE") as info:
        await start_api_in_process(settings, store, print)
    assert str(path) in str(info.value) and "tokens.0.role" in str(info.value)


def test_leoflow_api_refuses_to_start_without_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_api(make_settings(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "LEOFLOW_API_TOKENS_FILE" in err and "sha256sum" in err


async def _api_process(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from leoflow.api.server import serve_api; from leoflow.settings import load_settings;"
        "raise SystemExit(serve_api(load_settings()))",
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_leoflow_api_process_checks_the_schema_serves_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {
        "LEOFLOW_HOME": str(tmp_path),
        "LEOFLOW_API_LISTEN": f"127.0.0.1:{port}",
        "LEOFLOW_API_TOKENS_FILE": str(tokens_file(tmp_path / "t.yaml", ci=("viewer", "tok"))),
    }
    proc = await _api_process(env)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert b"leoflow db upgrade" in err

    store = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    await put_dag(store)
    await store.close()
    proc = await _api_process(env)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(300):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.ConnectError:
                    pass
                await asyncio.sleep(0.05)
            response = await client.get("/api/v1/dags", headers={"Authorization": "Bearer tok"})
            assert response.json()["dags"][0]["dag_id"] == "etl"
            assert (await client.get("/api/v1/dags")).status_code == 401
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, err
        assert b"stopping" in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.fixture
async def live(store: Store, tmp_path: Path) -> AsyncIterator[RunningApi]:
    app = create_app(store, make_settings(tmp_path), auth=make_auth(), log_poll_interval=0.05)
    running = await start_server(app, "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


async def test_follow_streams_bytes_before_the_try_ends(live: RunningApi, store: Store) -> None:
    await seed(store)
    q = await store.find_run("etl", "q")
    assert q is not None
    ti = next(t for t in await store.list_task_instances(run_pk=q.pk) if t.task_id == "extract")
    await move(store, ti.pk, TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
    await store.append_log(ti.pk, 1, b"first\n")
    received = b""
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=10) as client,
        client.stream(
            "GET",
            "/api/v1/dags/etl/runs/q/tasks/extract/logs/1",
            params={"follow": "true"},
            headers=auth_header("operator"),
        ) as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_bytes()
        received += await asyncio.wait_for(chunks.__anext__(), 5)
        assert received == b"first\n"  # while the task still runs
        await store.append_log(ti.pk, 1, b"second\n")
        await move(store, ti.pk, TaskState.SUCCESS)
        async for chunk in chunks:
            received += chunk
    assert received == b"first\nsecond\n"
