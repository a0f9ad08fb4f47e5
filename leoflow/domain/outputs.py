"""Small outputs between tasks: what a try may hand to its downstream tasks.

A command writes one JSON value (at most ``OUTPUT_LIMIT`` bytes) to the file named
by ``$LEOFLOW_OUTPUT``; its agent sends it with the completion and the scheduler
stores it with the task instance. Each downstream task gets every direct
upstream's output, as ``LEOFLOW_INPUT_<TASK>`` and as ``<task>.json`` in
``$LEOFLOW_INPUTS_DIR`` (like Airflow's XCom pull of the upstream's return value).

Pure: the checks the scheduler makes (the agent is not trusted to have made them)
and what each downstream gets; the agent (stdlib only) gives them to the command
(``leoflow.agent.outputs``, which also holds the naming rule).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from leoflow.domain.reasons import EndReason

OUTPUT_LIMIT = 64 * 1024
# All of one task's inputs together (a mapped upstream gives one output per item): they
# travel in one agent message, whose limit is 4 MiB.
INPUTS_LIMIT = 1024 * 1024
NO_OUTPUT = "null"
_ITEM = re.compile(r"(.+)\[(\d+)\]")


def output_problem(text: str, limit: int = OUTPUT_LIMIT) -> str | None:
    """Why ``text`` cannot be a task's output, or None when it can."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        return f"the output is {size} bytes; the limit is {limit} bytes ({limit // 1024} KB)"
    try:
        json.loads(text)
    except ValueError as exc:
        return f"the output is not valid JSON: {exc}"
    return None


def item_of(task_id: str) -> tuple[str, int] | None:
    """``("fetch", 3)`` for ``fetch[3]``, one item of a mapped task; None for a task id
    (which cannot hold ``[``)."""
    match = _ITEM.fullmatch(task_id)
    return (match[1], int(match[2])) if match else None


def inputs_for(upstreams: Iterable[str], outputs: Mapping[str, str | None]) -> dict[str, str]:
    """Each direct upstream's output as JSON text, ``null`` for one that wrote none. The
    items of a mapped upstream (``fetch[0]``, ``fetch[1]`` ...) give one input under the
    mapped task's id: the list of their outputs in map-index order."""
    inputs: dict[str, str] = {}
    items: dict[str, list[tuple[int, str | None]]] = {}
    for task_id in dict.fromkeys(upstreams):
        item = item_of(task_id)
        if item is None:
            inputs[task_id] = outputs.get(task_id) or NO_OUTPUT
        else:
            items.setdefault(item[0], []).append((item[1], outputs.get(task_id)))
    for base, found in items.items():
        inputs[base] = "[" + ",".join(text or NO_OUTPUT for _, text in sorted(found)) + "]"
    return inputs


def inputs_problem(outputs: Iterable[str | None], limit: int = INPUTS_LIMIT) -> str | None:
    """Why a task cannot be given these upstream outputs, or None when it can."""
    size = sum(len(text) for text in outputs if text)
    if size > limit:
        return (
            f"its upstreams' outputs are {size} bytes together; a task's inputs are at most "
            f"{limit} bytes ({limit // 1024 // 1024} MiB)"
        )
    return None


def settle_output(
    reason: str, message: str, output: str | None, output_error: str
) -> tuple[str, str, str | None]:
    """A try's (reason, message, output) once its output is checked: a successful try
    whose output could not be taken fails with why; any other keeps no output."""
    if reason != EndReason.SUCCESS:
        return reason, message, None
    problem = output_error or (output_problem(output) if output is not None else None)
    if problem:
        return EndReason.OUTPUT_INVALID, problem, None
    # ``echo "$X" > $LEOFLOW_OUTPUT`` ends in a newline; a gathered list reads better without.
    return reason, message, None if output is None else output.strip()
