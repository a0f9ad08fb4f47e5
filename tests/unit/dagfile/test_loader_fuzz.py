"""Fuzzing the loader: whatever the YAML, the answer is a DagSpec or a DagFileError, fast.

Documents are generated with anchors and aliases (nested, "billion laughs" style),
merge keys, duplicate keys, control characters and long dependency chains, plus
raw YAML token soup. Each must load or be refused with the loader's own error,
within generous bounds of time and memory (tracemalloc peak). Deterministic:
derandomized, no example database.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.dag import DagSpec

PATH = Path("fuzz.yaml")
# CPU seconds per document, of the thread that parses it; the worst of these examples
# takes about 0.3 s (tracemalloc on), and what the bound is for, an alias expansion
# that is not bounded, takes orders of magnitude more. CPU time, not wall time: on a
# loaded host a 1,500-task chain took over 5 s of wall time and failed. The thread's,
# not the process's: other threads of the test process (a pytest-xdist worker keeps
# whatever earlier tests left running) must not count against the document.
TIME_BOUND = 5.0
MEMORY_BOUND = 64 * 1024 * 1024

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text with the characters that matter: controls, ESC, NUL, bidi overrides, quotes.
nasty_text = st.text(
    alphabet=st.sampled_from(list("ab _-.:#&*!|>{}[],'\"\\\t\n\r\x00\x07\x1b\x7f\x9b\u202e")),
    max_size=12,
)
task_ids = st.sampled_from(["a", "b", "c", "d", "t.1", "x-y", "ä", "bad id", "a\x1b"])


def quoted(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


@st.composite
def laughs(draw: st.DrawFn) -> str:
    width = draw(st.integers(1, 12))
    levels = draw(st.integers(1, 10))
    lines = ["l0: &l0 [" + ",".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@st.composite
def task_body(draw: st.DrawFn, index: int, chain: bool) -> str:
    fields = [f"command: {quoted(draw(nasty_text)) if draw(st.booleans()) else 'echo ok'}"]
    if chain and index:
        fields.append(f"depends_on: [t{index - 1}]")
    elif draw(st.booleans()):
        fields.append(f"depends_on: [{quoted(draw(task_ids))}]")
    if draw(st.booleans()):
        fields.append(f"env: {{{quoted(draw(nasty_text) or 'K')}: {quoted(draw(nasty_text))}}}")
    if draw(st.booleans()):
        fields.append(f"retries: {draw(st.integers(-1, 3))}")
    if draw(st.booleans()):
        fields.append(f"pool: {quoted(draw(nasty_text))}")
    if draw(st.booleans()):
        fields.append(fields[0])  # a duplicate key
    if draw(st.booleans()):
        fields.append("<<: *base")
    return "{" + ", ".join(fields) + "}"


@st.composite
def documents(draw: st.DrawFn) -> str:
    dag_id = draw(st.sampled_from(["ok", "d-1", "BAD", "x\x00"]))
    parts = [f"dag_id: {quoted(dag_id)}"]
    if draw(st.booleans()):
        parts.append(f"schedule: {quoted(draw(st.sampled_from(['* * * * *', '0 0 31 2 *'])))}")
    if draw(st.booleans()):
        parts.append("dag_id: again")
    count = draw(st.integers(1, 6))
    chain = draw(st.booleans())
    if chain:
        count = draw(st.sampled_from([1, 50, 400, 1500]))
    lines = ["tasks:"]
    if draw(st.booleans()):
        lines.append("  base: &base {command: echo base, retries: 1}")
    for index in range(count):
        name = f"t{index}" if chain else draw(task_ids)
        if chain and count > 50:
            body = f"{{command: echo, depends_on: [t{index - 1}]}}" if index else "{command: e}"
        else:
            body = draw(task_body(index, chain))
        lines.append(f"  {quoted(name)}: {body}")
    if chain and draw(st.booleans()):
        lines.append(f"  t0: {{command: echo, depends_on: [t{count - 1}]}}")  # a cycle, or dup
    parts.append("\n".join(lines))
    if draw(st.booleans()):
        parts.append(draw(laughs()))
    if draw(st.booleans()):
        depth = draw(st.integers(1, 300))
        parts.append("nest: " + "[" * depth + "]" * depth)
    return "\n".join(parts) + "\n"


token_soup = st.lists(
    st.sampled_from(
        [
            "[",
            "]",
            "{",
            "}",
            ",",
            ": ",
            "- ",
            "\n",
            "  ",
            "&a ",
            "*a",
            "&b ",
            "*b",
            "<<: ",
            "dag_id",
            "tasks",
            "command",
            "x",
            "'q'",
            '"\\0"',
            "!!str ",
            "!!python/object ",
            "---\n",
            "? ",
            "|\n  ",
            "#",
        ]
    ),
    max_size=60,
).map("".join)


def load_bounded(text: str) -> None:
    tracemalloc.start()
    started = time.thread_time()
    try:
        try:
            spec = parse_dag(text, PATH)
        except DagFileError as exc:
            assert exc.problems, "a DagFileError lists at least one problem"
            rendered = str(exc)
            assert "\x1b" not in rendered and "\x00" not in rendered
        else:
            assert isinstance(spec, DagSpec)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < TIME_BOUND, elapsed
    assert peak < MEMORY_BOUND, peak


@FUZZ
@given(documents())
def test_generated_dag_documents_load_or_are_refused_within_bounds(text: str) -> None:
    load_bounded(text)


@FUZZ
@given(token_soup)
def test_yaml_token_soup_loads_or_is_refused_within_bounds(text: str) -> None:
    load_bounded(text)
