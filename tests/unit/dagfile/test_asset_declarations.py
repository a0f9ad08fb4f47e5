"""``produces:`` and ``consumes:`` in a DAG file: normalised, and a bad URI is a load error
naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError

PATH = Path("dags/shop/leoflow.yaml")


def load(text: str):  # type: ignore[no-untyped-def]
    return parse_dag(dedent(text).lstrip("\n"), PATH)


def test_a_task_declares_what_it_produces_and_consumes_in_canonical_form() -> None:
    spec = load(
        """
        dag_id: shop
        tasks:
          land:
            command: [land]
            consumes: [S3://Raw-Bucket/orders/]
            produces: [DuckDB://Warehouse/main.orders, orders, duckdb://warehouse/main.orders]
          report:
            command: [report]
            depends_on: [land]
        """
    )
    land = spec.tasks["land"]
    assert land.produces == ("duckdb://warehouse/main.orders", "orders")
    assert land.consumes == ("s3://raw-bucket/orders/",)
    assert spec.tasks["report"].produces == () and spec.tasks["report"].consumes == ()


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("postgres://etl:hunter2@db/app/public.orders", "must not contain credentials"),
        ("s3://bucket/key?token=abc", "must not contain credentials"),
        ("'1x://bucket'", "malformed scheme"),
        ("'ord ers'", "no spaces"),
        ("7", "a string"),
    ],
)
def test_a_bad_uri_is_a_load_error_at_its_file_line_and_field(entry: str, fragment: str) -> None:
    with pytest.raises(DagFileError) as info:
        load(
            f"""
            dag_id: shop
            tasks:
              land:
                command: [land]
                produces:
                  - orders
                  - {entry}
            """
        )
    (problem,) = info.value.problems
    assert problem.field == "tasks.land.produces.1"
    assert problem.line == 7
    rendered = problem.render(PATH)
    assert rendered.startswith(f"{PATH}:7: tasks.land.produces.1: "), rendered
    assert fragment in rendered
    assert "hunter2" not in rendered and "abc" not in rendered


def test_consumes_is_checked_like_produces_and_defaults_cannot_declare_assets() -> None:
    with pytest.raises(DagFileError) as info:
        load(
            """
            dag_id: shop
            defaults:
              produces: [orders]
            tasks:
              land:
                command: [land]
                consumes: ["mysql://root:pw@db/x"]
            """
        )
    fields = {p.field: p for p in info.value.problems}
    assert fields["tasks.land.consumes.0"].line == 7
    assert "credentials" in fields["tasks.land.consumes.0"].message
    assert fields["defaults.produces"].line == 3
    assert "unknown field" in fields["defaults.produces"].message


def test_a_list_is_expected_not_a_mapping() -> None:
    with pytest.raises(DagFileError) as info:
        load(
            """
            dag_id: shop
            tasks:
              land:
                command: [land]
                produces: {orders: 1}
            """
        )
    (problem,) = info.value.problems
    assert problem.field == "tasks.land.produces" and problem.line == 5
    assert "expected a list of asset URIs or names" in problem.message


def test_validate_warns_of_a_schedule_on_an_asset_no_dag_produces(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "land.yaml").write_text(
        "dag_id: land\ntasks:\n  orders: {command: 'true', produces: [Orders, s3://B/k]}\n"
    )
    (tmp_path / "marts.yaml").write_text(
        "dag_id: marts\nschedule:\n  assets: [Orders, S3://b/k, custmers]\n"
        "tasks:\n  b: {command: 'true'}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "leoflow", "dags", "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr  # a warning, not an error
    assert f"{tmp_path / 'marts.yaml'}:3: schedule.assets: warning: no DAG here produces " in (
        done.stderr
    )
    assert "'custmers'" in done.stderr and "k'" not in done.stderr  # S3://b/k is s3://b/k
    as_json = subprocess.run(
        [sys.executable, "-m", "leoflow", "dags", "validate", "--json", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    import json

    document = json.loads(as_json.stdout)
    assert document["valid"] is True
    assert [(w["line"], w["field"]) for w in document["warnings"]] == [(3, "schedule.assets")]


def test_dags_next_of_an_asset_only_dag_says_it_waits_for_its_assets(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "marts.yaml"
    path.write_text("dag_id: marts\nschedule: {assets: [orders]}\ntasks:\n  b: {command: x}\n")
    done = subprocess.run(
        [sys.executable, "-m", "leoflow", "dags", "next", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "has no cron: it runs when its assets have new events (orders;" in done.stderr
