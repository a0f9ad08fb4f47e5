"""The images `make image` and `make image-dbt` build, run in a real container engine
(podman + runc in CI), as a task pod runs them: the image's own numeric USER, no UID
pinned, and for dbt a read-only root with only ``/tmp`` writable.

With ``CI`` set a missing engine or image fails these tests; elsewhere they skip
(tests/support/containers.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.containers import api_get, run_container

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# What a hardened task pod gets (the Kubernetes executor's pod, taskPodSecurity on):
# read-only root, an emptyDir at /tmp, no capabilities, no privilege escalation.
HARDENED = (
    "--read-only",
    "--tmpfs",
    "/tmp:rw,mode=1777",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
)
# The agent's venv, stripped, without pip or setuptools, with its bytecode compiled once,
# is ~118 MB (137 MB before; 87 MB without bytecode); a bound just above catches a pip
# cache or unstripped libraries.
VENV_BOUND_KB = 125_000


def _ok(done: object) -> str:
    import subprocess

    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    return str(done.stdout)


def test_leoflow_and_its_agent_start_as_the_images_numeric_user(container_image: str) -> None:
    assert "usage: leoflow" in _ok(run_container(container_image, "--help", options=HARDENED))
    agent = _ok(run_container(container_image, "agent", "--help", options=HARDENED))
    assert "leoflow agent [--pool | --warm]" in agent and "LEOFLOW_AGENT_TICKET" in agent
    # No --user: the image's own USER, as a pod that pins no runAsUser gets it.
    ids = _ok(run_container(container_image, "-c", "id -u; id -g", options=("--entrypoint", "sh")))
    assert ids.split() == ["65532", "65532"]


def test_only_leoflow_is_on_path_and_the_python_is_the_images_own(container_image: str) -> None:
    script = "command -v leoflow; readlink -f $(command -v leoflow); command -v python"
    found = _ok(run_container(container_image, "-c", script, options=("--entrypoint", "sh")))
    leoflow, target, python = found.split()
    assert (leoflow, target) == ("/usr/local/bin/leoflow", "/opt/leoflow/bin/leoflow")
    assert not python.startswith("/opt/leoflow"), python


def test_the_image_carries_no_pip_cache_or_build_leftovers(container_image: str) -> None:
    script = (
        # Every module has its bytecode: a read-only root lets Python write none at start.
        "echo uncompiled $(cd /opt/leoflow/lib/python3*/site-packages/leoflow && for f in"
        " $(find . -name '*.py'); do d=$(dirname $f); b=$(basename $f .py);"
        " ls $d/__pycache__/$b.*.pyc >/dev/null 2>&1 || echo $f; done | wc -l);"
        "echo pip $(ls /opt/leoflow/bin | grep -c '^pip');"
        "echo caches $(find /root/.cache /tmp -mindepth 1 2>/dev/null | wc -l);"
        "echo src $(test -e /src && echo 1 || echo 0);"
        "echo wheels $(test -e /wheels && echo 1 || echo 0);"
        "echo venv_kb $(du -sk /opt/leoflow | cut -f1)"
    )
    # As root, to see into /root too.
    as_root = ("--user", "0", "--entrypoint", "sh")
    found = _ok(run_container(container_image, "-c", script, options=as_root))
    facts = {line.split()[0]: int(line.split()[1]) for line in found.splitlines()}
    venv_kb = facts.pop("venv_kb")
    assert facts == {"uncompiled": 0, "pip": 0, "caches": 0, "src": 0, "wheels": 0}
    assert venv_kb <= VENV_BOUND_KB, f"/opt/leoflow is {venv_kb} KB"


def test_the_dbt_image_has_its_own_dbt_and_leaves_the_agents_venv_alone(dbt_image: str) -> None:
    version = _ok(run_container(dbt_image, "--version", options=("--entrypoint", "dbt")))
    assert "installed: 1.11.16" in version and "duckdb: 1.11.1" in version, version
    script = (
        "id -u; command -v dbt; test -s /opt/dags/shop/target/manifest.json && echo manifest;"
        "/opt/leoflow/bin/python -c 'import google.protobuf as p; print(p.__version__)';"
        "/opt/dbt/bin/python -c 'import google.protobuf as p; print(p.__version__)';"
        "ls -A /tmp | wc -l"
    )
    lines = _ok(run_container(dbt_image, "-c", script, options=("--entrypoint", "sh"))).split()
    assert lines[:3] == ["65532", "/opt/dbt/bin/dbt", "manifest"]
    agent_protobuf, dbt_protobuf = (int(v.split(".")[0]) for v in lines[3:5])
    assert dbt_protobuf < 7 <= agent_protobuf, lines
    assert lines[5] == "0", "the build left files in /tmp"


SHOP_ENV = (
    "-e",
    "SHOP_DUCKDB_PATH=/tmp/shop.duckdb",
    "-e",
    "LEOFLOW_SECRET_WAREHOUSE_PASSWORD=s3cret",
)
REVENUE = (
    "import duckdb, json;"
    "c = duckdb.connect('/tmp/shop.duckdb', read_only=True);"
    "print(json.dumps(c.execute('select customer_id, revenue from customer_revenue order by 1')"
    ".fetchall()))"
)


def test_the_dbt_image_builds_the_shop_project_on_a_read_only_root(dbt_image: str) -> None:
    """dbt's target, logs and profiles dir under /tmp (the image's ENV): nothing else is
    writable, and the project in the image is used as shipped, its build-time parse
    reused by the first task."""
    script = (
        "set -e; cd /opt/dags/shop;"
        "python /opt/dags/extract_orders.py /tmp/shop.duckdb;"
        # First, as a task pod runs it: from the image's own parse, not a full one.
        "LEOFLOW_DBT_PARTIAL_PARSE=/opt/dags/shop/target/partial_parse.msgpack"
        " leoflow dbt-task --task dbt.raw_customers -- dbt seed --select raw_customers"
        " --project-dir /opt/dags/shop --profiles-dir /opt/dags/profiles;"
        "echo full-parses $(grep -c 'Unable to do partial parsing' /tmp/dbt/logs/dbt.log || true);"
        "dbt seed --profiles-dir /opt/dags/profiles;"
        "dbt run --profiles-dir /opt/dags/profiles;"
        "test -s /tmp/dbt/target/run_results.json && echo target-in-tmp;"
        "test -s /tmp/dbt/logs/dbt.log && echo logs-in-tmp;"
        f'python -c "{REVENUE}"'
    )
    done = run_container(
        dbt_image, "-c", script, options=(*HARDENED, *SHOP_ENV, "--entrypoint", "sh")
    )
    out = _ok(done)
    assert "Completed successfully" in out
    assert "target-in-tmp" in out and "logs-in-tmp" in out
    assert "full-parses 0" in out, "the image's partial parse was not reused"
    assert json.loads(out.splitlines()[-1]) == [[1, 37.5], [2, 40.0], [3, 7.25]]


def test_dbt_writing_into_the_image_project_fails_on_the_read_only_root(dbt_image: str) -> None:
    """The counter-case: a target path inside the image, as dbt's default would be."""
    script = (
        "cd /opt/dags/shop && dbt seed --profiles-dir /opt/dags/profiles --target-path target-new"
    )
    done = run_container(
        dbt_image, "-c", script, options=(*HARDENED, *SHOP_ENV, "--entrypoint", "sh")
    )
    assert done.returncode != 0
    assert "Read-only file system" in done.stdout + done.stderr


def test_the_docker_api_of_the_session_sees_the_built_image(
    docker_host: str, container_image: str
) -> None:
    """The API the docker executor's tests talk to uses the same image store as the CLI."""
    assert docker_host.startswith("unix://")
    status, body = api_get(docker_host, f"/images/{container_image}/json")
    assert status == 200, body[:300]
    assert json.loads(body)["Config"]["User"] == "65532:65532"
    assert api_get(docker_host, "/images/localhost/no-such-image:0/json")[0] == 404
