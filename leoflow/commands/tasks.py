"""``leoflow tasks DAG RUN`` (a run's task instances), ``tasks show DAG RUN TASK`` (one,
with its output) and ``tasks why DAG RUN TASK``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leoflow.commands import http
from leoflow.commands.common import EXIT_OK, EXIT_USAGE
from leoflow.commands.http import ENDED_AND_MESSAGE, api_command, print_json, url, when
from leoflow.commands.tables import table_of
from leoflow.domain.printable import printable

USAGE = "DAG RUN | show DAG RUN TASK | why DAG RUN TASK"
TASK_COLUMNS = (
    ("TASK", "task_id"),
    ("STATE", "state"),
    ("TRY", lambda t: f"{t['try_number']}/{t['max_tries']}"),
    ("POOL", "pool"),
    ("STARTED", when("started_at")),
    *ENDED_AND_MESSAGE,
)


@api_command
def cmd_tasks(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words[:1] == ["why"] and len(words) == 4:
        return _why(args, *words[1:])
    if words[:1] == ["show"] and len(words) == 4:
        return _show(args, *words[1:])
    if len(words) != 2:
        print(f"usage: leoflow tasks {USAGE}", file=sys.stderr)
        return EXIT_USAGE
    dag_id, run_id = words
    items: list[dict[str, Any]] = []
    with http.client(args) as session:
        params: dict[str, Any] = {"limit": 1000}
        while True:
            page = http.call(
                session,
                "GET",
                f"/api/v1/dags/{url(dag_id)}/runs/{url(run_id)}/tasks",
                params=params,
            ).json()
            items += page["task_instances"]
            if page["next_cursor"] is None:
                break
            params["after"] = page["next_cursor"]
    if args.json:
        print_json(items)
    else:
        print(table_of(items, TASK_COLUMNS))
    return EXIT_OK


def _task(args: argparse.Namespace, dag_id: str, run_id: str, task_id: str, tail: str = "") -> Any:
    path = f"/api/v1/dags/{url(dag_id)}/runs/{url(run_id)}/tasks/{url(task_id)}{tail}"
    data = http.get_json(args, path)
    if args.json:
        print_json(data)
        return None
    return data


def _show(args: argparse.Namespace, dag_id: str, run_id: str, task_id: str) -> int:
    data = _task(args, dag_id, run_id, task_id)
    if data is None:
        return EXIT_OK
    for title, key in (("task", "task_id"), ("state", "state"), ("message", "message")):
        print(printable(f"{title}: {data.get(key) or '-'}"))
    print(f"try: {data['try_number']}/{data['max_tries']}")
    if data["try_number"] > 0:
        _print_pod(args, dag_id, run_id, task_id)
    output = data.get("output")
    print("output: -" if output is None else "output:")
    if output is not None:
        print(printable(json.dumps(output, indent=2, ensure_ascii=False), lines=True))
    return EXIT_OK


def _print_pod(args: argparse.Namespace, dag_id: str, run_id: str, task_id: str) -> None:
    """Where the latest try ran, when it ran in a pod: which, and whether a warm one."""
    path = f"/api/v1/dags/{url(dag_id)}/runs/{url(run_id)}/tasks/{url(task_id)}/tries"
    try:
        tries = http.get_json(args, path).get("tries") or []
    except http.ApiError:  # an API of an older release: no tries route
        return
    latest = tries[-1] if tries else {}
    if latest.get("pod"):
        kind = (
            f"warm pod, its task {latest.get('pod_task')}"
            if latest.get("pod_kind") == "warm"
            else "a pod of its own"
        )
        print(printable(f"pod: {latest['pod']} ({kind})"))


def _why(args: argparse.Namespace, dag_id: str, run_id: str, task_id: str) -> int:
    data = _task(args, dag_id, run_id, task_id, "/why")
    if data is None:
        return EXIT_OK
    print(printable(f"{task_id} ({data['state']}): {data['message']}"))
    for other in data["also"]:
        print(printable(f"  also: {other['message']}"))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = http.api_parser(
        sub,
        "tasks",
        "a run's task instances; 'tasks show DAG RUN TASK' shows one with its output; "
        "'tasks why DAG RUN TASK' says why one waits",
        cmd_tasks,
        local=True,
    )
    p.add_argument("words", nargs="+", metavar=USAGE)
