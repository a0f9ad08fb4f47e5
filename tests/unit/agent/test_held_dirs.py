"""Lite's directories in TMPDIR: each is held (a shared flock) by the processes that
use it, and a sweep removes only ours that nobody holds, however their holders ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leoflow.agent import held_dirs


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_held_directory_stays_and_goes_once_released(tmpdir_env: Path) -> None:
    path = held_dirs.make("leoflow-lite-", mode=0o711)
    assert Path(path).parent == tmpdir_env and (os.stat(path).st_mode & 0o777) == 0o711
    assert held_dirs.sweep(min_age=0) == []
    held_dirs.release(path)
    assert held_dirs.sweep(min_age=0) == [path]
    assert not os.path.exists(path)


def test_one_held_by_another_process_stays_until_that_process_is_killed(
    tmpdir_env: Path,
) -> None:
    path = tmpdir_env / "leoflow-agent-abc"
    (path / "try").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys; from leoflow.agent import held_dirs; "
            f"assert held_dirs.hold({str(path)!r}); print('held', flush=True); sys.stdin.read()"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        _age(path, 3600)
        assert held_dirs.sweep() == []
        assert path.exists()
        assert held_dirs.hold(str(path))  # a second holder: locks are shared
        held_dirs.release(str(path))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert held_dirs.sweep() == [str(path)]
    assert not path.exists()


def test_sweep_takes_only_our_old_directories(tmpdir_env: Path) -> None:
    kept = []
    for name in ("leoflow-io-x", "other-dir", "leoflow-run-young"):
        (tmpdir_env / name).mkdir()
        kept.append(name)
    (tmpdir_env / "leoflow-run-file").write_text("x")
    kept.append("leoflow-run-file")
    target = tmpdir_env / "elsewhere"
    target.mkdir()
    kept.append("elsewhere")
    (tmpdir_env / "leoflow-agent-link").symlink_to(target, target_is_directory=True)
    kept.append("leoflow-agent-link")
    for name in ("leoflow-io-x", "other-dir", "leoflow-run-file", "elsewhere"):
        _age(tmpdir_env / name, 3600)
    (tmpdir_env / "leoflow-run-old").mkdir()
    _age(tmpdir_env / "leoflow-run-old", 3600)
    assert held_dirs.sweep() == [str(tmpdir_env / "leoflow-run-old")]
    assert sorted(p.name for p in tmpdir_env.iterdir()) == sorted(kept)


def test_make_refuses_a_prefix_sweep_would_never_take(tmpdir_env: Path) -> None:
    with pytest.raises(ValueError, match="leoflow-tmp-"):
        held_dirs.make("leoflow-tmp-")
    assert list(tmpdir_env.iterdir()) == []
