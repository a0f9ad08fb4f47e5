"""A DAG folder read while it changes, and entries that are not regular files: real
files, real FIFOs and sockets, real threads replacing subfolders."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from leoflow.dagfile.file_text import read_dag_text
from leoflow.dagfile.loader import load_dag_folder
from leoflow.dagfile.problems import DagFileError
from leoflow.dagfile.walk import list_folder

GOOD = "dag_id: {name}\ntasks:\n  a: {{command: echo}}\n"


def _errors(folder: Path) -> dict[str, str]:
    return {err.path.name: str(err) for err in load_dag_folder(folder).errors}


def test_fifos_sockets_devices_and_symlinks_to_them_are_import_errors_never_opened(
    tmp_path: Path,
) -> None:
    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    sub = tmp_path / "sub"
    sub.mkdir()
    os.mkfifo(sub / "pipe.yaml")
    (tmp_path / "to-pipe.yml").symlink_to(sub / "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nothing-here")
    (tmp_path / "not-a-dag.txt").symlink_to("/dev/zero")  # not a DAG name: not looked at
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock.yaml"))
        loaded = load_dag_folder(tmp_path)
    assert sorted(loaded.dags) == ["good"]
    errors = {err.path.name: str(err) for err in loaded.errors}
    assert sorted(errors) == ["pipe.yaml", "sock.yaml", "to-pipe.yml", "zero.yaml"]
    assert "not a regular file: a FIFO (named pipe)" in errors["pipe.yaml"]
    assert "not a regular file: a symlink to a FIFO (named pipe)" in errors["to-pipe.yml"]
    assert "a symlink to a character device" in errors["zero.yaml"]
    assert "not a regular file: a socket" in errors["sock.yaml"]
    assert str(sub / "pipe.yaml") in errors["pipe.yaml"]


def test_a_fifo_swapped_in_after_the_listing_is_refused_at_open_without_blocking(
    tmp_path: Path,
) -> None:
    # What a reader meets when the entry a listing saw as a file is a FIFO by the open.
    path = tmp_path / "swap.yaml"
    os.mkfifo(path)
    with pytest.raises(DagFileError, match="not a regular file: a FIFO"):
        read_dag_text(path)


def test_a_file_that_vanished_after_the_listing_is_skipped_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    listing = list_folder(tmp_path)
    (tmp_path / "good.yaml").unlink()
    assert listing.dag_files() == [tmp_path / "good.yaml"]
    loaded = load_dag_folder(tmp_path)
    assert loaded.dags == {} and loaded.errors == []


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_subfolders_replaced_while_the_folder_is_read_never_raise(tmp_path: Path) -> None:
    (tmp_path / "top.yaml").write_text(GOOD.format(name="top"))
    stop = threading.Event()
    replaced = [0]

    def churn() -> None:
        # What a checkout or an rsync does: whole subtrees removed and made again.
        while not stop.is_set():
            for i in range(4):
                sub = tmp_path / f"team{i}"
                shutil.rmtree(sub, ignore_errors=True)
                deep = sub / "a" / "b" / "c"
                deep.mkdir(parents=True, exist_ok=True)
                for j in range(5):
                    (deep / f"d{j}.yaml").write_text(GOOD.format(name=f"t{i}_{j}"))
            replaced[0] += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        scans = 0
        while scans < 100 or replaced[0] < 10:
            loaded = load_dag_folder(tmp_path)
            assert "top" in loaded.dags
            assert all("no such file" not in str(err) for err in loaded.errors), loaded.errors
            scans += 1
    finally:
        stop.set()
        worker.join()


def test_a_symlinked_folder_is_not_followed_and_a_loop_is_harmless(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.yaml").write_text(GOOD.format(name="x"))
    (tmp_path / "a" / "loop").symlink_to(tmp_path)
    (tmp_path / "dir.yaml").symlink_to(tmp_path / "a")
    loaded = load_dag_folder(tmp_path)
    assert sorted(loaded.dags) == ["x"]
    assert loaded.errors == []
