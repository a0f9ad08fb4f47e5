"""``kubernetes.reuse_pods`` in a leoflow.yaml: bad values name the file, line and
field path; Lite notes that it ignores the section."""

from __future__ import annotations

from textwrap import dedent

from leoflow.dagfile.loader import LoadOptions, lite_ignored_fields, parse_dag
from leoflow.domain.warm_pods import shares_no_shape

from .test_loader import PATH, assert_problem, errors

DAG = """
dag_id: warm
kubernetes:
  reuse_pods:
    max_pods: {max_pods}
    idle_timeout: {idle}
tasks:
  a: {{command: "true"}}
  b: {{command: "true", image: "other:1"}}
"""


def test_max_pods_must_be_positive() -> None:
    for bad in (0, -1):
        err = errors(DAG.format(max_pods=bad, idle="2m"))
        assert_problem(err, "kubernetes.reuse_pods.max_pods", 4, "greater than or equal to 1")


def test_idle_timeout_must_be_a_duration_not_negative() -> None:
    err = errors(DAG.format(max_pods=2, idle="-5"))
    assert_problem(err, "kubernetes.reuse_pods.idle_timeout", 5, "duration")
    err = errors(DAG.format(max_pods=2, idle="soon"))
    assert_problem(err, "kubernetes.reuse_pods.idle_timeout", 5, "duration")


def test_unknown_keys_are_refused() -> None:
    err = errors(DAG.format(max_pods=2, idle="2m").replace("idle_timeout", "idle_tiemout"))
    assert any(p.field.startswith("kubernetes.reuse_pods.idle_tiemout") for p in err.problems)


def test_a_good_section_loads_and_lite_says_it_ignores_it() -> None:
    text = dedent(DAG.format(max_pods=3, idle="90s")).lstrip("\n")
    loaded = parse_dag(text, PATH, LoadOptions())
    reuse = loaded.kubernetes.reuse_pods if loaded.kubernetes else None
    assert reuse is not None and (reuse.max_pods, reuse.idle_timeout) == (3, 90.0)
    assert reuse.max_tasks_per_pod == 200
    assert "kubernetes.reuse_pods" in lite_ignored_fields(loaded)
    # a's pod and b's pod differ (b names another image): no two tasks share a shape.
    assert shares_no_shape(loaded.tasks)
