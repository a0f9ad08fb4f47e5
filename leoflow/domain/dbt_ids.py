"""Which task id each dbt node becomes, unique or refused: never two nodes in one task.

A task id keeps only ``[A-Za-z0-9_.-]`` and at most 200 characters, and Leoflow gives
each task its own folder (``<scratch>/<dag>/<task>/``), which a case-insensitive file
system (macOS, Windows) cannot tell apart by case. So a node's id is made in steps:

1. ``dbt.<name>`` (tests: ``dbt.test.<name>``), a versioned model's version appended
   (``dbt.dim_customers.v2``, dbt's own ``name.v2``), anything else replaced by ``_``;
2. the nodes whose ids clash (ignoring case), or that take an id Leoflow makes itself
   (``dbt.tests``), get their package in it: ``dbt.<package>.<name>``, which is how
   two packages' nodes of one name tell apart (repeated while a qualified id meets an
   unqualified one: a test ``x`` and a model ``x`` of a package named ``test``);
3. an id longer than 200 characters keeps its start and a hash of the node's unique id.

Nodes still sharing an id then (``order$items`` and ``order_items`` in one package,
both names dbt accepts; ``Orders`` and ``orders``) are a load error naming every one
of them: as in Airflow, where two tasks of one id are a ``DuplicateTaskIdFound``
import error (Cosmos names its tasks ``<name>_run`` and leaves a clash to Airflow), a
user renames a node or excludes it. Which id a node gets depends only on the selected
nodes that clash with it, never on the manifest's order. Pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable

from leoflow.domain.dbt_graph import Graph

TASK_PREFIX = "dbt."
TESTS_TASK = "dbt.tests"
# Ids Leoflow makes itself for a dbt section: never a node's.
RESERVED = frozenset({TESTS_TASK})
MAX_ID = 200  # leoflow.domain.dag.TASK_ID_PATTERN
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_SHOWN = 5

Loc = tuple[str, ...]


def _label(graph: Graph, uid: str, qualified: bool) -> str:
    node = graph.nodes[uid]
    parts = [graph.name(uid)]
    if qualified:
        parts.insert(0, str(node.get("package_name") or uid.partition(".")[2].split(".")[0]))
    version = node.get("version")
    if version is not None and graph.resource_type(uid) == "model":
        parts.append(f"v{version}")
    prefix = TASK_PREFIX + "test." if graph.resource_type(uid) == "test" else TASK_PREFIX
    text = _UNSAFE.sub("_", prefix + ".".join(parts))
    if len(text) > MAX_ID:
        digest = hashlib.sha256(uid.encode()).hexdigest()[:10]
        text = f"{text[: MAX_ID - len(digest) - 1]}-{digest}"
    return text


def _clashing(ids: dict[str, str], taken: Collection[str]) -> dict[str, list[str]]:
    """Ids (case folded) that more than one node has, or a node and ``taken``: -> uids."""
    by_key: dict[str, list[str]] = {}
    for uid, task_id in ids.items():
        by_key.setdefault(task_id.casefold(), []).append(uid)
    reserved = {t.casefold() for t in taken}
    return {k: sorted(u) for k, u in by_key.items() if len(u) > 1 or k in reserved}


def task_ids(graph: Graph, uids: Iterable[str]) -> tuple[dict[str, str], list[tuple[Loc, str]]]:
    """uid -> task id for ``uids``, and a problem per id several nodes would share."""
    ids = {uid: _label(graph, uid, qualified=False) for uid in sorted(uids)}
    qualified: set[str] = set()
    while True:  # each pass qualifies one more node at least, or stops
        clashes = list(_clashing(ids, RESERVED).values())
        more = {uid for group in clashes for uid in group} - qualified
        if not more:
            break
        for uid in more:
            ids[uid] = _label(graph, uid, qualified=True)
        qualified |= more
    where: Loc = ("dbt", "project_dir")
    problems = [(where, _clash_message(graph, g, ids)) for g in clashes]
    return ids, problems


def _clash_message(graph: Graph, group: list[str], ids: dict[str, str]) -> str:
    shown = []
    for uid in group[:_SHOWN]:
        path = graph.nodes[uid].get("original_file_path")
        shown.append(f"{uid} ({path})" if path else uid)
    more = f" and {len(group) - _SHOWN} more" if len(group) > _SHOWN else ""
    task = " / ".join(repr(n) for n in sorted({ids[uid] for uid in group}))
    return (
        f"dbt nodes {', '.join(shown)}{more} would all be task {task} (a task id keeps "
        f"only letters, digits, '_', '.' and '-', ids that differ only in case are one "
        f"task, and {TESTS_TASK!r} is Leoflow's own); rename all but one in the dbt "
        f"project, or leave them out with dbt.exclude"
    )
