"""``leoflow dags``: ``validate`` and ``next`` read DAG files here; ``apply``, ``list``,
``pause`` and ``unpause`` go through the API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leoflow.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    load_target,
    settings_of,
    to_stderr,
)
from leoflow.commands.http import Command, api_command, api_parser, call, client, print_json, url
from leoflow.commands.tables import table_of
from leoflow.domain.origins import ADHOC_PREFIX, is_adhoc
from leoflow.domain.printable import printable
from leoflow.domain.words import plural

if TYPE_CHECKING:
    from leoflow.domain.dag import DagSpec


def _names(text: str | None) -> set[str] | None:
    return None if text is None else {p.strip() for p in text.split(",") if p.strip()}


def cmd_validate(args: argparse.Namespace) -> int:
    from leoflow.dagfile.asset_warnings import unproduced_assets
    from leoflow.dagfile.loader import LoadOptions, load_dag_folder
    from leoflow.dbt.project import expander

    # The pools a run would find: the settings', those named here (made through the
    # API, say), and each file's own declarations (the loader adds those).
    known_pools = {*settings_of(args).pools, *(_names(args.pools) or ())}
    options = LoadOptions(
        known_pools=known_pools,
        passthrough=_names(args.passthrough),
        dbt=expander(progress=to_stderr),
    )
    result = load_dag_folder(Path(args.path), options)
    warnings = unproduced_assets(result)
    if args.json:
        from leoflow.commands.json_out import validate_document

        document = validate_document(result)
        document["warnings"] = [
            {"file": path, "line": p.line, "field": p.field, "message": p.message}
            for path, p in warnings
        ]
        print_json(document)
        return EXIT_OK if document["valid"] else EXIT_FAILED
    for error in result.errors:
        print(error, file=sys.stderr)
    for path, problem in warnings:
        print(problem.render(path), file=sys.stderr)
    for dag_id, loaded in sorted(result.dags.items()):
        tasks = plural(len(loaded.spec.tasks), "task")
        print(printable(f"ok  {dag_id}  ({tasks})  {loaded.path}"))
        _note_catchup(args, loaded.spec)
        _note_reuse_pods(args, loaded.spec)
    if result.errors:
        problems = sum(len(e.problems) for e in result.errors)
        print(
            f"{plural(len(result.errors), 'file')} with {plural(problems, 'problem')}; "
            f"{plural(len(result.dags), 'DAG')} valid",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not result.dags:
        print(f"no DAG files (*.yaml, *.yml) under {args.path}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _note_reuse_pods(args: argparse.Namespace, spec: DagSpec) -> None:
    """Warm pods asked for where they cannot help, said before a run finds out."""
    from leoflow.domain.warm_pods import shares_no_shape

    reuse = spec.kubernetes.reuse_pods if spec.kubernetes is not None else None
    if reuse is None:
        return
    if shares_no_shape(spec.tasks):
        print(
            f"warning: {spec.dag_id}: kubernetes.reuse_pods: no two tasks share a pod shape "
            "(image, resources and pod fields all differ), so every task gets a pod of its own",
            file=sys.stderr,
        )
    if settings_of(args).executor != "kubernetes":
        print(
            f"note: {spec.dag_id}: kubernetes.reuse_pods applies to the kubernetes executor; "
            f"the {settings_of(args).executor!r} executor ignores it (Lite already runs every "
            "task through one warm agent)",
            file=sys.stderr,
        )


def _note_catchup(args: argparse.Namespace, spec: DagSpec) -> None:
    """Say before it happens when catchup will be held back by max_catchup_runs."""
    if not (spec.catchup and spec.schedule and spec.start_date is not None):
        return
    import time

    from leoflow.domain.schedule import due_runs

    cap = int(settings_of(args).max_catchup_runs)
    now = time.time()
    if len(due_runs(spec, None, now, now, limit=cap + 1)) > cap:
        print(
            f"note: {spec.dag_id} catches up from {spec.start_date.isoformat()}: more than "
            f"{plural(cap, 'run')} are due now; the scheduler keeps {cap} queued at a time and "
            "creates the rest as those start (max_catchup_runs, LEOFLOW_MAX_CATCHUP_RUNS)",
            file=sys.stderr,
        )


def cmd_schema(args: argparse.Namespace) -> int:
    from leoflow.dagfile.schema import shipped_schema

    sys.stdout.write(shipped_schema())
    return EXIT_OK


def cmd_next(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from leoflow.dagfile.loader import LoadOptions
    from leoflow.domain.schedule import next_fires

    if not 1 <= args.n <= 1000:
        print("leoflow: -n must be between 1 and 1000", file=sys.stderr)
        return EXIT_USAGE
    try:
        after = datetime.fromisoformat(args.after) if args.after else datetime.now(UTC)
    except ValueError:
        print(f"leoflow: --after {args.after!r} is not an ISO 8601 time", file=sys.stderr)
        return EXIT_USAGE
    after = after if after.tzinfo is not None else after.replace(tzinfo=UTC)
    dags_dir = Path(args.dags) if args.dags else None
    if dags_dir is None and not Path(args.target).suffix:
        dags_dir = settings_of(args).dags_folder
    loaded = load_target(args.target, dags_dir, LoadOptions())
    if loaded is None:
        return EXIT_FAILED
    spec = loaded.spec
    if spec.schedule is None:
        if spec.asset_schedule is not None:
            assets = ", ".join(spec.schedule_assets())
            print(
                f"DAG {spec.dag_id} has no cron: it runs when its assets have new events "
                f"({assets}; see leoflow assets why {spec.dag_id})",
                file=sys.stderr,
            )
        else:
            print(
                f"DAG {spec.dag_id} has no schedule: it runs only when triggered", file=sys.stderr
            )
        return EXIT_FAILED
    zone = ZoneInfo(spec.timezone)
    fires = next_fires(spec, after, args.n)
    if args.json:
        print_json(
            {
                "dag_id": spec.dag_id,
                "schedule": spec.schedule,
                "timezone": spec.timezone,
                "fires": [
                    {"local": f.astimezone(zone).isoformat(), "utc": f.astimezone(UTC).isoformat()}
                    for f in fires
                ],
                "complete": len(fires) == args.n,
            }
        )
        return EXIT_OK
    print(f"{spec.dag_id}: {spec.schedule!r} in {spec.timezone}")
    for fire in fires:
        local = fire.astimezone(zone)
        zone_name = f"{local:%Z}"
        print(f"{local:%Y-%m-%d %H:%M %a} {zone_name:<5} ({local:%z})   {fire:%Y-%m-%d %H:%M} UTC")
    if len(fires) < args.n:
        from leoflow.domain.timebounds import LATEST

        print(
            f"(no further fire times in the next years: {len(fires)} of {args.n}; "
            f"Leoflow schedules nothing at or after {LATEST:%Y-%m-%d} UTC)"
        )
    return EXIT_OK


# ------------------------------------------------------------- over the API


def _resolved(args: argparse.Namespace, path: Path, data: bytes) -> tuple[bytes, str] | None:
    """The document to send, and what to say of its dbt nodes; None after printing why not.

    A ``dbt:`` section is resolved here against the project on disk (the API has none).
    """
    from leoflow.commands.dbt_apply import DagFileError, resolve

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data, ""  # the API says so, like for any file
    try:
        resolved = resolve(path, text, settings_of(args).home / "dbt-cache")
    except DagFileError as exc:
        print(exc, file=sys.stderr)
        return None
    if resolved.resolution is None:
        return data, ""
    r = resolved.resolution
    note = f", {r.nodes} from dbt project {r.project} (manifest {r.manifest_sha256[:12]})"
    return resolved.text.encode(), note


@api_command
def cmd_apply(args: argparse.Namespace) -> int:
    failed = 0
    results = []
    with client(args) as session:
        for file in args.files:
            path = Path(file)
            try:
                data = path.read_bytes()
            except OSError as exc:
                print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
                failed += 1
                continue
            resolved = _resolved(args, path, data)
            if resolved is None:
                failed += 1
                continue
            text, note = resolved
            response = call(
                session,
                "POST",
                "/api/v1/dags",
                ok=(200, 201, 422),
                params={"name": _safe_name(path.name)},
                content=text,
                headers={"Content-Type": "application/yaml"},
            )
            body = response.json()
            results.append(body)
            if response.status_code == 422:
                failed += 1
                # A resolved document is not the file: its line numbers would mislead.
                _print_problems(path, body["detail"]["problems"], lines=not note)
            elif not args.json:
                what = (
                    "created" if body["created"] else "changed" if body["changed"] else "unchanged"
                )
                count = f"{plural(body['task_count'], 'task')}{note}"
                print(printable(f"{body['dag_id']}: {what} ({count}) from {path}"))
    if args.json:
        print_json(results)
    return EXIT_FAILED if failed else EXIT_OK


def _print_problems(path: Path, problems: list[dict[str, Any]], *, lines: bool = True) -> None:
    for problem in problems:
        where = f"{path}:{problem['line']}" if problem["line"] and lines else str(path)
        field = f"{problem['field']}: " if problem["field"] else ""
        print(printable(f"{where}: {field}{problem['message']}"), file=sys.stderr)


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name).lstrip(".-")
    return (cleaned or "leoflow.yaml")[:200]


def _origin(dag: Mapping[str, Any]) -> str:
    fileloc = str(dag["fileloc"])
    if is_adhoc(fileloc):
        return f"leoflow run {fileloc.removeprefix(ADHOC_PREFIX)}"
    return fileloc


DAG_COLUMNS = (
    ("DAG", "dag_id"),
    ("PAUSED", lambda d: "yes" if d["paused"] else "no"),
    ("SCHEDULE", lambda d: d["schedule"] or "-"),
    ("TASKS", "task_count"),
    ("ACTIVE", lambda d: "yes" if d["active"] else "no"),
    ("FROM", _origin),
)


@api_command
def cmd_list(args: argparse.Namespace) -> int:
    with client(args) as session:
        data = call(session, "GET", "/api/v1/dags").json()
    hidden = [] if args.all else [d for d in data["dags"] if is_adhoc(str(d["fileloc"]))]
    data["dags"] = [d for d in data["dags"] if d not in hidden]
    if args.json:
        print_json(data)
        return EXIT_OK
    print(table_of(data["dags"], DAG_COLUMNS))
    if hidden:
        print(
            f"({plural(len(hidden), 'DAG')} registered only by leoflow run FILE not shown; "
            "--all shows them)",
            file=sys.stderr,
        )
    for error in data["import_errors"]:
        print(
            printable(f"\nimport error in {error['fileloc']}:\n{error['error']}", lines=True),
            file=sys.stderr,
        )
    return EXIT_OK


def _dag_action(method: str, action: str, said: Callable[[dict[str, Any]], str]) -> Command:
    """A command that sends one request about one DAG and says what became of it."""

    @api_command
    def cmd(args: argparse.Namespace) -> int:
        path = f"/api/v1/dags/{url(args.dag_id)}" + (f"/{action}" if action else "")
        with client(args) as session:
            data = call(session, method, path).json()
        if args.json:
            print_json(data)
        else:
            print(f"{data['dag_id']}: {said(data)}")
        return EXIT_OK

    return cmd


def _pause(paused: bool) -> Command:
    action = "pause" if paused else "unpause"
    return _dag_action("POST", action, lambda d: "paused" if d["paused"] else "unpaused")


cmd_delete = _dag_action(
    "DELETE", "", lambda _: "deleted (its task pods go with its GC anchor; runs kept)"
)


def add_parser(sub: Any) -> None:
    dags = sub.add_parser("dags", help="work with DAG files").add_subparsers(
        dest="dags_command", required=True, metavar="SUBCOMMAND"
    )
    validate = dags.add_parser("validate", help="check DAG files; exit 1 listing every problem")
    validate.add_argument("path", help="a DAG file or a folder of them")
    validate.add_argument(
        "--passthrough", help="comma-separated execution fields the operator allows (Kubernetes)"
    )
    validate.add_argument(
        "--pools",
        help="comma-separated names of pools that exist besides the settings' "
        "(created through the API); a task's pool is checked against these",
    )
    validate.add_argument(
        "--json", action="store_true", help="print the DAGs and every problem as JSON"
    )
    validate.set_defaults(func=cmd_validate)
    schema = dags.add_parser(
        "schema", help="print the JSON Schema of leoflow.yaml (for editors: see README)"
    )
    schema.set_defaults(func=cmd_schema)
    nxt = dags.add_parser("next", help="print a DAG's next fire times, local and UTC")
    nxt.add_argument("target", help="a DAG file, or a dag_id found in --dags")
    nxt.add_argument(
        "--dags", help="folder to look the dag_id up in (default: dags_folder or ./dags)"
    )
    nxt.add_argument("-n", type=int, default=5, help="how many fire times (default 5)")
    nxt.add_argument("--after", help="ISO 8601 time to count from (default now; naive is UTC)")
    nxt.add_argument("--json", action="store_true", help="print the fire times as JSON")
    nxt.set_defaults(func=cmd_next)

    p = api_parser(
        dags,
        "apply",
        "send DAG files to the API (validated there; a dbt: section is read here; admin)",
        cmd_apply,
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    what = "DAGs the API knows, and files that failed to load"
    listing = api_parser(dags, "list", what, cmd_list, local=True)
    listing.add_argument(
        "--all", action="store_true", help="also the DAGs only `leoflow run FILE` registered"
    )
    p = api_parser(dags, "delete", "delete a DAG and its task pods (admin)", cmd_delete)
    p.add_argument("dag_id", metavar="DAG")
    for name, paused in (("pause", True), ("unpause", False)):
        p = api_parser(dags, name, f"{name} a DAG (operator)", _pause(paused))
        p.add_argument("dag_id", metavar="DAG")
