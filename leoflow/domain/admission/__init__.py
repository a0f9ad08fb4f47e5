"""Admission: which ready task instances may start now, under every limit.

Owns the admission queue and the slots admitted task instances hold; pure (stdlib
only) and single-threaded — it must never import I/O, the store or the scheduler.

A candidate is a task instance whose upstreams are done. Admitting it makes it
hold three things until it is released (terminal): one of the global
``parallelism`` slots, one of its DAG's ``max_active_tasks`` (across all runs of
the DAG) and ``pool_slots`` slots of its pool.

Order is priority (higher first), then run age (``run_order``, smaller first),
then readiness (``ready_order``, smaller first), then ``key``: deterministic.
``admit()`` is exactly this greedy rule: walk the waiting candidates in that
order, stop when parallelism is full, skip every candidate whose DAG or pool
cannot take it, admit the rest. Nothing blocked by its own DAG or pool ever
holds back a candidate behind it (no head-of-line blocking).

Choices where the contract left room:

* A candidate needing more pool slots than are free does not stop a smaller
  candidate of the same pool behind it from starting (as in Airflow). Packing
  the pool this way keeps it busy; the price is that a big task can starve while
  a stream of small ones keeps the pool from ever having enough room. Reserving
  slots for the big one would idle the pool for an unbounded time instead; the
  operator's remedy for starvation is ``priority`` or a pool of its own.
* A DAG without a limit set through ``set_dag_limit`` is unlimited here: the
  scheduler sets every loaded DAG's ``max_active_tasks`` (whose spec default of
  16 is applied by the DAG loader), so only a DAG unknown to it — its file
  removed while task instances remain — falls back, and no number nobody
  configured should throttle that.
* ``default_pool`` always exists: ``set_pool`` resizes it, ``remove_pool``
  returns it to ``default_pool_slots``. Any other unknown pool name makes its
  candidates wait with ``pool_missing``; they start once the pool is created.
* ``offer`` of a key that is already waiting or held does nothing and returns
  False (the scheduler may re-offer what it sees in state ``scheduled``). To
  change a waiting candidate, ``withdraw`` it and offer it again.
* ``hold`` of a held key does nothing (False); of a waiting key it withdraws it
  and holds it, since the store says it already holds its slots.
* ``why`` lists every limit that blocks, the binding one first (see
  ``reasons``). Limits of 0 are allowed and pause: parallelism 0 admits nothing,
  a DAG limit of 0 pauses the DAG, a pool of 0 slots is too small for every task.

Modules: ``candidate`` (what is offered), ``reasons`` (why a candidate waits),
``lanes`` (the heaps that make a decision O(log n)), ``queue`` (``Admission``:
the limits, the held slots and the admission walk).
"""

from leoflow.domain.admission.candidate import DEFAULT_POOL, DEFAULT_POOL_SLOTS, Candidate
from leoflow.domain.admission.queue import Admission
from leoflow.domain.admission.reasons import REASONS, Reason, WaitReason

__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_POOL_SLOTS",
    "REASONS",
    "Admission",
    "Candidate",
    "Reason",
    "WaitReason",
]
