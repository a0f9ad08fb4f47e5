"""What ``leoflow lite`` watches of a dbt project: the files dbt parses, by stat alone.

The folder watcher re-reads its DAGs when a DAG file changes; a dbt DAG also
changes when only its project does (a new model, an edited ``.yml``, a seed). So
the watcher's scan adds, for every dbt project it knows, each parsed file's path,
mtime and size: no file is read, and the manifest behind the DAG is still cached
by the content of those files (``leoflow.dbt.project``), so a touch with nothing
changed costs one load from the cache.
"""

from __future__ import annotations

import os
from pathlib import Path

from leoflow.dbt.project import parsed_files

Stamp = tuple[str, float, int]


def project_stamps(project_dir: Path) -> list[Stamp]:
    """(path, mtime, size) of every file dbt parses below ``project_dir``, in order."""
    out: list[Stamp] = []
    for path in parsed_files(project_dir):
        try:
            stat = os.stat(path)
        except OSError:
            continue  # removed mid-scan: the next scan sees it gone
        out.append((path, stat.st_mtime, stat.st_size))
    return out
