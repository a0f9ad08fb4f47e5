"""Every apiserver call Leoflow makes, declared once.

The kube client refuses a call that is not in this table, and
``scripts/rbac-covers-executor.sh`` compares the table with the Helm chart's
Roles both ways: every call granted, every grant used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["task", "release"]


@dataclass(frozen=True)
class ApiCall:
    """One kind of apiserver request: verb on (group, resource) in a namespace scope.

    ``scope`` says which namespace: ``task`` is where task pods run,
    ``release`` is where Leoflow itself is installed (the Lease lives there).
    """

    name: str
    verb: str
    group: str
    resource: str
    scope: Scope


CREATE_POD = ApiCall("create_pod", "create", "", "pods", "task")
DELETE_POD = ApiCall("delete_pod", "delete", "", "pods", "task")
LIST_PODS = ApiCall("list_pods", "list", "", "pods", "task")
WATCH_PODS = ApiCall("watch_pods", "watch", "", "pods", "task")
READ_POD_LOG = ApiCall("read_pod_log", "get", "", "pods/log", "task")
# Each DAG's GC anchor (leoflow/kube/dag_anchor.py): created on a DAG's first launch,
# read back when the create finds it there, listed once at start-up (the orphan sweep),
# deleted with its DAG. Never watched: the pod watch stays the only watch.
CREATE_CONFIGMAP = ApiCall("create_configmap", "create", "", "configmaps", "task")
GET_CONFIGMAP = ApiCall("get_configmap", "get", "", "configmaps", "task")
LIST_CONFIGMAPS = ApiCall("list_configmaps", "list", "", "configmaps", "task")
DELETE_CONFIGMAP = ApiCall("delete_configmap", "delete", "", "configmaps", "task")
GET_LEASE = ApiCall("get_lease", "get", "coordination.k8s.io", "leases", "release")
CREATE_LEASE = ApiCall("create_lease", "create", "coordination.k8s.io", "leases", "release")
UPDATE_LEASE = ApiCall("update_lease", "update", "coordination.k8s.io", "leases", "release")

CALLS: tuple[ApiCall, ...] = (
    CREATE_POD,
    DELETE_POD,
    LIST_PODS,
    WATCH_PODS,
    READ_POD_LOG,
    CREATE_CONFIGMAP,
    GET_CONFIGMAP,
    LIST_CONFIGMAPS,
    DELETE_CONFIGMAP,
    GET_LEASE,
    CREATE_LEASE,
    UPDATE_LEASE,
)


def main() -> None:
    """Print the table as ``scope group resource verb`` lines, for the RBAC check."""
    for call in CALLS:
        print(call.scope, call.group or "core", call.resource, call.verb)


if __name__ == "__main__":
    main()
