"""Two tasks at once under Lite's real pool agent: the second tries every way a local
process has to read the first one's secret while it runs — ``/proc/*/environ``,
``/proc/*/fd``, ``/proc/*/cmdline``, ``/proc/PID/mem``, its scratch directory, its
output and temporary files. With one uid per task (``task_uids``) each is refused;
with one user for all (``task_user``) the environment is readable, as the README says."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from leoflow.agent.task_uids import kill_all_of, running
from leoflow.domain.states import RunState
from tests.integration.scheduler.test_task_isolation import runtime

__all__ = ["runtime"]  # the fixture: Lite's runtime on a private home


def _python_anyone_runs() -> str:
    """An interpreter every uid may run (ours may sit under a private /root)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        parents = Path(candidate).resolve().parents
        if all(p.stat().st_mode & 0o001 for p in parents) and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("no Python that other users may run: tasks here run as other uids")


PY = json.dumps(_python_anyone_runs())
SECRET = "peer-must-not-read-0f9d2c"
UIDS = "61184-61199"

# Task A: holds the secret in its environment, in its output and in a temporary file;
# says where it is, then waits (bounded) until B has looked.
HOLDER = r"""
import json, os, pathlib, sys, tempfile, time
meet = pathlib.Path(sys.argv[1])
with open(os.environ['LEOFLOW_OUTPUT'], 'w') as out:
    json.dump({'secret': os.environ['LEOFLOW_SECRET_API_KEY']}, out)
    out.flush()
    tmp = tempfile.NamedTemporaryFile('w', delete=False)
    tmp.write(os.environ['LEOFLOW_SECRET_API_KEY']); tmp.flush()
    where = {'pid': os.getpid(), 'home': os.environ['HOME'], 'output': out.name,
             'tmp': tmp.name, 'reason': os.environ['LEOFLOW_EXIT_REASON_FILE'],
             'uid': os.getuid()}
    (meet / 'a.tmp').write_text(json.dumps(where)); (meet / 'a.tmp').chmod(0o644)
    (meet / 'a.tmp').rename(meet / 'a')
    for _ in range(6000):
        if (meet / 'b-done').exists():
            break
        time.sleep(0.01)
"""
# Task B: every way in; prints what it could read and whether the secret was in it.
PEER = r"""
import json, os, pathlib, sys, time
meet = pathlib.Path(sys.argv[1]); secret = sys.argv[2][::-1].encode()  # not in our argv
for _ in range(6000):
    if (meet / 'a').exists():
        break
    time.sleep(0.01)
a = json.loads((meet / 'a').read_text())
report = {'uid': os.getuid(), 'a_uid': a['uid'], 'a_pid': a['pid'], 'read': [], 'found': []}
def attempt(path, how=lambda p: open(p, 'rb').read()):
    try:
        data = how(path)
    except OSError:
        return
    report['read'].append(path)
    if secret in (data if isinstance(data, bytes) else repr(data).encode()):
        report['found'].append(path)
pid = a['pid']
for name in os.listdir('/proc'):
    if name.isdigit():
        for part in ('environ', 'cmdline'):
            attempt(f'/proc/{name}/{part}')
        attempt(f'/proc/{name}/fd', os.listdir)
        try:
            fds = os.listdir(f'/proc/{name}/fd')
        except OSError:
            fds = []
        for fd in fds:
            attempt(f'/proc/{name}/fd/{fd}')
attempt(f'/proc/{pid}/mem')
for key in ('output', 'tmp', 'reason'):
    attempt(a[key])
attempt(a['home'], os.listdir)
for root, dirs, files in os.walk(a['home']):
    for f in files:
        attempt(os.path.join(root, f))
print(json.dumps(report), flush=True)
(meet / 'b-done').write_text('')
"""


def _dag(meet: Path) -> str:
    return f"""
dag_id: peers
tasks:
  a:
    secrets: [api_key]
    command: [{PY}, "-c", {json.dumps(HOLDER)}, {json.dumps(str(meet))}]
  b:
    command: [{PY}, "-c", {json.dumps(PEER)}, {json.dumps(str(meet))}, {json.dumps(SECRET[::-1])}]
"""


def _need_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs the tests as root: switching uids needs it")
        pytest.skip("switching a task's uid needs root (CI runs this as root)")


async def _peer_report(runtime: Any, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    # Both tasks, whatever their uid, meet here (pytest's tmp_path is root's alone).
    meet = Path(tempfile.mkdtemp(prefix="leoflow-meet-"))
    os.chmod(meet, 0o777)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api_key").write_text(SECRET)
    try:
        return await _run_peers(runtime, meet, **overrides)
    finally:
        shutil.rmtree(meet)


async def _run_peers(runtime: Any, meet: Path, **overrides: Any) -> dict[str, Any]:
    rt = await runtime(_dag(meet), **overrides)
    row = await rt.scheduler.trigger("peers")
    final = await rt.scheduler.wait_run(row.pk)
    tis = {t.task_id: t for t in await rt.store.list_task_instances(run_pk=row.pk)}
    log = (await rt.store.read_log(tis["b"].pk, 1)).decode()
    assert final.state is RunState.SUCCESS, log
    report: dict[str, Any] = json.loads(log.splitlines()[-1])
    return report


async def test_with_a_uid_per_task_a_peer_reads_nothing_of_a_running_task(
    runtime: Any, tmp_path: Path
) -> None:
    _need_root()
    report = await _peer_report(runtime, tmp_path, task_uids=UIDS)
    first, last = (int(n) for n in UIDS.split("-"))
    assert report["uid"] != report["a_uid"]
    assert first <= report["uid"] <= last and first <= report["a_uid"] <= last
    assert report["found"] == []
    a = f"/proc/{report['a_pid']}"
    # A's command line is public (any process's is); its environment, descriptors and
    # memory are not, nor its directory, output, temporary file or exit reason.
    assert f"{a}/cmdline" in report["read"]
    assert [p for p in report["read"] if p.startswith(f"{a}/")] == [f"{a}/cmdline"]
    assert [p for p in report["read"] if not p.startswith("/proc/")] == []


async def test_with_one_task_user_a_peer_reads_a_running_tasks_environment(
    runtime: Any, tmp_path: Path
) -> None:
    """What the README says ``task_user`` does not give: tasks apart from each other."""
    _need_root()
    report = await _peer_report(runtime, tmp_path, task_user="nobody")
    assert report["uid"] == report["a_uid"]
    assert any(p.endswith("/environ") for p in report["found"])


def test_kill_all_of_leaves_nothing_running_under_a_uid() -> None:
    _need_root()
    uid = 61199
    daemon = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 600 & sleep 600"], user=uid, group=uid, start_new_session=True
    )
    try:
        assert kill_all_of(uid)
        assert daemon.wait(30) == -9
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


LEAVER = """
ls /tmp/leoflow-left-by-a-try 2>/dev/null && echo SEEN
setsid sleep 600 >/dev/null 2>&1 < /dev/null &
echo $! > "$1/daemon-$LEOFLOW_RUN_ID"
echo secret > /tmp/leoflow-left-by-a-try
"""


async def test_what_a_try_leaves_under_its_uid_is_gone_before_the_uid_is_reused(
    runtime: Any, tmp_path: Path
) -> None:
    _need_root()
    meet = Path(tempfile.mkdtemp(prefix="leoflow-meet-"))
    os.chmod(meet, 0o777)
    try:
        rt = await runtime(
            f"dag_id: leaves\ntasks:\n  t:\n    command: [/bin/sh, -c, {json.dumps(LEAVER)}, sh,"
            f" {json.dumps(str(meet))}]\n",
            task_uids="61190-61190",  # one uid: every try gets the same one
        )
        for number in (1, 2):
            row = await rt.scheduler.trigger("leaves")
            final = await rt.scheduler.wait_run(row.pk)
            (ti,) = await rt.store.list_task_instances(run_pk=row.pk)
            log = await rt.store.read_log(ti.pk, 1)
            assert final.state is RunState.SUCCESS, log
            # The daemon that left the try's process group was killed as the try ended.
            pid = await asyncio.to_thread(_daemon_pid, meet / f"daemon-{final.run_id}")
            assert not running(pid), f"try {number} left {pid} running"
            # The second try (same uid) never saw the file the first left in /tmp.
            assert b"SEEN" not in log, number
    finally:
        shutil.rmtree(meet)
        with contextlib.suppress(FileNotFoundError):
            os.unlink("/tmp/leoflow-left-by-a-try")


def _daemon_pid(path: Path) -> int:
    return int(path.read_text())
