"""RunReadiness (incremental) against progress.evaluate / final_state (from scratch).

Random DAGs with random trigger rules; the machine plays the scheduler: after each
evaluate it applies the answer (ready → scheduled, markings), then tasks start and
end in random end states, retries send tasks back, and now and then a store
reconcile forces any task into any state. At every step the incremental answer
must equal the one computed from scratch over the same states.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.progress import evaluate, final_state, topological_order
from leoflow.domain.readiness import RunReadiness, shape_of
from leoflow.domain.states import TaskState
from leoflow.domain.trigger_rules import TRIGGER_RULES

T = TaskState
ENDS = (T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED)


@st.composite
def dags(draw: st.DrawFn) -> DagSpec:
    n = draw(st.integers(1, 9))
    tasks = {}
    for i in range(n):
        # Upstreams only among earlier tasks: acyclic; duplicates allowed on purpose.
        ups = draw(st.lists(st.integers(0, i - 1), max_size=4)) if i else []
        rule = draw(st.sampled_from(TRIGGER_RULES))
        tasks[f"t{i}"] = TaskSpec(
            task_id=f"t{i}",
            command="true",
            depends_on=[f"t{u}" for u in ups],
            trigger_rule=rule,
        )
    return DagSpec(dag_id="d", tasks=tasks)


steps = st.lists(
    st.tuples(st.sampled_from(("end", "retry", "force")), st.integers(0, 8), st.integers(0, 8)),
    max_size=40,
)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
@settings(max_examples=300, deadline=None)
@given(spec=dags(), plan=steps)
def test_incremental_equals_from_scratch(spec: DagSpec, plan: list[tuple[str, int, int]]) -> None:
    order = topological_order(spec)
    ids = list(spec.tasks)
    states = dict.fromkeys(ids, T.NONE)
    tracker = RunReadiness(spec, order, states)

    def check_and_apply() -> None:
        want = evaluate(spec, order, states)
        got = tracker.evaluate()
        assert got == want
        for task_id in want.ready:
            states[task_id] = T.SCHEDULED
            tracker.set(task_id, T.SCHEDULED)
        for task_id, _ in want.upstream_failed:
            states[task_id] = T.UPSTREAM_FAILED
            tracker.set(task_id, T.UPSTREAM_FAILED)
        for task_id, _ in want.skipped:
            states[task_id] = T.SKIPPED
            tracker.set(task_id, T.SKIPPED)
        assert tracker.final_state() == final_state(spec, states)
        assert dict(tracker.states) == states

    check_and_apply()
    for kind, i, j in plan:
        task_id = ids[i % len(ids)]
        if kind == "end" and states[task_id] is T.SCHEDULED:
            new = ENDS[j % 3]  # a try ends: success, failed or skipped
        elif kind == "retry" and states[task_id] in (T.FAILED, T.SCHEDULED):
            new = T.UP_FOR_RETRY if j % 2 else T.SCHEDULED
        elif kind == "force":
            new = list(T)[j % len(T)]
        else:
            continue
        states[task_id] = new
        tracker.set(task_id, new)
        check_and_apply()


def test_runs_of_one_dag_share_one_shape() -> None:
    spec = DagSpec(
        dag_id="d",
        tasks={
            "a": TaskSpec(task_id="a", command="true"),
            "b": TaskSpec(task_id="b", command="true", depends_on=["a"]),
        },
    )
    order = topological_order(spec)
    assert shape_of(spec, order) is shape_of(spec, order)
    other = spec.model_copy(deep=True)
    assert shape_of(other, order) is not shape_of(spec, order)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_wide_fan_in_costs_its_out_degree_per_change() -> None:
    """10,000 roots into one join: each end touches one counter, and the join is
    reported ready exactly once, after the last root succeeds."""
    n = 10_000
    tasks = {f"r{i}": TaskSpec(task_id=f"r{i}", command="true") for i in range(n)}
    tasks["join"] = TaskSpec(task_id="join", command="true", depends_on=list(tasks))
    spec = DagSpec(dag_id="wide", tasks=tasks)
    tracker = RunReadiness(spec, topological_order(spec), dict.fromkeys(tasks, T.NONE))
    first = tracker.evaluate()
    assert len(first.ready) == n and "join" not in first.ready
    for i in range(n):
        tracker.set(f"r{i}", T.SUCCESS)
        ready = tracker.evaluate().ready
        assert ready == (("join",) if i == n - 1 else ())
    assert tracker.final_state() is None
    tracker.set("join", T.SUCCESS)
    assert tracker.final_state() is not None
