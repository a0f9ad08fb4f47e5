"""Leoflow, a workflow orchestrator: DAGs of tasks, each its own subprocess (Lite) or pod (Pro).

Packages, top to bottom (docs/ARCHITECTURE.md has the picture; ``.importlinter`` the
rules): entry points and wiring; the services ``api`` and ``scheduler``; the adapters
``store``, ``executor``, ``kube``, ``secrets``, ``dbt``, ``dagfile`` and ``health``;
then ``agent``, ``settings`` and ``logs``; and the pure core ``domain`` and ``protocol``.
Imports point down only.
"""

import os

# grpc's fork handlers restart its threads in a forked child; a fork that happens while
# another thread is inside grpc (the scheduler's endpoint under load) then crashes the
# child before it can exec: SIGSEGV or SIGABRT in about a third of such forks. Leoflow
# only forks to exec (a task run as another user, a server's pg_ctl), so it needs none.
# Set before anything imports grpc; a value the user set explicitly is kept.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

__version__ = "0.1.0"
