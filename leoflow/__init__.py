"""Leoflow, a workflow orchestrator: DAGs of tasks, each its own subprocess (Lite) or pod (Pro).

Packages, top to bottom (docs/ARCHITECTURE.md has the picture; ``.importlinter`` the
rules): entry points and wiring; the services ``api`` and ``scheduler``; the adapters
``store``, ``executor``, ``kube``, ``secrets``, ``dbt``, ``dagfile`` and ``health``;
then ``agent``, ``settings`` and ``logs``; and the pure core ``domain`` and ``protocol``.
Imports point down only.
"""

__version__ = "0.1.0"
