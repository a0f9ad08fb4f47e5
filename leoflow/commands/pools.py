"""``leoflow pools [list | set NAME SLOTS | delete NAME]`` over the API."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from leoflow.commands.common import EXIT_OK, EXIT_USAGE
from leoflow.commands.http import api_command, api_parser, call, client, print_json, url
from leoflow.commands.tables import table_of
from leoflow.domain.words import plural

if TYPE_CHECKING:
    import httpx

POOL_COLUMNS = (
    ("POOL", "name"),
    ("SLOTS", "slots"),
    ("OCCUPIED", "occupied"),
    ("QUEUED", "queued"),
    ("RUNNING", "running"),
    ("FROM", "source"),
    ("DESCRIPTION", "description"),
)


@api_command
def cmd_pools(args: argparse.Namespace) -> int:
    words = list(args.words) or ["list"]
    action = words[0]
    with client(args) as session:
        if action == "list" and len(words) == 1:
            data = call(session, "GET", "/api/v1/pools").json()
            if args.json:
                print_json(data)
            else:
                print(table_of(data["pools"], POOL_COLUMNS))
            return EXIT_OK
        if action == "set" and len(words) == 3 and words[2].isdigit():
            return _set(session, args, words[1], int(words[2]))
        if action == "delete" and len(words) == 2:
            call(session, "DELETE", f"/api/v1/pools/{url(words[1])}")
            if args.json:
                print_json({"deleted": words[1]})
            else:
                print(f"pool {words[1]}: deleted")
            return EXIT_OK
    print("usage: leoflow pools [list | set NAME SLOTS | delete NAME]", file=sys.stderr)
    return EXIT_USAGE


def _set(session: httpx.Client, args: argparse.Namespace, name: str, slots: int) -> int:
    body: dict[str, Any] = {"slots": slots}
    if args.description is not None:
        body["description"] = args.description
    response = call(session, "PATCH", f"/api/v1/pools/{url(name)}", ok=(200, 404), json=body)
    if response.status_code == 404:
        response = call(session, "POST", "/api/v1/pools", json={"name": name, **body})
    data = response.json()
    if args.json:
        print_json(data)
    else:
        size = plural(data["slots"], "slot")
        print(f"pool {data['name']}: {size} ({data['occupied']} occupied)")
    return EXIT_OK


HELP = "pools and their occupancy; 'set NAME SLOTS', 'delete NAME' (admin)"


def add_parser(sub: Any) -> None:
    p = api_parser(sub, "pools", HELP, cmd_pools)
    p.add_argument("words", nargs="*", metavar="list | set NAME SLOTS | delete NAME")
    p.add_argument("--description", help="with 'set': the pool's description")
