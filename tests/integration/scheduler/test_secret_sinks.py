"""A task's secrets, printed in every common encoding, through every sink a task writes
to — stdout, stderr, ``$LEOFLOW_OUTPUT``, the exit-reason file, and the mapped items
made from the output — never reach the store, nor what a viewer reads in the API and
the UI: Lite's real scheduler, gRPC endpoint and pool agent, real commands."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import random
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import httpx

from leoflow.api.app import create_app
from leoflow.domain.states import RunState
from tests.integration.api.conftest import TOKENS, make_auth
from tests.integration.scheduler.test_task_isolation import runtime

__all__ = ["runtime"]  # the fixture: Lite's runtime on a private home

PY = json.dumps(sys.executable)
BASE = "http://localhost"
# A quote and a backslash (escaped by json.dumps), a slash and a plus (by URL
# encodings), a space, and non-ASCII (\u00e9 with json.dumps' default ensure_ascii).
API_KEY = 'Tr0ub4dor"&\\3/\u00e9+x y'
_rng = random.Random(34)
PEM = (
    "-----BEGIN TEST PRIVATE KEY-----\n"
    + "\n".join(base64.b64encode(_rng.randbytes(48)).decode() for _ in range(30))
    + "\n-----END TEST PRIVATE KEY-----\n"
)

PRINT = r"""
import base64, json, os, sys, urllib.parse
def forms(v):
    b = v.encode()
    return [v, json.dumps(v), json.dumps(v, ensure_ascii=False), repr(v), json.dumps([v]),
            json.dumps(json.dumps(v)), urllib.parse.quote(v, safe=''), urllib.parse.quote(v),
            urllib.parse.quote_plus(v), base64.b64encode(b).decode(),
            base64.urlsafe_b64encode(b).decode(), base64.b64encode(b'x' + b + b'yz').decode(),
            base64.b64encode(b'xy' + b + b'z').decode(), b.hex(), b.hex().upper()]
key, pem = os.environ['LEOFLOW_SECRET_API_KEY'], os.environ['LEOFLOW_SECRET_TLS_KEY']
for form in forms(key) + forms(pem):
    print('out', form, flush=True)
    print('err', form, file=sys.stderr, flush=True)
for line in pem.splitlines():
    print('INFO log:', line, flush=True)  # a logger's prefix on every line
print(' '.join(pem.split()), flush=True)  # folded onto one line
for cut in range(1, len(key)):  # split across two lines, printed apart
    print(key[:cut], flush=True); print(key[cut:], flush=True)
for cut in range(1, len(key)):  # cut across two writes at every place
    sys.stdout.write('cut ' + key[:cut]); sys.stdout.flush(); sys.stdout.write(key[cut:] + '\n')
"""
WRITE = (
    "out = [key, {'k': key, key: [1, pem]}, base64.b64encode(key.encode()).decode(), pem]\n"
    "json.dump(out, open(os.environ['LEOFLOW_OUTPUT'], 'w'))\n"
)
FAIL = (
    "open(os.environ['LEOFLOW_EXIT_REASON_FILE'], 'w').write("
    "'bad key ' + json.dumps(key) + ' ' + key + ' ' + pem)\n"
    "sys.exit(1)\n"
)
ITEM = (
    "import os; item = os.environ['LEOFLOW_MAP_ITEM']; print(item); "
    "open(os.environ['LEOFLOW_OUTPUT'], 'w').write(item)"
)

DAG = f"""
dag_id: sinks
tasks:
  leak:
    secrets: [api_key, tls_key]
    command: [{PY}, "-c", {json.dumps(PRINT + WRITE)}]
  fails:
    secrets: [api_key, tls_key]
    retries: 0
    command: [{PY}, "-c", {json.dumps(PRINT + FAIL)}]
  each:
    depends_on: [leak]
    map_over: {{output: leak}}
    command: [{PY}, "-c", {json.dumps(ITEM)}]
  after:
    depends_on: [each]
    command: 'echo "$LEOFLOW_INPUT_EACH"'
"""


def _clear_forms() -> list[bytes]:
    """What would give a secret away, written out here on purpose (not the masker's)."""
    values = [API_KEY, *PEM.splitlines()]
    forms: list[bytes] = []
    for v in values:
        raw = v.encode()
        forms += [
            raw,
            json.dumps(v)[1:-1].encode(),
            json.dumps(json.dumps(v))[3:-3].encode(),
            urllib.parse.quote(v, safe="").encode(),
            urllib.parse.quote_plus(v).encode(),
            base64.b64encode(raw).rstrip(b"="),
            base64.urlsafe_b64encode(raw).rstrip(b"="),
            base64.b64encode(b"x" + raw + b"yz"),
            base64.b64encode(b"xy" + raw + b"z"),
            raw.hex().encode(),
        ]
    halves = [f"{API_KEY[:cut]}\n{API_KEY[cut:]}".encode() for cut in range(1, len(API_KEY))]
    return [*forms, *halves, API_KEY[:12].encode()]  # nor a part of one cut short


def _leaks(where: str, data: bytes) -> list[str]:
    return [f"{where}: {form!r}" for form in _clear_forms() if form in data]


async def test_no_sink_shows_a_secret_in_any_encoding(runtime: Any, tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api_key").write_text(API_KEY)
    (tmp_path / "secrets" / "tls_key").write_text(PEM)
    rt = await runtime(DAG)
    row = await rt.scheduler.trigger("sinks")
    final = await rt.scheduler.wait_run(row.pk)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    assert final.state is RunState.FAILED  # "fails" failed; the rest succeeded
    assert {t: ti.state.value for t, ti in tis.items()} == {
        "leak": "success",
        "fails": "failed",
        "each[0]": "success",
        "each[1]": "success",
        "each[2]": "success",
        "each[3]": "success",
        "after": "success",
    }
    leaks: list[str] = []
    logs = {t: await rt.store.read_log(ti.pk, 1) for t, ti in tis.items()}
    for task, log in logs.items():
        leaks += _leaks(f"log of {task}", log)
    # What the agent made of each sink, kept: the log says *** where a value was...
    assert b"out ***\n" in logs["leak"] and b"err ***\n" in logs["leak"]
    assert b"INFO log: ***\n" in logs["leak"] and b"cut ***\n" in logs["leak"]
    # ...the message keeps the words around the values, the output stays JSON.
    assert (tis["fails"].message or "").startswith("bad key ")
    assert json.loads(tis["each[0]"].output or "") == "***"
    api = create_app(rt.store, rt.settings, auth=make_auth())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url=BASE) as c:
        seen = await _everything_a_viewer_sees(c, final.run_id, list(tis))
    for where, body in seen.items():
        leaks += _leaks(where, body)
    leaks += await asyncio.to_thread(_leaks_on_disk, tmp_path)
    assert leaks == []


def _leaks_on_disk(home: Path) -> list[str]:
    """The database, its journal, whatever else the home holds (its secrets aside)."""
    leaks = []
    for path in home.rglob("*"):
        if path.is_file() and "secrets" not in path.parts:
            leaks += _leaks(str(path.relative_to(home)), path.read_bytes())
    return leaks


async def _everything_a_viewer_sees(
    c: httpx.AsyncClient, run_id: str, tasks: list[str]
) -> dict[str, bytes]:
    run = f"/api/v1/dags/sinks/runs/{run_id}"
    urls = [("viewer", "/api/v1/runs"), ("viewer", run), ("viewer", f"{run}/tasks")]
    for task in tasks:
        urls += [("viewer", f"{run}/tasks/{task}"), ("viewer", f"{run}/tasks/{task}/tries")]
        urls.append(("operator", f"{run}/tasks/{task}/logs/1"))  # logs need an operator
    seen: dict[str, bytes] = {}
    for role, url in urls:
        r = await c.get(url, headers={"Authorization": f"Bearer {TOKENS[role]}"})
        assert r.status_code == 200, (url, r.text)
        seen[url] = r.content
    login = await c.post("/ui/login", json={"token": TOKENS["viewer"]}, headers={"Origin": BASE})
    assert login.status_code == 200, login.text
    pages = [f"/dags/sinks/runs/{run_id}"] + [f"/dags/sinks/runs/{run_id}/tasks/{t}" for t in tasks]
    for url in pages:
        r = await c.get(url)
        assert r.status_code == 200, (url, r.text)
        seen[url] = r.content + html.unescape(r.text).encode()  # as a browser shows it
    return seen
