"""``leoflow run --executor docker``: every task in its own container, made from the
task pod the Kubernetes executor would create, in a real engine from the built image.

A DAG end to end (fan-out, a retry, logs, outputs); the hardening seen from inside
a task; OOM, an outside ``kill -9`` and ``exit 3`` each told right; an image that
cannot be had, a root image under runAsNonRoot, and no engine at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import LEOFLOW, REPO, Leoflow
from tests.e2e.test_dbt import _query
from tests.e2e.test_outputs import _rows, _run_id
from tests.support.containers import containers, start_podman_service

IN_TASK = "/opt/leoflow/bin/python"  # the image's own interpreter


@pytest.fixture
def docker_env(env: dict[str, str], docker_host: str, container_image: str) -> dict[str, str]:
    env["DOCKER_HOST"] = docker_host
    env["LEOFLOW_TASK_IMAGE"] = container_image
    env["LEOFLOW_EXECUTOR"] = "docker"
    return env


@contextlib.contextmanager
def _leoflow_run(dag: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``leoflow run DAG`` in the background, killed if it still runs at the end."""
    run = subprocess.Popen(
        [LEOFLOW, "run", str(dag)], env=env, cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield run
    finally:
        if run.poll() is None:
            run.kill()
        run.wait()


def _left(docker_host: str, dag_id: str) -> list[str]:
    found = containers(docker_host, f"leoflow.io/dag={dag_id}")
    return [n for c in found for n in c.get("Names") or []]


def test_a_dag_runs_end_to_end_in_containers(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, docker_host: str, home: Path
) -> None:
    produce = "import json, os; json.dump(['a', 'b'], open(os.environ['LEOFLOW_OUTPUT'], 'w'))"
    (home / "secrets").mkdir()
    (home / "secrets" / "api_key").write_text("s3cr3t-in-a-container")
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""dag_id: dock_fan
tasks:
  produce:
    command: [{IN_TASK}, "-c", {json.dumps(produce)}]
  left:
    depends_on: [produce]
    env: {{GREETING: hello}}
    secrets: [api_key]
    command: >-
      echo "left got $LEOFLOW_INPUT_PRODUCE"; echo left-line-2; echo "$GREETING";
      echo "secret $LEOFLOW_SECRET_API_KEY"; echo "agent vars: $(env | grep -c '^LEOFLOW_AGENT_')"
  right:
    depends_on: [produce]
    retries: 1
    retry_delay: 100ms
    command: '[ "$LEOFLOW_TRY_NUMBER" -lt 2 ] && {{ echo "try 1 fails"; exit 7; }}; echo right ok'
  join:
    depends_on: [left, right]
    command: 'echo 42 > "$LEOFLOW_OUTPUT"'
"""
    )
    done = leoflow("run", str(dag), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(done.stdout)
    assert {task: cells[1] for task, cells in rows.items()} == dict.fromkeys(
        ("produce", "left", "right", "join"), "success"
    )
    assert rows["right"][2] == "2", rows["right"]
    run_id = _run_id(done.stdout, "dock_fan")
    logs = leoflow("logs", "dock_fan", run_id, "left")
    assert logs.returncode == 0, logs.stderr
    assert any(line.startswith('left got ["a", "b"]') for line in logs.stdout.splitlines())
    lines = logs.stdout.splitlines()
    assert "left-line-2" in lines and "hello" in lines, logs.stdout
    # The per-task secret came through the agent, masked in the log; the agent's own
    # bootstrap (endpoint, ticket) stays the agent's.
    assert "secret ***" in lines and "s3cr3t-in-a-container" not in logs.stdout, logs.stdout
    assert "agent vars: 0" in lines, logs.stdout
    first = leoflow("logs", "dock_fan", run_id, "right", "--try", "1")
    assert "try 1 fails" in first.stdout.splitlines()
    outputs = {str(t): o for t, o in _query(home, "select task_id, output from task_instances")}
    assert outputs["join"] == "42" and json.loads(str(outputs["produce"])) == ["a", "b"]
    assert _left(docker_host, "dock_fan") == [], "finished containers are removed"


PROBE = r"""
echo "uid=$(id -u)"
for path in /probe /opt/probe /var/tmp/probe /tmp/probe; do
  if err=$(touch "$path" 2>&1); then echo "$path=written"; else echo "$path=${err##*: }"; fi
done
if [ -e /var/run/secrets/kubernetes.io ]; then echo "token=present"; else echo "token=absent"; fi
echo "vartmp_fs=$(awk '$2 == "/var/tmp" {print $3}' /proc/mounts)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
"""


@pytest.mark.parametrize("read_only", [True, False])
def test_inside_a_task_the_pod_hardening_holds(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, read_only: bool
) -> None:
    docker_env["LEOFLOW_TASK_POD_SECURITY__READ_ONLY_ROOT_FILESYSTEM"] = str(read_only).lower()
    dag = tmp_path / "dag.yaml"
    dag.write_text(f"dag_id: dock_probe\ntasks:\n  probe:\n    command: {json.dumps(PROBE)}\n")
    done = leoflow("run", str(dag), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    out = leoflow("logs", "dock_probe", _run_id(done.stdout, "dock_probe"), "probe").stdout
    facts = {}
    for line in out.splitlines():
        found = re.match(r"^([\w/]+)[=:]\s*(.*)$", line)
        if found:
            facts[found.group(1)] = found.group(2).strip()
    assert facts["uid"] == "65532", out  # the image's numeric USER, no UID pinned
    if read_only:
        assert facts["/probe"] == facts["/opt/probe"] == "Read-only file system", out
        # Podman (not Docker, not a kubelet) mounts its own tmpfs on /var/tmp under a
        # read-only root; the image's filesystem itself still takes no write.
        if facts["vartmp_fs"] != "tmpfs":
            assert facts["/var/tmp/probe"] == "Read-only file system", out
    else:
        # The root filesystem is writable: only file modes stop UID 65532 at / and /opt,
        # and /var/tmp (mode 1777, on the image's root filesystem) takes the write.
        assert facts["/probe"] == facts["/opt/probe"] == "Permission denied", out
        assert facts["/var/tmp/probe"] == "written", out
    assert facts["/tmp/probe"] == "written", out
    assert facts["token"] == "absent", out
    assert int(facts["CapEff"], 16) == 0 and int(facts["CapPrm"], 16) == 0, out
    assert int(facts["CapBnd"], 16) == 0, out  # CapDrop ALL: not even the bounding set
    assert facts["NoNewPrivs"] == "1", out
    assert facts["Seccomp"] == "2", out  # filtered: the engine's default profile


def _outcomes(home: Path) -> dict[str, tuple[object, ...]]:
    rows = _query(home, "select task_id, state, reason, exit_code, message from task_instances")
    return {str(row[0]): row[1:] for row in rows}


def _host_pid_of(marker: str, within: float = 180) -> int:
    """The host PID of the task process whose command line holds ``marker``."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and argv[0].endswith(b"sleep"):
                return int(entry.name)
        time.sleep(0.1)  # polling the host's process table for a process we await
    raise AssertionError(f"no process with {marker} appeared within {within}s")


def test_oom_an_outside_kill_and_exit_3_are_each_told_right(
    docker_env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    hog = "x = 'x' * (600 << 20); print(len(x))"
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""dag_id: dock_ends
tasks:
  hog:
    resources: {{limits: {{memory: 160Mi}}}}
    command: [{IN_TASK}, "-c", {json.dumps(hog)}]
  killed:
    resources: {{limits: {{memory: 160Mi}}}}
    command: ["sleep", "3001"]
  three:
    command: 'echo before; exit 3'
"""
    )
    with _leoflow_run(dag, docker_env) as run:
        os.kill(_host_pid_of("3001"), signal.SIGKILL)  # from outside the container
        out, _ = run.communicate(timeout=240)
    assert run.returncode == 1, out
    ends = _outcomes(home)
    state, reason, _, message = ends["hog"]
    assert (state, reason) == ("failed", "oom"), ends["hog"]
    assert str(message).startswith("out of memory: the kernel killed this task's process"), message
    state, reason, code, message = ends["killed"]
    assert (state, reason) == ("failed", "exit_code") and code in (137, -9), ends["killed"]
    assert "memory" not in str(message), message
    assert ends["three"][:3] == ("failed", "exit_code", 3), ends["three"]


def test_oom_is_told_when_many_small_processes_outgrow_the_agent(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, home: Path
) -> None:
    """Each child is smaller than the agent (PID 1, sharing the cgroup): the kernel kills
    the largest, so unless the task is its preferred victim the agent dies, the
    container with it, and the try ends as a bare SIGKILL."""
    hold = "import time; x = b'x' * (24 << 20); time.sleep(30)"
    child = f'{IN_TASK} -c "{hold}"'
    command = f"for i in $(seq 12); do {child} & done; wait; echo survived"
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "dag_id: dock_oomfork\ntasks:\n  many:\n    resources: {limits: {memory: 200Mi}}\n"
        f"    command: {json.dumps(command)}\n"
    )
    done = leoflow("run", str(dag), timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    state, reason, _, message = _outcomes(home)["many"]
    assert (state, reason) == ("failed", "oom"), message


def _one_task_in(
    image: str, dag_id: str, leoflow: Leoflow, tmp_path: Path, home: Path
) -> tuple[object, ...]:
    """Run a one-task DAG whose task names ``image``; its (state, reason, message)."""
    dag = tmp_path / "dag.yaml"
    dag.write_text(f"dag_id: {dag_id}\ntasks:\n  t:\n    image: {image}\n    command: 'true'\n")
    done = leoflow("run", str(dag), timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    state, reason, _, message = _outcomes(home)["t"]
    return state, reason, message


def test_an_image_that_cannot_be_had_fails_the_task_at_once(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, home: Path
) -> None:
    missing = "localhost:1/leoflow-nowhere:never"
    state, reason, message = _one_task_in(missing, "dock_noimage", leoflow, tmp_path, home)
    assert (state, reason) == ("failed", "image_pull"), message
    assert str(message).startswith(f"image not found: {missing} (pull failed: "), message


def test_a_root_image_under_run_as_non_root_is_refused_naming_the_setting(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, home: Path, docker_host: str
) -> None:
    root_image = os.environ.get("LEOFLOW_TEST_ROOT_IMAGE", "localhost/debian-python:3.11-bookworm")
    state, reason, message = _one_task_in(root_image, "dock_root", leoflow, tmp_path, home)
    assert (state, reason) == ("failed", "launch_failed"), message
    assert "CreateContainerConfigError" in str(message), message
    assert "securityContext.runAsNonRoot" in str(message), message
    assert _left(docker_host, "dock_root") == [], "no container was created"


def test_no_engine_stops_leoflow_run_at_once_naming_the_socket(
    env: dict[str, str], leoflow: Leoflow, tmp_path: Path
) -> None:
    sock = tmp_path / "nothing-here.sock"
    env["DOCKER_HOST"] = f"unix://{sock}"
    dag = tmp_path / "dag.yaml"
    dag.write_text("dag_id: dock_noengine\ntasks:\n  t:\n    command: 'true'\n")
    done = leoflow("run", str(dag), "--executor", "docker", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(sock) in done.stderr, done.stderr
    assert "podman system service" in done.stderr and "systemctl start docker" in done.stderr
    assert not (Path(env["LEOFLOW_HOME"]) / "leoflow.db").exists(), "stopped before the store"


def test_an_engine_restarted_mid_run_finds_its_running_task_again(
    env: dict[str, str], container_image: str, tmp_path: Path, home: Path
) -> None:
    """Podman's API service stops and starts again while a task runs (the container
    lives on under conmon): the executor's wait breaks, asks again, finds it, and the
    try ends as the task does."""
    sock = tmp_path / "restarting.sock"
    engine = start_podman_service(sock)
    env.update(
        DOCKER_HOST=f"unix://{sock}", LEOFLOW_TASK_IMAGE=container_image, LEOFLOW_EXECUTOR="docker"
    )
    dag = tmp_path / "dag.yaml"
    dag.write_text("dag_id: dock_restart\ntasks:\n  t:\n    command: 'sleep 3002; echo after'\n")
    try:
        with _leoflow_run(dag, env) as run:
            sleeper = _host_pid_of("3002")
            engine.terminate()
            engine.wait(timeout=30)
            engine = start_podman_service(sock)
            os.kill(sleeper, signal.SIGTERM)  # the task goes on to its end
            out, _ = run.communicate(timeout=180)
    finally:
        engine.terminate()
        engine.wait(timeout=30)
    assert run.returncode == 0, out
    assert _outcomes(home)["t"][:2] == ("success", "success"), out


def test_a_killed_lites_containers_are_reaped_by_the_next(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, docker_host: str
) -> None:
    dag = tmp_path / "dag.yaml"
    dag.write_text("dag_id: dock_orphan\ntasks:\n  t:\n    command: 'sleep 3003'\n")
    with _leoflow_run(dag, docker_env):
        _host_pid_of("3003")  # leaving the block SIGKILLs the run: it cannot stop its container
    assert _left(docker_host, "dock_orphan"), "the killed run's container is still there"
    other = tmp_path / "other.yaml"
    other.write_text("dag_id: dock_next\ntasks:\n  t:\n    command: 'true'\n")
    done = leoflow("run", str(other), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _left(docker_host, "dock_orphan") == [], "the next Lite reaped the leftover"


def test_a_stopped_run_stops_and_removes_its_containers(
    docker_env: dict[str, str], tmp_path: Path, docker_host: str
) -> None:
    dag = tmp_path / "dag.yaml"
    dag.write_text("dag_id: dock_stop\ntasks:\n  t:\n    command: 'echo started; sleep 3004'\n")
    with _leoflow_run(dag, docker_env) as run:
        _host_pid_of("3004")
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM, out
    assert "1 running task killed (t)" in out, out
    assert _left(docker_host, "dock_stop") == [], "its container was stopped and removed"


def test_a_container_the_engine_refuses_fails_naming_the_setting(
    docker_env: dict[str, str], leoflow: Leoflow, tmp_path: Path, home: Path, docker_host: str
) -> None:
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "dag_id: dock_refused\ntasks:\n  t:\n"
        "    resources: {limits: {memory: '1000'}}\n    command: 'true'\n"
    )
    done = leoflow("run", str(dag), timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    state, reason, _, message = _outcomes(home)["t"]
    assert (state, reason) == ("failed", "launch_failed"), message
    assert "the task's resources.limits.memory = 1000" in str(message), message
    assert _left(docker_host, "dock_refused") == [], "the refused container was removed"


def test_pros_scheduler_refuses_the_docker_executor(env: dict[str, str], leoflow: Leoflow) -> None:
    env["LEOFLOW_EXECUTOR"] = "docker"
    done = leoflow("scheduler", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the docker executor is Lite's" in done.stderr
