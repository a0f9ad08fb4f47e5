"""Replay every captured transcript against the fake and compare the answers.

Each ``.txt`` request is sent as captured (same namespace ``cap``, same names) to a
fresh fake after creating the preconditions the capture had; the status code must
match, and the body must match after :func:`normalise` (uids, timestamps,
resourceVersions, managedFields and numbers inside messages blanked out). Each
``.jsonl`` watch stream is reproduced by the same sequence of writes and compared
event by event. A transcript without a scenario here fails the suite.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from tests.fakekube import FakeApiServer
from tests.fakekube.transcripts import DIR, Transcript, load, load_events, normalise

from .conftest import TOKEN

PODS = "/api/v1/namespaces/cap/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/cap/leases"
T = {p.stem: load(p) for p in sorted(DIR.glob("*.txt"))}
W = {p.stem: load_events(p) for p in sorted(DIR.glob("*.jsonl"))}
CREATE_BODY: dict[str, Any] = T["01-create-pod-201"].request_body
BIND_BODY: dict[str, Any] = T["05a-bind-pod"].request_body
OOM_STATUS: dict[str, Any] = T["05b-patch-status-oomkilled"].body["status"]


class Raw:
    """A bare HTTP client: sends exactly the captured request."""

    def __init__(self, server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        self.server = server
        self.session = session

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str = TOKEN,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        data = json.dumps(body) if body is not None else None
        async with self.session.request(
            method, self.server.url + path, data=data, headers=headers
        ) as resp:
            return resp.status, json.loads(await resp.read())

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, answer = await self.call(method, path, body, **kw)
        assert 200 <= status < 300, answer
        return answer

    async def events(
        self, query: str, until: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            asyncio.timeout(10),
            self.session.get(self.server.url + PODS + "?" + query, headers=headers) as resp,
        ):
            assert resp.status == 200
            while not until(out):
                line = await resp.content.readline()
                assert line, "watch ended early"
                out.append(json.loads(line))
        return out


def pod_named(name: str) -> dict[str, Any]:
    body = copy.deepcopy(CREATE_BODY)
    body["metadata"]["name"] = name
    return body


async def running_bound_pod(raw: Raw, name: str) -> None:
    await raw.ok("POST", PODS, pod_named(name))
    bind = copy.deepcopy(BIND_BODY)
    bind["metadata"]["name"] = name
    await raw.ok("POST", f"{PODS}/{name}/binding", bind)
    await raw.ok(
        "PATCH",
        f"{PODS}/{name}/status",
        {"status": {"phase": "Running"}},
        content_type="application/merge-patch+json",
    )


async def oom_killed_pod(raw: Raw) -> None:
    await raw.ok("POST", PODS, CREATE_BODY)
    await raw.ok("POST", f"{PODS}/lf-demo-1/binding", BIND_BODY)
    await raw.ok(
        "PATCH",
        f"{PODS}/lf-demo-1/status",
        {"status": OOM_STATUS},
        content_type="application/merge-patch+json",
    )


def replay(t: Transcript) -> Callable[[Raw], Awaitable[tuple[int, Any]]]:
    """Send the transcript's own request as captured."""

    async def send(raw: Raw) -> tuple[int, Any]:
        assert t.method is not None and t.path is not None
        return await raw.call(t.method, t.path, t.request_body)

    return send


async def s01(raw: Raw) -> tuple[int, Any]:
    return await replay(T["01-create-pod-201"])(raw)


async def s02(raw: Raw) -> tuple[int, Any]:
    await raw.ok("POST", PODS, CREATE_BODY)
    return await replay(T["02-create-pod-again-409"])(raw)


async def s03(raw: Raw) -> tuple[int, Any]:
    return await replay(T["03-create-pod-psa-restricted-403"])(raw)


async def s04(raw: Raw) -> tuple[int, Any]:
    await raw.ok("POST", PODS, CREATE_BODY)
    return await replay(T["04-list-pods-labelselector"])(raw)


async def s05a(raw: Raw) -> tuple[int, Any]:
    await raw.ok("POST", PODS, CREATE_BODY)
    return await replay(T["05a-bind-pod"])(raw)


async def s05b(raw: Raw) -> tuple[int, Any]:
    # The capture has no request line: it is the kubelet-style status write of 05b.
    await raw.ok("POST", PODS, CREATE_BODY)
    await raw.ok("POST", f"{PODS}/lf-demo-1/binding", BIND_BODY)
    return await raw.call(
        "PATCH",
        f"{PODS}/lf-demo-1/status",
        {"status": OOM_STATUS},
        content_type="application/merge-patch+json",
    )


async def s05c(raw: Raw) -> tuple[int, Any]:
    await oom_killed_pod(raw)
    status, body = await replay(T["05c-delete-terminal-pod"])(raw)
    assert (await raw.call("GET", f"{PODS}/lf-demo-1"))[0] == 404  # gone at once
    return status, body


async def s09(raw: Raw) -> tuple[int, Any]:
    return await replay(T["09-lease-create"])(raw)


def lease_update(t: Transcript, rv: str) -> dict[str, Any]:
    body = copy.deepcopy(t.request_body)
    body["metadata"]["resourceVersion"] = rv
    return dict(body)


async def s10(raw: Raw) -> tuple[int, Any]:
    created = await raw.ok("POST", LEASES, T["09-lease-create"].request_body)
    body = lease_update(T["10-lease-update-ok"], created["metadata"]["resourceVersion"])
    return await raw.call("PUT", f"{LEASES}/leoflow-scheduler", body)


async def s11(raw: Raw) -> tuple[int, Any]:
    created = await raw.ok("POST", LEASES, T["09-lease-create"].request_body)
    rv = created["metadata"]["resourceVersion"]
    await raw.ok("PUT", f"{LEASES}/leoflow-scheduler", lease_update(T["10-lease-update-ok"], rv))
    stale = lease_update(T["11-lease-update-stale-409"], rv)
    return await raw.call("PUT", f"{LEASES}/leoflow-scheduler", stale)


async def s12(raw: Raw) -> tuple[int, Any]:
    return await replay(T["12-get-missing-pod-404"])(raw)


async def s13(raw: Raw) -> tuple[int, Any]:
    await running_bound_pod(raw, "lf-demo-2")
    return await replay(T["13-delete-running-bound-pod-graceful"])(raw)


async def s14(raw: Raw) -> tuple[int, Any]:
    await running_bound_pod(raw, "lf-demo-2")
    await raw.ok("DELETE", f"{PODS}/lf-demo-2")
    return await replay(T["14-get-pod-terminating"])(raw)


async def s15(raw: Raw) -> tuple[int, Any]:
    await running_bound_pod(raw, "lf-demo-2")
    await raw.ok("DELETE", f"{PODS}/lf-demo-2")
    status, body = await replay(T["15-force-delete-grace0"])(raw)
    assert (await raw.call("GET", f"{PODS}/lf-demo-2"))[0] == 404
    return status, body


async def s16(raw: Raw) -> tuple[int, Any]:
    raw.server.rbac = set()
    raw.server.user = "system:serviceaccount:cap:limited"
    return await replay(T["16-rbac-forbidden-list-nodes"])(raw)


async def s17(raw: Raw) -> tuple[int, Any]:
    t = T["17-unauthenticated-bad-token"]
    assert t.path is not None
    return await raw.call("GET", t.path, token="not-the-token")


async def s18(raw: Raw) -> tuple[int, Any]:
    t = T["18-watch-expired-rv"]
    assert t.path is not None
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with raw.session.get(raw.server.url + t.path, headers=headers) as resp:
        lines = (await resp.read()).decode().splitlines()
        assert len(lines) == 1  # one ERROR event, then the stream ends
        return resp.status, json.loads(lines[0])


SCENARIOS: dict[str, Callable[[Raw], Awaitable[tuple[int, Any]]]] = {
    "01-create-pod-201": s01,
    "02-create-pod-again-409": s02,
    "03-create-pod-psa-restricted-403": s03,
    "04-list-pods-labelselector": s04,
    "05a-bind-pod": s05a,
    "05b-patch-status-oomkilled": s05b,
    "05c-delete-terminal-pod": s05c,
    "09-lease-create": s09,
    "10-lease-update-ok": s10,
    "11-lease-update-stale-409": s11,
    "12-get-missing-pod-404": s12,
    "13-delete-running-bound-pod-graceful": s13,
    "14-get-pod-terminating": s14,
    "15-force-delete-grace0": s15,
    "16-rbac-forbidden-list-nodes": s16,
    "17-unauthenticated-bad-token": s17,
    "18-watch-expired-rv": s18,
}


@pytest.fixture
async def raw() -> AsyncIterator[Raw]:
    async with (
        FakeApiServer(token=TOKEN, restricted_namespaces=["cap"], bookmark_interval=0.1) as srv,
        aiohttp.ClientSession() as session,
    ):
        yield Raw(srv, session)


def assert_same_shape(ours: Any, theirs: Any) -> None:
    """Same keys in the same order at the top and in metadata; equal modulo volatiles."""
    assert list(ours) == list(theirs)
    if "metadata" in theirs:
        assert list(ours["metadata"]) == list(theirs["metadata"])
    if theirs.get("kind") == "Status":
        assert list(ours.get("details", {})) == list(theirs.get("details", {}))
    assert normalise(ours) == normalise(theirs)


def test_every_transcript_has_a_scenario() -> None:
    files = {p.stem for p in DIR.iterdir() if p.suffix in (".txt", ".jsonl")}
    assert files == set(SCENARIOS) | set(W) and set(W) == set(WATCH_SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_replay_transcript(raw: Raw, name: str) -> None:
    t = T[name]
    status, body = await SCENARIOS[name](raw)
    assert status == t.status
    if t.body.get("kind") == "PodList":
        assert list(body) == list(t.body) and list(body["metadata"]) == ["resourceVersion"]
        assert [list(i) for i in body["items"]] == [list(i) for i in t.body["items"]]
        assert normalise(body["items"]) == normalise(t.body["items"])
    else:
        assert_same_shape(body, t.body)


# ---- watch streams ---------------------------------------------------------------------


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def ends_with_bookmark_after(n: int) -> Callable[[list[dict[str, Any]]], bool]:
    def done(events: list[dict[str, Any]]) -> bool:
        real = [e for e in events if e["type"] != "BOOKMARK"]
        return len(real) >= n and events[-1]["type"] == "BOOKMARK"

    return done


def assert_stream_like(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    ours = [e for i, e in enumerate(ours) if e["type"] != "BOOKMARK" or i == len(ours) - 1]
    assert types(ours) == types(theirs)
    for mine, real in zip(ours, theirs, strict=True):
        assert_same_shape(mine["object"], real["object"])
    last_rv = ours[-2]["object"]["metadata"]["resourceVersion"]
    assert ours[-1]["object"]["metadata"] == {"resourceVersion": last_rv}


async def lifecycle_of_lf_demo_1(raw: Raw) -> None:
    """What the capture did between 04 and 07: bind, OOMKilled status, delete."""
    await raw.ok("POST", f"{PODS}/lf-demo-1/binding", BIND_BODY)
    await raw.ok(
        "PATCH",
        f"{PODS}/lf-demo-1/status",
        {"status": OOM_STATUS},
        content_type="application/merge-patch+json",
    )
    await raw.ok("DELETE", f"{PODS}/lf-demo-1")


async def w06(raw: Raw) -> None:
    await raw.ok("POST", PODS, CREATE_BODY)
    listed = await raw.ok("GET", PODS + "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dleoflow")
    await lifecycle_of_lf_demo_1(raw)
    rv = listed["metadata"]["resourceVersion"]
    theirs = W["06-watch-stream"]
    ours = await raw.events(
        f"watch=true&resourceVersion={rv}&allowWatchBookmarks=true",
        ends_with_bookmark_after(len(theirs) - 1),
    )
    assert_stream_like(ours, theirs)


async def w07(raw: Raw) -> None:
    await raw.ok("POST", PODS, CREATE_BODY)
    await lifecycle_of_lf_demo_1(raw)
    [event] = await raw.events(
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true",
        lambda events: len(events) == 1,
    )
    [theirs] = W["07-watchlist-initial-events"]
    assert event["type"] == theirs["type"] == "BOOKMARK"
    assert normalise(event["object"]) == normalise(theirs["object"])
    assert int(event["object"]["metadata"]["resourceVersion"]) == raw.server.store.rv


async def w08(raw: Raw) -> None:
    before = raw.server.store.rv
    await raw.ok("POST", PODS, CREATE_BODY)
    await lifecycle_of_lf_demo_1(raw)
    theirs = W["08-watch-too-old-rv"]
    ours = await raw.events(
        f"watch=true&resourceVersion={before}&allowWatchBookmarks=true",
        ends_with_bookmark_after(len(theirs) - 1),
    )
    assert_stream_like(ours, theirs)


WATCH_SCENARIOS: dict[str, Callable[[Raw], Awaitable[None]]] = {
    "06-watch-stream": w06,
    "07-watchlist-initial-events": w07,
    "08-watch-too-old-rv": w08,
}


@pytest.mark.parametrize("name", sorted(WATCH_SCENARIOS))
async def test_replay_watch_stream(raw: Raw, name: str) -> None:
    await WATCH_SCENARIOS[name](raw)
