"""A DAG folder's files, listed so that nothing in it can stop or block the listing.

The folder is someone's working tree: files and whole subfolders come and go while
it is read (a ``git checkout``, an rsync replacing a directory). Every step that
touches the disk (listing a folder, reading an entry's type) tolerates the entry
having vanished: it is simply not there this pass. An entry with a DAG file's name
that is not a regular file (a FIFO, a socket, a device, a symlink to one of them) is
never opened, since opening a FIFO blocks until a writer comes; it is listed with a
reason, for that file's import error. Symlinked folders are not followed, as
``Path.rglob`` did not.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from leoflow.dagfile.dbt_owned import is_dbt_file

DAG_FILE_SUFFIXES = (".yaml", ".yml")
DBT_PROJECT_FILE = "dbt_project.yml"

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a sentence."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def refusal(mode: int, symlink: bool) -> str:
    via = "a symlink to " if symlink else ""
    return f"not a regular file: {via}{kind_of(mode)}; a DAG file must be a regular file"


@dataclass(frozen=True)
class Entry:
    path: Path
    mtime: float
    size: int


@dataclass
class Listing:
    """A folder as one pass found it."""

    files: list[Entry] = field(default_factory=list)  # regular files with a DAG suffix
    refused: dict[Path, str] = field(default_factory=dict)  # DAG-named, not regular: why
    projects: set[Path] = field(default_factory=set)  # folders holding a dbt_project.yml

    def dag_files(self) -> list[Path]:
        """The DAG files, without dbt's own (below a dbt project, or named as only dbt
        names a file: ``dbt_owned``)."""
        return sorted(e.path for e in self.files if not is_dbt_file(e.path, self.projects))

    def refused_files(self) -> dict[Path, str]:
        return {p: why for p, why in self.refused.items() if not is_dbt_file(p, self.projects)}


def list_folder(folder: Path) -> Listing:
    """Every DAG-named entry below ``folder`` (or ``folder`` itself if it is a file)."""
    out = Listing()
    try:
        top = folder.stat()
    except OSError:
        return out
    if not stat.S_ISDIR(top.st_mode):  # one file named on its own: any name
        _take(out, folder, top, folder.is_symlink(), named=True)
        return out
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError:  # vanished, replaced by a file, unreadable: not there this pass
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                is_link = entry.is_symlink()
                if entry.is_dir(follow_symlinks=False):
                    pending.append(path)
                    continue
                if not entry.name.endswith(DAG_FILE_SUFFIXES):
                    continue
                info = entry.stat()  # follows a symlink: what would be opened
            except OSError:  # gone since the listing, or a symlink to nothing
                continue
            _take(out, path, info, is_link)
    return out


def _take(
    out: Listing, path: Path, info: os.stat_result, is_link: bool, *, named: bool = False
) -> None:
    if stat.S_ISDIR(info.st_mode) or not (named or path.name.endswith(DAG_FILE_SUFFIXES)):
        return  # a symlinked folder is not followed, whatever its name
    if not stat.S_ISREG(info.st_mode):
        out.refused[path] = refusal(info.st_mode, is_link)
        return
    out.files.append(Entry(path, info.st_mtime, info.st_size))
    if path.name == DBT_PROJECT_FILE:
        out.projects.add(path.parent)
