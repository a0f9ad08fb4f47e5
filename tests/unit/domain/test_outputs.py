"""The output checks and what a downstream gets of its upstreams' outputs."""

from __future__ import annotations

import json

from leoflow.domain.outputs import (
    OUTPUT_LIMIT,
    inputs_for,
    inputs_problem,
    item_of,
    output_problem,
    settle_output,
)
from leoflow.domain.reasons import EndReason


def test_an_output_at_the_limit_is_taken_and_one_byte_more_is_not() -> None:
    at_limit = json.dumps("x" * (OUTPUT_LIMIT - 2))
    assert len(at_limit) == OUTPUT_LIMIT
    assert output_problem(at_limit) is None
    problem = output_problem(json.dumps("x" * (OUTPUT_LIMIT - 1)))
    assert problem == "the output is 65537 bytes; the limit is 65536 bytes (64 KB)"


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    text = json.dumps("ü" * 40000, ensure_ascii=False)  # 40,002 characters, 80,002 bytes
    assert output_problem(text) == "the output is 80002 bytes; the limit is 65536 bytes (64 KB)"


def test_an_output_that_is_not_json_names_the_parse_error() -> None:
    problem = output_problem("{rows: 3")
    assert problem is not None and problem.startswith("the output is not valid JSON: Expecting")


def test_a_successful_try_with_a_bad_output_fails_and_any_other_keeps_none() -> None:
    assert settle_output(EndReason.SUCCESS, "ok", "[1]", "") == (EndReason.SUCCESS, "ok", "[1]")
    assert settle_output(EndReason.SUCCESS, "ok", None, "") == (EndReason.SUCCESS, "ok", None)
    reason, message, output = settle_output(EndReason.SUCCESS, "ok", "nope", "")
    assert (reason, output) == (EndReason.OUTPUT_INVALID, None)
    assert message.startswith("the output is not valid JSON")
    assert settle_output(EndReason.SUCCESS, "ok", None, "too big") == (
        EndReason.OUTPUT_INVALID,
        "too big",
        None,
    )
    assert settle_output(EndReason.EXIT_CODE, "code 1", "[1]", "") == (
        EndReason.EXIT_CODE,
        "code 1",
        None,
    )


def test_each_direct_upstream_gives_one_input_and_a_mapped_one_the_list_of_its_items() -> None:
    outputs = {"a": '{"n": 1}', "m[1]": '"one"', "m[0]": None, "m[10]": "10", "m[2]": "2"}
    got = inputs_for(["a", "b", "m[1]", "m[0]", "m[10]", "m[2]", "a"], outputs)
    assert got == {"a": '{"n": 1}', "b": "null", "m": '[null,"one",2,10]'}
    assert json.loads(got["m"]) == [None, "one", 2, 10]


def test_item_ids() -> None:
    assert item_of("fetch[3]") == ("fetch", 3)
    assert item_of("fetch[12]") == ("fetch", 12)
    assert item_of("fetch") is None
    assert item_of("fetch[x]") is None


def test_a_tasks_inputs_together_are_bounded() -> None:
    assert inputs_problem(["x" * 1000, None] * 10) is None
    problem = inputs_problem(["x" * 60000] * 20)
    assert problem == (
        "its upstreams' outputs are 1200000 bytes together; a task's inputs are at most "
        "1048576 bytes (1 MiB)"
    )
