"""The manifest behind a ``dbt:`` section: found, or built by ``dbt parse``, and cached.

Which manifest is used, first match wins:

1. the cache: ``<cache>/<project key>/manifest-<fingerprint>.json``, where the
   fingerprint hashes the content of every file dbt reads to parse (``.sql``, ``.yml``,
   ``.yaml``, ``.py``, ``.md``, ``.jinja`` below the project, installed packages
   included, ``target/`` and ``logs/`` left out; a seed's ``.csv`` by its path), the
   profile target and the dbt executable named;
2. the project's own ``target/manifest.json`` when it is newer than every one of
   those files (a DAG image built with ``dbt parse`` ships one, and a scheduler image
   has no dbt to run);
3. ``dbt parse``, run with its target and log paths in the cache (never in the
   project, which may be read-only), its result copied to the cache.

The manifest is read as JSON only: dbt is never imported. Every file is read through
``leoflow.dbt.files``: regular files only, each within a bound, or a ManifestError
naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoflow.dbt.files import (
    MAX_MANIFEST_BYTES,
    MAX_PARSED_FILE_BYTES,
    RefusedFile,
    digest_bounded,
    read_bounded,
    regular_stat,
)
from leoflow.dbt.image import image_paths
from leoflow.dbt.parse_progress import ParseTimedOut, Progress, run_parse
from leoflow.dbt.wave import flock
from leoflow.domain.dbt import Expansion, Paths, expand
from leoflow.domain.dbt_section import DbtExpander, DbtRequest
from leoflow.domain.dbt_waves import ENV_PLAN, ENV_RUNS, ENV_WAVE, wave_of

PARSE_TIMEOUT = 600.0
SCRATCH_DIR = "/tmp/leoflow-dbt"
PARSED_SUFFIXES = frozenset({".sql", ".yml", ".yaml", ".csv", ".py", ".md", ".jinja"})
SKIPPED_DIRS = frozenset({"target", "logs", ".git", "__pycache__", "node_modules", ".venv"})
# What a dbt parse needs to render profiles.yml when a secret is not at hand: parsing
# reads no warehouse, so the value is never used.
PARSE_SECRET_PLACEHOLDER = "leoflow-dbt-parse-placeholder"
# In every fingerprint: a change to what slim_manifest keeps makes older caches unused.
SLIM_FORMAT = "slim-2"


def default_cache_dir() -> Path:
    home = os.environ.get("LEOFLOW_HOME") or os.path.join(os.path.expanduser("~"), ".leoflow")
    return Path(home) / "dbt-cache"


def secret_env_name(name: str) -> str:
    """The same rule as the agent's: ``LEOFLOW_SECRET_<NAME>``, non-alphanumerics as ``_``."""
    return "LEOFLOW_SECRET_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else "_" for c in name
    )


class ManifestError(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class Fingerprint:
    digest: str
    newest_mtime: float


def parsed_files(project_dir: Path) -> Iterator[str]:
    """Every file dbt parses below ``project_dir`` (``target/``, ``logs/`` left out), in order."""
    for root, dirs, files in os.walk(str(project_dir)):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            if os.path.splitext(name)[1] in PARSED_SUFFIXES:
                yield os.path.join(root, name)


def fingerprint(
    project_dir: Path, extra: str = "", limit: int = MAX_PARSED_FILE_BYTES
) -> Fingerprint:
    """Hash of every file dbt parses, in a stable order, plus ``extra``.

    A seed (``.csv``) counts by its path alone: its content changes nothing Leoflow
    keeps of the manifest (``slim_manifest``), and a seed may be hundreds of MB. A
    file that is not a regular file (a FIFO, a device, a symlink to one), or holds
    more than ``limit`` bytes, is a ManifestError naming it: dbt could not parse it
    either. A file removed meanwhile is left out (the next scan sees it gone)."""
    digest = hashlib.sha256(f"{SLIM_FORMAT}\0{extra}".encode())
    newest = 0.0
    cut = len(str(project_dir)) + 1
    for path in parsed_files(project_dir):
        try:
            if path.endswith(".csv"):
                content, mtime = b"", regular_stat(path).st_mtime
            else:
                content, mtime = digest_bounded(path, limit, "a file of a dbt project")
        except RefusedFile as exc:
            raise ManifestError("project_dir", f"dbt project file {exc}") from exc
        except OSError:
            continue
        newest = max(newest, mtime)
        digest.update(path[cut:].encode() + b"\0")
        digest.update(content)
    return Fingerprint(digest.hexdigest(), newest)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with flock(str(path)):
        yield


def _error_lines(output: str, limit: int = 6) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    # dbt prefixes every console line with a time stamp; the message is what follows.
    lines = [
        line.split("  ", 1)[1] if line[:2].isdigit() and "  " in line else line for line in lines
    ]
    for index, line in enumerate(lines):
        if line.startswith("Encountered an error"):
            return " ".join(lines[index + 1 : index + 1 + limit])
    return " ".join(lines[-limit:])


@dataclass(frozen=True)
class Project:
    """A dbt project as a DAG file names it, resolved against that file."""

    project_dir: Path
    profiles_dir: Path | None
    target: str | None
    executable: str

    def key(self) -> str:
        text = f"{self.project_dir}\0{self.profiles_dir}\0{self.target}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def parse_argv(self) -> list[str]:
        argv = [self.executable, "parse", "--project-dir", str(self.project_dir)]
        if self.profiles_dir is not None:
            argv += ["--profiles-dir", str(self.profiles_dir)]
        if self.target:
            argv += ["--target", self.target]
        return argv


def partial_parse_file(project: Project, cache_dir: Path) -> str | None:
    """dbt's partial parse beside the manifest in use: the project's own, else our parse's."""
    for candidate in (
        project.project_dir / "target" / "partial_parse.msgpack",
        cache_dir / project.key() / "target" / "partial_parse.msgpack",
    ):
        if candidate.is_file():
            return str(candidate)
    return None


def load_manifest(
    project: Project,
    cache_dir: Path,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The project's manifest as a dict; ManifestError names the field at fault."""
    try:
        regular_stat(str(project.project_dir / "dbt_project.yml"))
    except RefusedFile as exc:
        raise ManifestError("project_dir", f"dbt project file {exc}") from exc
    except OSError as exc:
        what = "does not exist" if not project.project_dir.exists() else "has no dbt_project.yml"
        raise ManifestError("project_dir", f"dbt project {project.project_dir} {what}") from exc
    profiles = b""
    if project.profiles_dir is not None:
        profiles_yml = project.profiles_dir / "profiles.yml"
        if not (profiles_yml.exists() or profiles_yml.is_symlink()):
            raise ManifestError(
                "profiles_dir", f"{project.profiles_dir} has no profiles.yml for the dbt project"
            )
        profiles = _read_file(profiles_yml, "profiles_dir", "a profiles.yml")
    extra = f"{project.target}\0{project.executable}\0{hashlib.sha256(profiles).hexdigest()}"
    print_ = fingerprint(project.project_dir, extra)
    home = cache_dir / project.key()
    # v2: the slim manifest keeps where each node is built (its asset, leoflow.domain.dbt_assets)
    cached = home / f"manifest-v2-{print_.digest}.json"
    if cached.is_file():
        return _read(cached)
    shipped = project.project_dir / "target" / "manifest.json"
    with contextlib.suppress(OSError):
        if shipped.is_file() and shipped.stat().st_mtime >= print_.newest_mtime:
            return _keep(_read(shipped), home, cached)
    with _locked(home / ".lock"):
        if cached.is_file():  # another loader parsed it while we waited
            return _read(cached)
        _parse(project, home, dict(env or {}), progress)
        return _keep(_read(home / "target" / "manifest.json"), home, cached)


def _keep(manifest: dict[str, Any], home: Path, cached: Path) -> dict[str, Any]:
    """Cache the part of the manifest the translation reads: a tenth of its size or less."""
    slim = slim_manifest(manifest)
    with contextlib.suppress(OSError):
        home.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(slim, separators=(",", ":")))
        os.replace(tmp, cached)
        for old in home.glob("manifest-*.json"):
            if old != cached:
                old.unlink(missing_ok=True)
    return slim


_NODE_KEYS = (
    "resource_type", "name", "package_name", "fqn", "tags", "original_file_path", "source_name",
    "version", "database", "schema", "alias", "identifier",
)  # fmt: skip


def slim_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    def slim(node: Mapping[str, Any]) -> dict[str, Any]:
        out = {key: node[key] for key in _NODE_KEYS if key in node}
        config = node.get("config") or {}
        out["config"] = {k: config[k] for k in ("materialized", "tags") if k in config}
        out["depends_on"] = {"nodes": (node.get("depends_on") or {}).get("nodes") or []}
        return out

    return {
        "metadata": {
            key: (manifest.get("metadata") or {}).get(key)
            for key in ("project_name", "adapter_type")
        },
        "nodes": {uid: slim(n) for uid, n in (manifest.get("nodes") or {}).items()},
        "sources": {uid: slim(n) for uid, n in (manifest.get("sources") or {}).items()},
    }


def _read_file(path: Path, field: str, what: str, limit: int = MAX_PARSED_FILE_BYTES) -> bytes:
    try:
        return read_bounded(str(path), limit, what)
    except RefusedFile as exc:
        raise ManifestError(field, str(exc)) from exc
    except OSError as exc:
        raise ManifestError(field, f"cannot read {path}: {exc}") from exc


def _read(path: Path, limit: int = MAX_MANIFEST_BYTES) -> dict[str, Any]:
    data = _read_file(path, "project_dir", "a dbt manifest", limit)
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ManifestError("project_dir", f"cannot read dbt manifest {path}: {exc}") from exc
    if not isinstance(manifest, dict) or "nodes" not in manifest:
        raise ManifestError("project_dir", f"{path} is not a dbt manifest (no 'nodes')")
    problem = _shape_problem(manifest)
    if problem is not None:
        raise ManifestError("project_dir", f"{path} is not a dbt manifest: {problem}")
    return manifest


def _shape_problem(manifest: Mapping[str, Any]) -> str | None:
    """What the translation would trip on: nodes and sources must map ids to mappings."""
    for key in ("nodes", "sources"):
        section = manifest.get(key)
        if section is None:
            continue
        if not isinstance(section, dict):
            return f"{key} is not a mapping"
        for uid, node in section.items():
            if not isinstance(node, dict):
                return f"{key}.{uid} is not a mapping"
    return None


def _parse(
    project: Project, home: Path, env: dict[str, str], progress: Progress | None = None
) -> None:
    run_env = {**os.environ, **env}
    run_env.update(
        DBT_TARGET_PATH=str(home / "target"),
        DBT_LOG_PATH=str(home / "logs"),
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        DBT_USE_COLORS="false",
    )
    try:
        code, output = run_parse(
            project.parse_argv(),
            env=run_env,
            cwd=project.project_dir,
            timeout=PARSE_TIMEOUT,
            progress=progress,
        )
    except FileNotFoundError as exc:
        raise ManifestError(
            "executable",
            f"the project has no fresh target/manifest.json and the dbt executable "
            f"{project.executable!r} was not found to build one with dbt parse (install dbt, "
            f"name it in dbt.executable, or ship target/manifest.json from dbt parse)",
        ) from exc
    except ParseTimedOut as exc:
        raise ManifestError(
            "project_dir", f"dbt parse did not finish within {PARSE_TIMEOUT:g}s"
        ) from exc
    if code != 0 or not (home / "target" / "manifest.json").is_file():
        raise ManifestError(
            "project_dir", f"dbt parse failed (exit {code}): {_error_lines(output)}"
        )


def _resolve(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def expander(
    cache_dir: Path | None = None,
    scratch_dir: str = SCRATCH_DIR,
    *,
    in_pods: bool = False,
    progress: Progress | None = None,
) -> DbtExpander:
    """What ``LoadOptions.dbt`` takes: dbt sections read from disk, manifests cached here.

    ``in_pods``: the tasks run as pods, so their commands name the project where the
    DAG image holds it (``dbt.image_dir``, leoflow/dbt/image.py); pods share no
    ``scratch_dir``, so ``batch: wave`` does not batch there (each node runs alone).
    ``progress`` hears of a ``dbt parse`` as it runs (a CLI prints it on stderr)."""
    cache = cache_dir or default_cache_dir()

    def run(request: DbtRequest) -> Expansion:
        spec = request.spec
        base = Path(request.dag_file).parent.resolve()
        executable = spec.executable
        if os.sep in executable and not os.path.isabs(executable):
            executable = str(_resolve(base, executable))
        project = Project(
            project_dir=_resolve(base, spec.project_dir),
            profiles_dir=_resolve(base, spec.profiles_dir) if spec.profiles_dir else None,
            target=spec.target,
            executable=executable,
        )
        env = dict(request.env)
        for name in request.secrets:
            env.setdefault(secret_env_name(name), PARSE_SECRET_PLACEHOLDER)
        try:
            manifest = load_manifest(project, cache, env, progress)
        except ManifestError as exc:
            return Expansion(problems=[(("dbt", exc.field), str(exc))])
        paths = Paths(
            project_dir=str(project.project_dir),
            profiles_dir=str(project.profiles_dir) if project.profiles_dir else None,
            scratch_dir=scratch_dir,
            partial_parse=partial_parse_file(project, cache),
        )
        if in_pods:
            paths, executable = image_paths(spec, paths, executable)
        resolved = spec.model_copy(update={"executable": executable})
        expansion = expand(
            resolved,
            manifest,
            dag_id=request.dag_id,
            paths=paths,
            ordinary_tasks=request.ordinary_tasks,
        )
        if expansion.waves is not None and not in_pods and not expansion.problems:
            _wire_waves(expansion, cache / project.key(), f"{scratch_dir}/{request.dag_id}/runs")
        return expansion

    return run


def _wire_waves(expansion: Expansion, home: Path, runs: str) -> None:
    """Write the wave plan beside the manifest and point every dbt task at it."""
    plan = expansion.waves or {}
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    path = home / f"waves-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.is_file():
        home.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    level_of = wave_of(plan)
    for task_id, task in expansion.tasks.items():
        env = task["env"]
        env[ENV_RUNS] = runs
        if task_id in level_of:
            env[ENV_PLAN] = str(path)
            env[ENV_WAVE] = level_of[task_id]
