"""Where a dbt task in a pod finds its project: ``dbt.image_dir`` maps the DAG file's folder.

The manifest is read from the project on the disk the DAG file is loaded from (a
checkout in CI, a laptop); the task runs in the DAG image, which may hold the same
files elsewhere. ``image_dir`` is the DAG file's folder as the image has it: every
path the section gives relative to the DAG file (``project_dir``, ``profiles_dir``, a
relative ``executable``) is named below it in the tasks' commands and env, and the
partial parse a task starts from is the one the image's project ships
(``target/partial_parse.msgpack``, from ``dbt parse`` at build time). Absolute paths
in the section are image paths already and stay as written.

Applies only where tasks run as pods (the kubernetes executor, ``leoflow dags
apply``); a subprocess on this host runs the project where it is.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace

from leoflow.domain.dbt import DbtSpec, Paths


def _in_image(image_dir: str, value: str) -> str:
    return value if posixpath.isabs(value) else posixpath.normpath(posixpath.join(image_dir, value))


def image_paths(spec: DbtSpec, paths: Paths, executable: str) -> tuple[Paths, str]:
    """``paths`` and ``executable`` as the pod sees them; unchanged without ``image_dir``."""
    image_dir = spec.image_dir
    if image_dir is None:
        return paths, executable
    project_dir = _in_image(image_dir, spec.project_dir)
    mapped = replace(
        paths,
        project_dir=project_dir,
        profiles_dir=_in_image(image_dir, spec.profiles_dir) if spec.profiles_dir else None,
        partial_parse=posixpath.join(project_dir, "target", "partial_parse.msgpack"),
    )
    if "/" in spec.executable:
        executable = _in_image(image_dir, spec.executable)
    return mapped, executable
