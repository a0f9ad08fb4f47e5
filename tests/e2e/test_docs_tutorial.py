"""The tutorial (docs/tutorial/first-dag.md) as a reader follows it: its DAG files, as
the page shows them, validate, run, report the mistake the page describes in the
words it quotes, and schedule as it says."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import REPO, Leoflow

PAGE = REPO / "docs" / "tutorial" / "first-dag.md"


def _hello_versions() -> list[str]:
    return re.findall(r'```yaml title="hello.yaml"\n(.*?)```', PAGE.read_text(), re.S)


def test_the_tutorial_dag_validates_runs_and_schedules_as_the_page_says(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    page = PAGE.read_text()
    first, scheduled = _hello_versions()
    dags = tmp_path / "dags"
    dags.mkdir()
    hello = dags / "hello.yaml"

    hello.write_text(first)
    done = leoflow("dags", "validate", str(dags))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok  hello  (3 tasks)  "), done.stdout

    done = leoflow("run", str(hello), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = re.search(r"run (\S+) of hello: success", done.stdout)
    assert run_id, done.stdout
    done = leoflow("logs", "hello", run_id.group(1), "greet")
    assert done.stdout == "hello from greet\n", done.stdout + done.stderr

    hello.write_text(first.replace("depends_on: [greet", "depends_om: [greet"))
    done = leoflow("dags", "validate", str(dags))
    assert done.returncode == 1
    said = done.stderr.splitlines()[0]
    assert said.endswith(
        "hello.yaml:9: tasks.report.depends_om: unknown field; did you mean 'depends_on'?"
    ), said
    assert said.split("/")[-1] in page  # the page quotes it

    hello.write_text(scheduled)
    done = leoflow("dags", "next", "hello", "--dags", str(dags), "-n", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "hello: '*/5 * * * *' in Europe/Berlin"
    assert len(done.stdout.splitlines()) == 4
