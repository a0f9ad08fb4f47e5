"""*Why is it waiting?* — one task instance's answer, with the numbers.

Pure: the caller (the API) reads the store and passes plain data; nothing here
does I/O, so every reason is unit-tested without a database.

The admission answer is computed the way the scheduler would decide on its next
tick: a fresh ``Admission`` with the configured limits, every task instance that
holds slots (queued, running) held, every scheduled one offered, ``admit()`` once.
What ``admit()`` takes would start on that tick; for the rest ``why()`` names the
binding limit and the others. Offering in the scheduler's order (priority desc,
run age, readiness) is done by ``Admission`` itself from the candidates' keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from leoflow.domain.admission import Admission, Candidate
from leoflow.domain.durations import format_duration
from leoflow.domain.reasons import WaitNote
from leoflow.domain.states import TASK_TERMINAL, RunState, TaskState
from leoflow.domain.task_instance import TaskInstance, candidate
from leoflow.domain.trigger_rules import Counts, Decision, TriggerRule, decide, waiting_message
from leoflow.domain.words import plural

_BAD_UPSTREAM = frozenset({TaskState.FAILED, TaskState.UPSTREAM_FAILED})


# A queued try's ``reason`` while its executor cannot reach its platform (the
# executor's LaunchWaiting note); the ``message`` says since when.
LAUNCH_WAITING_REASONS = frozenset(
    {WaitNote.APISERVER_UNREACHABLE, WaitNote.WARM_POD_STARTING, WaitNote.WARM_POD_LIMIT}
)


@dataclass(frozen=True, slots=True)
class RunInfo:
    key: int
    dag_id: str
    run_id: str
    state: RunState
    created_at: float


@dataclass(frozen=True, slots=True)
class Limits:
    """The admission limits as the scheduler would apply them."""

    parallelism: int
    default_pool_slots: int
    pools: Mapping[str, int]
    dag_max_active_tasks: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class AdmissionSnapshot:
    """Every task instance that holds slots or waits for them, and their runs' ages."""

    limits: Limits
    held: Sequence[TaskInstance]
    waiting: Sequence[TaskInstance]
    run_created_at: Mapping[int, float]


@dataclass(frozen=True, slots=True)
class RunGate:
    """The run-level gate of the task's DAG: ``max_active_runs`` and who is ahead."""

    max_active_runs: int
    running: int
    older_queued: int


@dataclass(frozen=True, slots=True)
class Blocker:
    reason: str
    message: str
    used: int | None = None
    limit: int | None = None
    needed: int | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    """``waiting`` is False once nothing but the scheduler's next tick stands in the way
    (or the task is running or done). ``reason`` is a stable code; ``message`` the
    sentence for people; ``also`` the other limits that block, after the binding one."""

    state: TaskState
    waiting: bool
    reason: str
    message: str
    used: int | None = None
    limit: int | None = None
    needed: int | None = None
    also: tuple[Blocker, ...] = ()
    upstreams: tuple[tuple[str, TaskState], ...] = ()
    retry_at: float | None = None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _candidate(ti: TaskInstance, run_created_at: Mapping[int, float]) -> Candidate:
    return candidate(ti, ti.dag_id, run_created_at.get(ti.run_pk, 0.0))


def admission_for(snapshot: AdmissionSnapshot) -> Admission:
    """The admission state the scheduler would have on its next tick, already admitted."""
    limits = snapshot.limits
    admission = Admission(
        max(0, limits.parallelism),
        {name: max(0, slots) for name, slots in limits.pools.items()},
        max(0, limits.default_pool_slots),
    )
    for dag_id, cap in limits.dag_max_active_tasks.items():
        admission.set_dag_limit(dag_id, max(0, cap))
    for ti in snapshot.held:
        admission.hold(_candidate(ti, snapshot.run_created_at))
    for ti in snapshot.waiting:
        admission.offer(_candidate(ti, snapshot.run_created_at))
    admission.admit()
    return admission


def _admission_reason(ti: TaskInstance, snapshot: AdmissionSnapshot) -> Explanation:
    admission = admission_for(snapshot)
    if admission.is_held(ti.pk):
        return Explanation(
            ti.state,
            False,
            "admit_next_tick",
            "nothing blocks it: the scheduler admits it on its next tick",
            needed=ti.pool_slots,
        )
    why = admission.why(ti.pk)
    if why is None:  # not offered: the caller left it out of ``waiting``
        raise ValueError(f"task instance {ti.pk} is not among the waiting task instances")
    return Explanation(
        ti.state,
        True,
        why.reason,
        why.message,
        why.used,
        why.limit,
        why.needed,
        tuple(Blocker(w.reason, w.message, w.used, w.limit, w.needed) for w in why.also),
    )


def _unfinished(pending: tuple[tuple[str, TaskState], ...]) -> str:
    """``still running: a (running); not yet running: b (scheduled)``: an upstream that
    is queued, scheduled or waiting to retry is not running, and says so."""
    running = [f"{u} ({s.value})" for u, s in pending if s is TaskState.RUNNING]
    waiting = [f"{u} ({s.value})" for u, s in pending if s is not TaskState.RUNNING]
    groups = [("still running", running), ("not yet running", waiting)]
    return "; ".join(f"{label}: {', '.join(names)}" for label, names in groups if names)


def _upstream_reason(
    ti: TaskInstance,
    depends_on: Sequence[str],
    states: Mapping[str, TaskState],
    rule: TriggerRule,
) -> Explanation:
    upstream_states = [states.get(u, TaskState.NONE) for u in depends_on]
    counts = Counts.of(upstream_states)
    decision = decide(rule, counts)
    if decision is Decision.UPSTREAM_FAILED:
        failed = [u for u, s in zip(depends_on, upstream_states, strict=True) if s in _BAD_UPSTREAM]
        return Explanation(
            ti.state,
            False,
            "upstream_failed",
            f"{'upstream task' if len(failed) == 1 else 'upstream tasks'} {', '.join(failed)} "
            "failed: the scheduler marks it upstream_failed on its next tick",
            upstreams=tuple((u, s) for u, s in zip(depends_on, upstream_states, strict=True)),
        )
    if decision is Decision.SKIP:
        return Explanation(
            ti.state,
            False,
            "skipped",
            f"trigger rule {rule.value} can no longer be met: the scheduler marks it skipped"
            " on its next tick",
            upstreams=tuple((u, s) for u, s in zip(depends_on, upstream_states, strict=True)),
        )
    if decision is Decision.RUN:
        return Explanation(
            ti.state,
            False,
            "schedule_next_tick",
            f"trigger rule {rule.value} is met: the scheduler schedules it on its next tick",
        )
    pending = tuple(
        (u, s) for u, s in zip(depends_on, upstream_states, strict=True) if s not in TASK_TERMINAL
    )
    unfinished = _unfinished(pending)
    if rule is TriggerRule.ALL_SUCCESS:  # the default reads best without naming it
        of = plural(len(depends_on), "upstream task")
        message = f"waiting for {len(pending)} of {of}; {unfinished}"
    else:
        message = f"{waiting_message(rule, counts)}; {unfinished}"
    return Explanation(
        ti.state,
        True,
        "upstream",
        message,
        used=len(depends_on) - len(pending),
        limit=len(depends_on),
        upstreams=pending,
    )


def _retry_reason(ti: TaskInstance, now: float) -> Explanation:
    next_try = ti.try_number + 1
    if ti.next_retry_at is None or ti.next_retry_at <= now:
        return Explanation(
            ti.state,
            False,
            "retry_due",
            f"try {next_try} of {ti.max_tries} is due: the scheduler schedules it on its next tick",
            retry_at=ti.next_retry_at,
        )
    left = ti.next_retry_at - now
    return Explanation(
        ti.state,
        True,
        "retry_delay",
        f"try {ti.try_number} failed; try {next_try} of {ti.max_tries} is due at "
        f"{_iso(ti.next_retry_at)} (in {format_duration(left)})",
        used=ti.try_number,
        limit=ti.max_tries,
        retry_at=ti.next_retry_at,
    )


def _run_gate_reason(ti: TaskInstance, run: RunInfo, gate: RunGate) -> Explanation:
    ahead = gate.running + gate.older_queued
    older = ""
    if gate.older_queued:
        older = f"; {plural(gate.older_queued, 'older queued run')} ahead of it"
    if ahead < gate.max_active_runs:
        return Explanation(
            ti.state,
            False,
            "run_start_next_tick",
            f"run {run.run_id} is queued: DAG {run.dag_id} has {gate.running} of "
            f"{gate.max_active_runs} max_active_runs running{older}; the scheduler starts it"
            " on its next tick",
            used=gate.running,
            limit=gate.max_active_runs,
            needed=1,
        )
    return Explanation(
        ti.state,
        True,
        "max_active_runs",
        f"run {run.run_id} is queued: DAG {run.dag_id} has {gate.running} of "
        f"{gate.max_active_runs} max_active_runs running{older}",
        used=gate.running,
        limit=gate.max_active_runs,
        needed=1,
    )


def explain(
    ti: TaskInstance,
    run: RunInfo,
    *,
    now: float,
    depends_on: Sequence[str] = (),
    run_task_states: Mapping[str, TaskState] | None = None,
    gate: RunGate | None = None,
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS,
    snapshot: AdmissionSnapshot | None = None,
) -> Explanation:
    """Why ``ti`` is not running (yet), or what it is doing.

    ``depends_on``/``run_task_states`` (task id -> state in this run) answer for a
    task in ``none``; ``gate`` for a task of a queued run; ``snapshot`` for a
    scheduled task. A missing input that the answer needs is a ValueError.
    """
    state = ti.state
    if state in TASK_TERMINAL:
        return Explanation(state, False, "finished", f"finished: {state.value}")
    if run.state in (RunState.SUCCESS, RunState.FAILED):
        return Explanation(
            state,
            False,
            "run_finished",
            f"run {run.run_id} is {run.state.value}: the scheduler stops this task instance",
        )
    if run.state is RunState.QUEUED:
        if gate is None:
            raise ValueError("a task of a queued run needs the run gate")
        return _run_gate_reason(ti, run, gate)
    if state is TaskState.RUNNING:
        return Explanation(
            state, False, "running", f"running: try {ti.try_number} of {ti.max_tries}"
        )
    if state is TaskState.QUEUED and ti.reason in LAUNCH_WAITING_REASONS and ti.message:
        return Explanation(state, True, ti.reason, ti.message)
    if state is TaskState.QUEUED:
        return Explanation(
            state,
            False,
            "launching",
            f"admitted (holds {plural(ti.pool_slots, 'slot')} of pool {ti.pool}); "
            f"try {ti.try_number} is waiting for the executor to start it",
        )
    if state is TaskState.UP_FOR_RETRY:
        return _retry_reason(ti, now)
    if state is TaskState.NONE:
        if run_task_states is None:
            raise ValueError("a task in state none needs its run's task states")
        return _upstream_reason(ti, depends_on, run_task_states, trigger_rule)
    if snapshot is None:
        raise ValueError("a scheduled task needs the admission snapshot")
    return _admission_reason(ti, snapshot)


def count_running_and_older(runs: Iterable[RunInfo], run: RunInfo) -> tuple[int, int]:
    """Of one DAG's runs: how many run, and how many queued ones are older than ``run``
    (ordered as the scheduler starts them: created_at, then pk)."""
    running = older = 0
    for other in runs:
        if other.dag_id != run.dag_id or other.key == run.key:
            continue
        if other.state is RunState.RUNNING:
            running += 1
        elif other.state is RunState.QUEUED and (other.created_at, other.key) < (
            run.created_at,
            run.key,
        ):
            older += 1
    return running, older
