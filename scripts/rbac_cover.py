#!/usr/bin/env python3
"""Compare the chart's Roles with the apiserver calls Leoflow makes, both ways.

The call table is ``python -m leoflow.kube.calls`` output: one ``scope group resource
verb`` line per call (``core`` is the empty API group). The grants are the rules of
the Roles in a ``helm template`` rendering; each Role names the call scope it serves
with the ``leoflow.io/api-call-scope`` annotation (``task``: the task namespace,
``release``: the release namespace).

    rbac_cover.py check --manifests rendered.yaml [--calls calls.txt]
        exit 1 naming every call without a grant and every grant without a call
    rbac_cover.py generate [--calls calls.txt] [--check]
        write (or, with --check, verify) helm/leoflow/files/executor-calls.yaml,
        the file the chart's Roles are rendered from

Only PyYAML and the standard library: it runs in CI before anything else is set up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
GENERATED = REPO / "helm" / "leoflow" / "files" / "executor-calls.yaml"
SCOPE_ANNOTATION = "leoflow.io/api-call-scope"
SCOPES = ("task", "release")
# A rule restricted by resourceNames never authorizes these: the request carries no
# object name the authorizer could match (create) or asks for many objects.
UNNAMEABLE_VERBS = frozenset({"create", "list", "watch", "deletecollection"})
CLUSTER_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding"})


@dataclass(frozen=True, order=True)
class Call:
    scope: str
    group: str  # "core" for the empty group, as the call table prints it
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.scope} {self.group} {self.resource} {self.verb}"


@dataclass(frozen=True)
class Grant:
    call: Call
    role: str  # namespace/name of the Role
    resource_names: tuple[str, ...]

    @property
    def effective(self) -> bool:
        return not (self.resource_names and self.call.verb in UNNAMEABLE_VERBS)


def parse_calls(text: str) -> set[Call]:
    calls = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 4 or parts[0] not in SCOPES:
            raise ValueError(
                f"call table line {number}: expected 'scope group resource verb', got {raw!r}"
            )
        calls.add(Call(*parts))
    return calls


def load_calls(path: str | None) -> set[Call]:
    if path == "-":
        return parse_calls(sys.stdin.read())
    if path:
        return parse_calls(Path(path).read_text())
    out = subprocess.run(
        [sys.executable, "-m", "leoflow.kube.calls"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return parse_calls(out)


def _docs(text: str) -> Iterator[dict[str, Any]]:
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict):
            if doc.get("kind") == "List":
                yield from (item for item in doc.get("items") or [] if isinstance(item, dict))
            else:
                yield doc


def grants_of(
    manifests: Iterable[dict[str, Any]], problems: list[str], namespaces: dict[str, str]
) -> list[Grant]:
    grants: list[Grant] = []
    for doc in manifests:
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        if kind in CLUSTER_KINDS:
            problems.append(f"{kind} {meta.get('name')}: cluster-scoped RBAC is never granted")
            continue
        if kind != "Role":
            continue
        role = f"{meta.get('namespace', '?')}/{meta.get('name')}"
        scope = (meta.get("annotations") or {}).get(SCOPE_ANNOTATION)
        if scope not in SCOPES:
            problems.append(
                f"grant without a call: Role {role} has no {SCOPE_ANNOTATION} "
                f"annotation (task or release), so no call can use its rules"
            )
            continue
        want_ns = namespaces.get(scope)
        if want_ns and meta.get("namespace") != want_ns:
            problems.append(f"Role {role} serves scope {scope} but is not in namespace {want_ns}")
        for rule in doc.get("rules") or []:
            if rule.get("nonResourceURLs"):
                problems.append(
                    f"grant without a call: Role {role}: nonResourceURLs {rule['nonResourceURLs']}"
                )
            names = tuple(rule.get("resourceNames") or ())
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        call = Call(scope, group or "core", resource, verb)
                        grants.append(Grant(call, role, names))
    return grants


def compare(calls: set[Call], grants: list[Grant]) -> list[str]:
    """Every problem, one line each; empty when table and grants cover each other."""
    problems = []
    effective = {g.call for g in grants if g.effective}
    for call in sorted(calls - effective):
        named = [g for g in grants if g.call == call]
        if named:
            problems.append(
                f"call without a grant: {call} (granted only with resourceNames "
                f"{list(named[0].resource_names)} in Role {named[0].role}, which "
                f"never authorizes {call.verb})"
            )
        else:
            problems.append(f"call without a grant: {call}")
    for grant in sorted(grants, key=lambda g: (g.call, g.role)):
        if grant.call not in calls:
            names = f" resourceNames {list(grant.resource_names)}" if grant.resource_names else ""
            problems.append(f"grant without a call: Role {grant.role}: {grant.call}{names}")
    return problems


def check(args: argparse.Namespace) -> int:
    calls = load_calls(args.calls)
    text = sys.stdin.read() if args.manifests == "-" else Path(args.manifests).read_text()
    problems: list[str] = []
    namespaces = {
        k: v for k, v in (("task", args.task_namespace), ("release", args.release_namespace)) if v
    }
    grants = grants_of(_docs(text), problems, namespaces)
    problems += compare(calls, grants)
    for line in problems:
        print(f"rbac-cover: {line}", file=sys.stderr)
    if problems:
        print(f"rbac-cover: FAILED ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    print(f"rbac-cover: ok: {len(calls)} calls, {len(grants)} grants, covered both ways")
    return 0


def render_generated(calls: set[Call]) -> str:
    by_key: dict[tuple[str, str, str], list[str]] = {}
    for call in sorted(calls):
        by_key.setdefault((call.scope, call.group, call.resource), []).append(call.verb)
    data: dict[str, list[dict[str, Any]]] = {scope: [] for scope in SCOPES}
    for (scope, group, resource), verbs in sorted(by_key.items()):
        data[scope].append(
            {
                "group": "" if group == "core" else group,
                "resource": resource,
                "verbs": sorted(set(verbs)),
            }
        )
    header = (
        "# Generated by `python scripts/rbac_cover.py generate` from leoflow/kube/calls.py.\n"
        "# Do not edit: the chart's Roles are rendered from it (templates/rbac.yaml).\n"
    )
    return header + yaml.safe_dump(data, sort_keys=True, default_flow_style=None)


def generate(args: argparse.Namespace) -> int:
    wanted = render_generated(load_calls(args.calls))
    out = Path(args.out)
    if args.check:
        current = out.read_text() if out.exists() else ""
        if current != wanted:
            print(
                f"rbac-cover: {out} is stale; run: python scripts/rbac_cover.py generate",
                file=sys.stderr,
            )
            return 1
        print(f"rbac-cover: {out} matches the call table")
        return 0
    out.write_text(wanted)
    print(f"rbac-cover: wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="compare rendered Roles with the call table")
    c.add_argument("--manifests", required=True, help="helm template output ('-': stdin)")
    c.add_argument(
        "--calls", help="call table file ('-': stdin); default: python -m leoflow.kube.calls"
    )
    c.add_argument("--task-namespace", help="namespace the task-scope Role must be in")
    c.add_argument("--release-namespace", help="namespace the release-scope Role must be in")
    c.set_defaults(func=check)
    g = sub.add_parser("generate", help="write the chart's call file from the call table")
    g.add_argument("--calls", help="call table file; default: python -m leoflow.kube.calls")
    g.add_argument("--out", default=str(GENERATED))
    g.add_argument("--check", action="store_true", help="only verify the file is current")
    g.set_defaults(func=generate)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, OSError, subprocess.CalledProcessError, yaml.YAMLError) as exc:
        print(f"rbac-cover: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
