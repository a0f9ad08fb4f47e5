"""Which YAML files below a DAG folder are dbt's, not DAG files.

The README's dbt layout keeps a dbt project and its ``profiles.yml`` beside the DAG
file that names them, so the folder scan meets dbt's own YAML: it skips those files
instead of reporting them as broken DAG files. dbt's are:

- any file below a dbt project (a folder holding ``dbt_project.yml``): schema files
  under ``models/``, ``target/``, ``logs/``, ``dbt_packages/``;
- wherever it is, a file with a name only dbt gives a file: ``profiles.yml`` and the
  ``.user.yml`` dbt writes beside it, ``dbt_project.yml``, ``packages.yml``,
  ``dependencies.yml``, ``package-lock.yml``, ``selectors.yml``.

So a DAG file must not have one of those names; any other YAML file outside a dbt
project is a DAG file, and reported when broken.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

PROJECT_FILE = "dbt_project.yml"
DBT_FILE_NAMES = frozenset(
    {
        PROJECT_FILE,
        "profiles.yml",
        ".user.yml",
        "packages.yml",
        "dependencies.yml",
        "package-lock.yml",
        "selectors.yml",
    }
)


def is_dbt_file(path: Path, projects: Collection[Path]) -> bool:
    """Whether ``path`` is dbt's: so named, or below one of the dbt ``projects`` folders."""
    return path.name in DBT_FILE_NAMES or any(parent in projects for parent in path.parents)
