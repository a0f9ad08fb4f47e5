"""Warnings of a folder of DAGs about assets: a schedule on an asset no DAG of the folder
produces. Not an error: an external producer may post its events (the API, ``leoflow
assets emit``), but a typo in a URI would otherwise wait for ever without a word."""

from __future__ import annotations

from leoflow.dagfile.loader import FolderLoad
from leoflow.dagfile.problems import Problem, located
from leoflow.dagfile.yamldoc import read_document


def unproduced_assets(result: FolderLoad) -> list[tuple[str, Problem]]:
    """``(file, problem)`` per asset a schedule names that no loaded DAG produces."""
    produced = {
        uri
        for loaded in result.dags.values()
        for task in loaded.spec.tasks.values()
        for uri in task.produces
    }
    out: list[tuple[str, Problem]] = []
    for _, loaded in sorted(result.dags.items()):
        missing = [uri for uri in loaded.spec.schedule_assets() if uri not in produced]
        if not missing:
            continue
        lines = read_document(loaded.source).lines
        for uri in missing:
            message = (
                f"warning: no DAG here produces asset {uri!r}: {loaded.spec.dag_id} runs only "
                f"when an external producer posts its event (leoflow assets emit {uri})"
            )
            out.append((str(loaded.path), located(lines, ("schedule", "assets"), message)))
    return out
