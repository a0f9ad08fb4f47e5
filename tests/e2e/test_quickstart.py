"""The quick start, as written, on an empty LEOFLOW_HOME: what a fresh clone's first
commands do. The commands are read from the docs' "Run DAGs with Lite" page
(docs/how-to/lite.md) and the Makefile (README's two commands), so a command the docs
show is a command this test runs."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import LEOFLOW, REPO, Leoflow
from tests.support.net import free_port

LITE_PAGE = "docs/how-to/lite.md"
PLACEHOLDERS = {"DAG_ID": "nightly_sales", "TASK_ID": "load_orders"}


def doc_block(page: str) -> list[str]:
    """The lines of the first ``sh`` block of ``page``, comments and blanks dropped."""
    section = (REPO / page).read_text()
    block = section[section.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def as_argv(line: str, run_id: str | None = None) -> list[str]:
    """A documented line as argv: optional ``[...]`` parts dropped, placeholders filled in."""
    words = shlex.split(re.sub(r"\s*\[[^\]]*\]", "", line))
    assert words[0].split("/")[-1] == "leoflow", line
    values = {**PLACEHOLDERS, "RUN_ID": run_id or "RUN_ID"}
    return [LEOFLOW, *(values.get(word, word) for word in words[1:])]


def test_the_documented_lite_commands_work_on_an_empty_home(leoflow: Leoflow, home: Path) -> None:
    lines = doc_block(LITE_PAGE)
    assert any(line.endswith("run examples/dags/etl.yaml") for line in lines), lines
    run_id = None
    ran = 0
    for line in sorted(lines, key=lambda line: " logs " in line):  # logs needs a run
        argv = as_argv(line, run_id)
        if argv[1] == "lite":
            continue  # test_the_documented_lite_runs_the_example_folder
        done = leoflow(*argv[1:], timeout=120)
        said = done.stdout + done.stderr
        expected = 1 if "broken_upstream" in line else 0
        assert done.returncode == expected, f"{line}\n{said}"
        assert "unknown pool" not in said, said
        if found := re.search(r"run (local__\S+) of nightly_sales: success", done.stdout):
            run_id = found.group(1)
        ran += 1
    assert run_id is not None
    assert ran == len(lines) - 1
    assert list(home.iterdir())  # it all ran on this (at first empty) home


def test_make_run_runs_without_a_settings_file(leoflow: Leoflow) -> None:
    recipe = (REPO / "Makefile").read_text().split("\nrun:", 1)[1].splitlines()[1].strip()
    assert "--config" not in recipe
    done = leoflow(*as_argv(recipe)[1:], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"run \S+ of nightly_sales: success", done.stdout)


def lite_runs_the_example(argv: list[str], env: dict[str, str], tmp_path: Path) -> str:
    """Start ``argv`` (a ``leoflow lite`` of examples/dags), trigger nightly_sales over
    the API as the docs show, wait for the run to succeed, stop it with Ctrl-C; its
    output, after asserting that it stopped cleanly."""
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    env = {**env, "LEOFLOW_API_LISTEN": f"127.0.0.1:{port}", "LEOFLOW_SERVER": server}
    out = tmp_path / "lite.out"
    with out.open("w") as sink:
        lite = subprocess.Popen(argv, env=env, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [LEOFLOW, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
        )

    try:
        deadline = time.monotonic() + 120
        while cli("trigger", "nightly_sales").returncode != 0:
            assert lite.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        state = None
        while state != "success":
            assert time.monotonic() < deadline, (state, out.read_text())
            time.sleep(0.2)
            listed = json.loads(cli("runs", "--dag", "nightly_sales", "--json").stdout)
            state = listed["runs"][0]["state"] if listed["runs"] else None
            assert state != "failed", out.read_text()
        run_id = listed["runs"][0]["run_id"]
        for args in (["dags", "list"], ["tasks", "nightly_sales", run_id], ["pools"]):
            shown = cli(*args)
            assert shown.returncode == 0, shown.stderr
        logs = cli("logs", "nightly_sales", run_id, "load_orders")
        assert "loading orders into analytics" in logs.stdout, logs.stderr
    finally:
        lite.send_signal(signal.SIGINT)
        lite.wait(30)
    said = out.read_text()
    assert "unknown pool" not in said and "error" not in said, said
    assert lite.returncode == 0, said
    return said


def test_the_documented_lite_runs_the_example_folder(env: dict[str, str], tmp_path: Path) -> None:
    """``leoflow lite --dags examples/dags`` with no settings: a triggered run of the
    example (whose pool the file declares) succeeds; Ctrl-C stops it."""
    (line,) = [line for line in doc_block(LITE_PAGE) if " lite " in line]
    lite_runs_the_example(as_argv(line), env, tmp_path)


# `pip install leoflow` leaves these out (the pro extra); this process cannot import them.
WITHOUT_PRO = [
    sys.executable,
    "-c",
    "import sys\n"
    "sys.modules.update(kubernetes_asyncio=None, asyncpg=None)\n"
    "from leoflow.commands.main import main\n"
    "raise SystemExit(main())",
]


def test_lite_never_imports_the_pro_packages(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """``leoflow run`` and ``leoflow lite`` with its API, in processes where importing
    kubernetes_asyncio or asyncpg fails: everything works, so neither is imported."""
    ran = subprocess.run(
        [*WITHOUT_PRO, "run", "examples/dags/etl.yaml"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lite_runs_the_example([*WITHOUT_PRO, "lite", "--dags", "examples/dags"], env, tmp_path)


def test_a_pro_command_without_the_extra_says_how_to_install_it(env: dict[str, str]) -> None:
    cases = [
        (["run", "examples/dags/etl.yaml", "--executor", "kubernetes"], {}),
        (["run", "examples/dags/etl.yaml"], {"LEOFLOW_DATABASE_URL": "postgresql://u@127.0.0.1/x"}),
    ]
    for args, extra in cases:
        done = subprocess.run(
            [*WITHOUT_PRO, *args],
            env={**env, **extra}, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        assert "pip install 'leoflow[pro]'" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_version_comes_from_the_package_metadata(leoflow: Leoflow) -> None:
    from importlib.metadata import version

    done = leoflow("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"leoflow {version('leoflow')}"
