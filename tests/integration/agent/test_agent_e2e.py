"""`python -m leoflow.agent` as a real subprocess against a real endpoint."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import sys
from pathlib import Path

import pytest

from .fake_backend import FakeTI
from .plane import Plane

pytestmark = pytest.mark.slow  # real agent processes end to end

PY = sys.executable
OOM_MESSAGE = (
    "out of memory: the kernel killed this task's process. Raise the task's memory limit "
    "(resources.limits.memory); if it uses an engine with its own memory budget, such as "
    "DuckDB, set that budget too, because it sizes itself from detected RAM and may not "
    "see the container's limit."
)


async def _run(plane: Plane, ti: FakeTI, **env: str) -> tuple[int, bytes, str]:
    proc = await plane.agent(
        env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti), **env)
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


async def _until(predicate: object, what: str) -> None:
    for _ in range(3000):
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _fake_cgroup(root: Path, oom_kill: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    events = root / "memory.events"
    events.write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {oom_kill}\noom_group_kill 0\n")
    return events


async def test_exit_code_output_env_and_cwd_round_trip(plane: Plane, tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "print('to stdout', flush=True)\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        "print('cwd', os.getcwd(), flush=True)\n"
        "print('FOO', os.environ['FOO'], flush=True)\n"
        "print('ticket', os.environ.get('LEOFLOW_AGENT_TICKET'), flush=True)\n"
        "sys.exit(3)\n"
    )
    ti = plane.ti(1, argv=[PY, "-c", script], env={"FOO": "bar"}, cwd=str(tmp_path))
    code, stdout, stderr = await _run(plane, ti, LEOFLOW_POD_NAME="pod-1", LEOFLOW_POD_UID="u1")
    assert code == 3, stderr
    assert stdout == b""  # single mode writes nothing on its own stdout
    log = bytes(ti.log).decode()
    assert "to stdout\n" in log and "to stderr\n" in log
    assert f"cwd {tmp_path}\n" in log and "FOO bar\n" in log and "ticket None\n" in log
    assert ti.outcome == {
        "exit_code": 3,
        "oom_killed": False,
        "timed_out": False,
        "message": "exited with code 3",
    }
    assert ti.executor_ref == "pod:pod-1@u1"
    writes = [w[0] for w in plane.backend.writes_for(1)]
    assert writes[:2] == ["consume_ticket", "start"] and writes[-1] == "complete"


async def test_silent_success(plane: Plane) -> None:
    ti = plane.ti(1, argv=["true"])
    code, _, stderr = await _run(plane, ti)
    assert code == 0, stderr
    assert ti.outcome is not None and ti.outcome["message"] == "" and ti.state == "success"
    assert "append_log" not in [w[0] for w in plane.backend.writes_for(1)]


async def test_ten_megabyte_log_round_trips_byte_for_byte(plane: Plane) -> None:
    size = 10 * 1024 * 1024
    script = (
        "import random, sys\n"
        f"data = random.Random(7).randbytes({size})\n"
        "for i in range(0, len(data), 100_000):\n"
        "    sys.stdout.buffer.write(data[i:i + 100_000])\n"
    )
    ti = plane.ti(1, argv=[PY, "-c", script])
    code, _, stderr = await _run(plane, ti)
    assert code == 0, stderr
    assert len(ti.log) == size
    assert bytes(ti.log) == random.Random(7).randbytes(size)


async def test_sigterm_is_forwarded_and_the_agent_exits_with_the_childs_code(
    plane: Plane,
) -> None:
    script = (
        "import signal, sys, time\n"
        "def term(*_):\n"
        "    print('child got SIGTERM', flush=True)\n"
        "    sys.exit(42)\n"
        "signal.signal(signal.SIGTERM, term)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    ti = plane.ti(1, argv=[PY, "-c", script])
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    await _until(lambda: b"ready\n" in ti.log, "the child is ready")
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 42, err
    assert b"child got SIGTERM\n" in ti.log
    assert ti.outcome is not None and ti.outcome["exit_code"] == 42
    assert "received SIGTERM and forwarded it" in ti.outcome["message"]


async def test_timeout_terminates_and_reports_timed_out(plane: Plane) -> None:
    ti = plane.ti(1, argv=["sleep", "60"], timeout=0.5)
    code, _, stderr = await _run(plane, ti)
    assert code == 128 + signal.SIGTERM, stderr
    assert ti.outcome == {
        "exit_code": 143,
        "oom_killed": False,
        "timed_out": True,
        "message": "timed out after 0.5s",
    }


async def test_timeout_escalates_to_sigkill_after_the_grace(plane: Plane) -> None:
    # sh ignores SIGTERM in its first instruction (a Python child would need its whole
    # start-up first, which a loaded machine can stretch past a short timeout, and
    # the SIGTERM would then kill it before it ignores it). The timeout leaves room.
    script = "trap '' TERM; while :; do sleep 1; done"
    ti = plane.ti(1, argv=["/bin/sh", "-c", script], timeout=2.0)
    code, _, stderr = await _run(plane, ti, LEOFLOW_AGENT_KILL_GRACE="0.5")
    assert code == 128 + signal.SIGKILL, stderr
    assert ti.outcome is not None and ti.outcome["timed_out"] and not ti.outcome["oom_killed"]


async def test_cancel_requested_on_heartbeat_stops_the_command(plane: Plane) -> None:
    ti = plane.ti(1, argv=[PY, "-c", "print('ready', flush=True); import time; time.sleep(60)"])
    proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
    await _until(lambda: b"ready\n" in ti.log, "the child is ready")
    ti.cancel_requested = True
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 143, err
    assert ti.outcome is not None and ti.outcome["message"] == "cancelled: cancellation requested"
    assert ti.heartbeats >= 1


async def test_oom_kill_is_reported_from_the_cgroup_counter(plane: Plane, tmp_path: Path) -> None:
    events = _fake_cgroup(tmp_path / "cgroup")
    script = (
        "import os, signal, sys\n"
        "p = sys.argv[1]\n"
        "text = open(p).read().replace('oom_kill 0', 'oom_kill 1')\n"
        "open(p, 'w').write(text)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    ti = plane.ti(1, argv=[PY, "-c", script, str(events)])
    code, _, stderr = await _run(plane, ti, LEOFLOW_CGROUP_ROOT=str(tmp_path / "cgroup"))
    assert code == 137, stderr
    assert ti.outcome == {
        "exit_code": 137,
        "oom_killed": True,
        "timed_out": False,
        "message": OOM_MESSAGE,
    }


async def test_sigkill_without_a_counter_rise_is_not_oom(plane: Plane, tmp_path: Path) -> None:
    _fake_cgroup(tmp_path / "cgroup", oom_kill=5)
    ti = plane.ti(1, argv=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    code, _, stderr = await _run(plane, ti, LEOFLOW_CGROUP_ROOT=str(tmp_path / "cgroup"))
    assert code == 137, stderr
    assert ti.outcome is not None and not ti.outcome["oom_killed"]
    assert ti.outcome["message"] == "killed by signal SIGKILL"
    assert "no cgroup OOM-kill counter" not in stderr


async def test_absent_cgroup_counter_is_said_and_no_oom_reported(
    plane: Plane, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    ti = plane.ti(1, argv=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    code, _, stderr = await _run(plane, ti, LEOFLOW_CGROUP_ROOT=str(tmp_path / "empty"))
    assert code == 137
    assert stderr.count("no cgroup OOM-kill counter found") == 1
    assert ti.outcome is not None and not ti.outcome["oom_killed"]


async def test_declared_secrets_reach_the_command_as_env(plane: Plane) -> None:
    (plane.secrets_dir / "db-password").write_text("hunter2")
    (plane.secrets_dir / "api.key").write_text("k\n")
    script = (
        "import os\n"
        # The values are compared inside: printed, the longer one would be masked.
        "print(os.environ['LEOFLOW_SECRET_DB_PASSWORD'] == 'hunter2')\n"
        "print(repr(os.environ['LEOFLOW_SECRET_API_KEY']))\n"
    )
    ti = plane.ti(1, argv=[PY, "-c", script], secrets=("db-password", "api.key"))
    code, _, stderr = await _run(plane, ti)
    assert code == 0, stderr
    assert bytes(ti.log) == b"True\n'k\\n'\n"
    assert "hunter2" not in stderr


async def test_unresolvable_secret_fails_the_task_without_running_it(
    plane: Plane, tmp_path: Path
) -> None:
    (plane.secrets_dir / "present").write_text("VALUE-NEVER-SHOWN")
    marker = tmp_path / "ran"
    ti = plane.ti(1, argv=["touch", str(marker)], secrets=("present", "absent-one"))
    code, _, stderr = await _run(plane, ti)
    assert code == 5
    assert not marker.exists()
    assert ti.outcome is not None and ti.state == "failed"
    assert "'absent-one'" in ti.outcome["message"]
    assert "VALUE-NEVER-SHOWN" not in ti.outcome["message"] + stderr


async def test_command_not_found(plane: Plane) -> None:
    ti = plane.ti(1, argv=["/nonexistent/program"])
    code, _, _ = await _run(plane, ti)
    assert code == 127
    assert ti.outcome is not None and "command not found" in ti.outcome["message"]


async def test_refused_ticket_exits_4_and_runs_nothing(plane: Plane, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ti = plane.ti(1, argv=["touch", str(marker)])
    env = plane.agent_env(LEOFLOW_AGENT_TICKET="not-a-ticket")
    proc = await plane.agent(env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 4 and "refused the ticket" in err.decode()
    assert not marker.exists() and ti.state == "queued"


async def test_unreachable_endpoint_retries_then_exits_3(plane: Plane) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when we leave: nothing listens there
    env = plane.agent_env(LEOFLOW_AGENT_TICKET="t", LEOFLOW_AGENT_CONNECT_TIMEOUT="1")
    env["LEOFLOW_AGENT_ENDPOINT"] = f"127.0.0.1:{port}"
    proc = await plane.agent(env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    message = err.decode()
    assert proc.returncode == 3, message
    assert f"could not reach the control plane at 127.0.0.1:{port}" in message
    attempts = int(message.split("could not reach")[1].split(": ")[1].split(" attempt")[0])
    assert attempts >= 2 and "over " in message


async def test_pool_runs_twenty_tasks_concurrently_with_distinct_sessions(
    plane: Plane,
) -> None:
    script = "import os, time; time.sleep(0.5); print(os.environ['WHO'])"
    tis = [plane.ti(i, argv=[PY, "-c", script], env={"WHO": f"task-{i}"}) for i in range(1, 21)]
    proc = await plane.agent(
        "--pool", "--events", env=plane.agent_env(), stdin=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None
    lines = [
        json.dumps({"op": "run", "key": f"{ti.ti_pk}:1", "ticket": plane.backend.ticket(ti)})
        for ti in tis
    ]
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    await proc.stdin.drain()
    await _until(lambda: sum(ti.state == "running" for ti in tis) >= 2, "two tasks running")
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    for ti in tis:
        assert bytes(ti.log) == f"task-{ti.ti_pk}\n".encode()
        assert ti.outcome is not None and ti.outcome["exit_code"] == 0
        writes = [w for w in plane.backend.writes_for(ti.ti_pk)]
        assert writes[0] == ("consume_ticket", ti.ti_pk, 1)
        assert {w[1] for w in writes} == {ti.ti_pk}
    events = [json.loads(line) for line in out.decode().splitlines()]
    finished = {e["key"]: e for e in events if e["event"] == "finished"}
    assert sorted(finished) == sorted(f"{i}:1" for i in range(1, 21))
    started_pids = {e["pid"] for e in events if e["event"] == "started"}
    assert len(started_pids) == 20


async def test_pool_dial_connects_before_any_task(plane: Plane, tmp_path: Path) -> None:
    """Lite says "dial" once its endpoint serves: the agent's connection is then open
    before the first task comes, not made on that task's time."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s.sock"))
    listener.listen(1)
    listener.setblocking(False)
    env = plane.agent_env(LEOFLOW_AGENT_ENDPOINT=f"unix:{tmp_path / 's.sock'}")
    proc = await plane.agent("--pool", env=env, stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    try:
        proc.stdin.write(b'{"op": "dial"}\n')
        await proc.stdin.drain()
        loop = asyncio.get_running_loop()
        conn, _ = await asyncio.wait_for(loop.sock_accept(listener), 30)
        conn.close()
    finally:
        proc.stdin.close()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        listener.close()
    assert proc.returncode == 0, err
    assert b"unknown op" not in err and b"no key" not in err


async def test_pool_cancel_and_bad_lines(plane: Plane) -> None:
    ti = plane.ti(1, argv=[PY, "-c", "print('ready', flush=True); import time; time.sleep(60)"])
    proc = await plane.agent("--pool", env=plane.agent_env(), stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    ticket = plane.backend.ticket(ti)
    proc.stdin.write(
        b"not json\n" + json.dumps({"op": "run", "key": "1:1", "ticket": ticket}).encode() + b"\n"
    )
    await proc.stdin.drain()
    await _until(lambda: b"ready\n" in ti.log, "the child is ready")
    proc.stdin.write(
        json.dumps({"op": "cancel", "key": "1:1", "reason": "user stop"}).encode() + b"\n"
    )
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0 and out == b""
    assert "stdin line 1: not JSON" in err.decode()
    assert ti.outcome is not None and ti.outcome["message"] == "cancelled: user stop"


async def test_pool_oom_goes_to_the_child_killed_by_sigkill(plane: Plane, tmp_path: Path) -> None:
    events = _fake_cgroup(tmp_path / "cgroup")
    victim_script = (
        "import os, signal, sys, time\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    time.sleep(0.01)\n"
        "p = sys.argv[1]\n"
        "text = open(p).read().replace('oom_kill 0', 'oom_kill 1')\n"
        "open(p, 'w').write(text)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    bystander_script = (
        "import os, sys, time\n"
        "open(sys.argv[2], 'w').close()\n"  # the victim starts its OOM while we run
        "while 'oom_kill 1' not in open(sys.argv[1]).read():\n"
        "    time.sleep(0.01)\n"
    )
    go = tmp_path / "go"
    victim = plane.ti(1, argv=[PY, "-c", victim_script, str(events), str(go)])
    bystander = plane.ti(2, argv=[PY, "-c", bystander_script, str(events), str(go)])
    env = plane.agent_env(LEOFLOW_CGROUP_ROOT=str(tmp_path / "cgroup"))
    proc = await plane.agent("--pool", env=env, stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    for ti in (victim, bystander):
        op = {"op": "run", "key": f"{ti.ti_pk}:1", "ticket": plane.backend.ticket(ti)}
        proc.stdin.write(json.dumps(op).encode() + b"\n")
    proc.stdin.close()
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err
    assert victim.outcome is not None and victim.outcome["oom_killed"]
    assert victim.outcome["message"] == OOM_MESSAGE
    assert bystander.outcome is not None and not bystander.outcome["oom_killed"]
    assert bystander.outcome["exit_code"] == 0
