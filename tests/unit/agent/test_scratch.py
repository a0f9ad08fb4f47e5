"""Scratch directories made ahead on a thread: each fresh, private, used once, removed
when discarded, and none left behind at close."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

from leoflow.agent import scratch as scratch_module
from leoflow.agent.scratch import INPUTS, PREFIX, Scratch, remove_tree


def _until(predicate: object, what: str) -> None:
    for _ in range(3000):
        if callable(predicate) and predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _ours(base: Path) -> set[str]:
    return {p.name for p in base.iterdir() if p.name.startswith(PREFIX)}


def test_each_take_is_a_fresh_private_directory_and_one_waits_ready(tmp_path: Path) -> None:
    scratch = Scratch()
    try:
        taken = [scratch.take(str(tmp_path)) for _ in range(5)]
        assert len(set(taken)) == 5
        for root in taken:
            mode = os.lstat(root).st_mode
            assert stat.S_ISDIR(mode) and mode & 0o777 == 0o700 and Path(root).parent == tmp_path
            assert os.listdir(root) == []
        _until(lambda: len(_ours(tmp_path)) > 5, "a directory made ahead")
        with_inputs = scratch.take(str(tmp_path), inputs=True)
        assert os.listdir(with_inputs) == [INPUTS] and with_inputs not in taken
    finally:
        scratch.close()
    # Only what was taken is left: the ones made ahead went with the close.
    assert _ours(tmp_path) == {Path(p).name for p in [*taken, with_inputs]}


def test_a_discarded_directory_goes_with_its_contents(tmp_path: Path) -> None:
    scratch = Scratch()
    try:
        root = Path(scratch.take(str(tmp_path)))
        (root / "output.json").write_text("1")
        (root / "deep" / "er").mkdir(parents=True)
        scratch.discard(str(root))
        _until(lambda: not root.exists(), "the discarded directory removed")
    finally:
        scratch.close()
    assert _ours(tmp_path) == set()


def test_a_ready_directory_replaced_meanwhile_is_not_handed_out(tmp_path: Path) -> None:
    scratch = Scratch()
    try:
        first = scratch.take(str(tmp_path))
        _until(lambda: len(_ours(tmp_path)) == 2, "a directory made ahead")
        (ready,) = _ours(tmp_path) - {Path(first).name}
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        os.rmdir(tmp_path / ready)
        os.symlink(elsewhere, tmp_path / ready)  # planted where the ready one was
        second = scratch.take(str(tmp_path))
        assert Path(second).name != ready and not os.path.islink(second)
    finally:
        scratch.close()


def test_a_directory_goes_file_by_file_or_walked_when_the_command_added_to_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.json").write_text("1")
    remove_tree(str(root), [str(root / "a.json")])
    assert not root.exists()
    root.mkdir()
    (root / "a.json").write_text("1")
    (root / "left").mkdir()
    (root / "left" / "behind").write_text("x")
    remove_tree(str(root), [str(root / "a.json")])
    assert not root.exists()


def test_removals_never_queue_past_the_backlog(tmp_path: Path) -> None:
    """What is still queued when the process ends stays on the disk (it waits a moment,
    then exits without its teardown): past the backlog a removal happens at once."""
    scratch = Scratch()
    try:
        # A thread that takes no job: the queued removals wait, as behind one that
        # has fallen behind.
        idle = threading.Thread(target=lambda: None)
        idle.start()
        idle.join()
        scratch._thread = idle
        for i in range(scratch_module._BACKLOG):
            scratch._jobs.put(("remove", (str(tmp_path / f"gone{i}"), ())))
        root = tmp_path / "late"
        root.mkdir()
        (root / "a.json").write_text("1")
        scratch.discard(str(root), [str(root / "a.json")])
        assert not root.exists(), "removed where it was discarded"
        assert scratch._jobs.qsize() == scratch_module._BACKLOG
    finally:
        scratch.close()
