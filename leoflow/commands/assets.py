"""``leoflow assets [list | show URI | events [URI] | emit URI | why DAG]`` over the API."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from leoflow.commands.common import EXIT_OK, EXIT_USAGE
from leoflow.commands.http import api_command, api_parser, call, client, print_json, url
from leoflow.commands.tables import table_of
from leoflow.domain.assets.waiting import age_text

USAGE = "usage: leoflow assets [list | show URI | events [URI] | emit URI | why DAG]"


def _refs(refs: list[dict[str, str]]) -> str:
    return ", ".join(f"{r['dag_id']}.{r['task_id']}" for r in refs) or "-"


def _last(item: Mapping[str, Any]) -> str:
    event = item.get("last_event")
    return "none yet" if not event else f"{age_text(time.time() - event['created_at'])} ago"


ASSET_COLUMNS = (
    ("ASSET", "uri"),
    ("PRODUCERS", lambda a: _refs(a["producers"])),
    ("CONSUMERS", lambda a: _refs(a["consumers"])),
    ("SCHEDULED", lambda a: ", ".join(a["scheduled_dags"]) or "-"),
    ("LAST EVENT", _last),
)
EVENT_COLUMNS = (
    ("ID", "id"),
    ("ASSET", "uri"),
    ("AGE", lambda e: age_text(time.time() - e["created_at"])),
    ("FROM", lambda e: f"{e['dag_id']}.{e['task_id']}" if e["dag_id"] else e["created_by"]),
    ("EXTRA", lambda e: json.dumps(e["extra"]) if e["extra"] else "-"),
)


@api_command
def cmd_assets(args: argparse.Namespace) -> int:
    words = list(args.words) or ["list"]
    action, rest = words[0], words[1:]
    with client(args) as session:
        if action == "list" and not rest:
            data = call(session, "GET", "/api/v1/assets").json()
            _out(args, data, lambda: print(table_of(data["assets"], ASSET_COLUMNS)))
            return EXIT_OK
        if action == "show" and len(rest) == 1:
            data = call(session, "GET", "/api/v1/assets/one", params={"uri": rest[0]}).json()
            _out(args, data, lambda: _show(data))
            return EXIT_OK
        if action == "events" and len(rest) <= 1:
            params: dict[str, Any] = {"limit": args.limit}
            if rest:
                params["uri"] = rest[0]
            data = call(session, "GET", "/api/v1/assets/events", params=params).json()
            _out(args, data, lambda: print(table_of(data["events"], EVENT_COLUMNS)))
            return EXIT_OK
        if action == "emit" and len(rest) == 1:
            return _emit(session, args, rest[0])
        if action == "why" and len(rest) == 1:
            data = call(session, "GET", f"/api/v1/dags/{url(rest[0])}/asset-waiting").json()
            _out(args, data, lambda: print(_why(data)))
            return EXIT_OK
    print(USAGE, file=sys.stderr)
    return EXIT_USAGE


def _out(args: argparse.Namespace, data: Any, text: Any) -> None:
    if args.json:
        print_json(data)
    else:
        text()


def _show(data: dict[str, Any]) -> None:
    print(data["uri"])
    print(f"  producers: {_refs(data['producers'])}")
    print(f"  consumers: {_refs(data['consumers'])}")
    print(f"  scheduled: {', '.join(data['scheduled_dags']) or '-'}")
    print(f"  last event: {_last(data)}")
    if data["events"]:
        print(table_of(data["events"], EVENT_COLUMNS))


def _why(data: dict[str, Any]) -> str:
    if not data["assets"]:
        return f"{data['dag_id']}: not scheduled on assets"
    if data["waiting"] is None:
        paused = " (paused: one run when unpaused)" if data.get("paused") else ""
        return f"{data['dag_id']}: its assets have new events; a run is due{paused}"
    return f"{data['dag_id']}: {data['waiting']}"


def _emit(session: Any, args: argparse.Namespace, uri: str) -> int:
    body: dict[str, Any] = {"uri": uri}
    if args.extra is not None:
        try:
            body["extra"] = json.loads(args.extra)
        except ValueError as exc:
            print(f"--extra: not JSON: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.key is not None:
        body["idempotency_key"] = args.key
    data = call(session, "POST", "/api/v1/assets/events", json=body).json()
    event = data["event"]
    _out(
        args,
        data,
        lambda: print(
            f"asset {event['uri']}: event {event['id']} "
            + ("recorded" if data["created"] else "already recorded (same idempotency key)")
        ),
    )
    return EXIT_OK


HELP = "assets, their producers, consumers and events; 'emit URI' (operator)"


def add_parser(sub: Any) -> None:
    p = api_parser(sub, "assets", HELP, cmd_assets)
    p.add_argument(
        "words", nargs="*", metavar="list | show URI | events [URI] | emit URI | why DAG"
    )
    p.add_argument("--extra", help="with 'emit': the event's metadata, a JSON object (≤ 16 KB)")
    p.add_argument("--key", help="with 'emit': an idempotency key (a resend records nothing)")
    p.add_argument("--limit", type=int, default=50, help="with 'events': how many (newest first)")
