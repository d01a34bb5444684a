"""JSON a model wrote: read as ``json.loads`` reads it, and never a crash of the machine step.

A careless or hostile model can send arguments or a structured answer nested 100,000 levels
deep; the standard library's reader then raises ``RecursionError``, which is no ``ValueError``,
and used to escape the turn machine's step (the session crashed and was restarted).
"""

from __future__ import annotations

import json

import pytest

from actors.agent._answer_format import answer_problem
from actors.agent._json_text import TOO_DEEP, read_json
from actors.agent._machine import RunTool
from protocols._session import ToolFinished
from tests.agent.machine_driver import Driver, call, events
from tests.agent.test_machine import reply_with_calls, start

DEEP = "[" * 100_000 + "]" * 100_000

SAME_AS_JSON_LOADS = [
    '{"path": "a", "n": 1, "f": 1.5, "xs": [true, false, null]}',
    '{"a": 1, "a": 2}',  # the last one wins, in both readers
    '{"a": -0.0, "b": 5e-324, "c": 123456789012345678901234567890}',
    '{"a": NaN, "b": Infinity}',  # msgspec refuses these; json.loads takes them
    '{"a": 1e400}',  # out of msgspec's range: inf
    '{"a": "\\ud800"}',  # a lone surrogate escape
    '{"a": "\u2028 \\u0000 \\/"}',
    "[1, 2]",
    '"text"',
]
REFUSED_AS_JSON_LOADS_REFUSES = ['{"path": ', '{"a": 1}x', "{'a': 1}", '{"a": 01}', '{"a": "x\ny"}', "\ufeff{}", ""]


@pytest.mark.parametrize("text", SAME_AS_JSON_LOADS)
def test_what_json_loads_reads_is_read_to_the_same_value(text: str) -> None:
    assert repr(read_json(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", REFUSED_AS_JSON_LOADS_REFUSES)
def test_what_json_loads_refuses_is_refused_with_its_words(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        read_json(text)
    assert str(got.value) == str(expected.value)


def test_nesting_past_the_recursion_limit_is_a_value_error_not_a_recursion_error() -> None:
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what the machine called before
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json(DEEP)


def test_a_tool_call_with_arguments_nested_100_000_deep_is_answered_with_an_error_and_the_others_run() -> None:
    driver = Driver()
    model = start(driver)
    calls = (call("deep", "read_file", DEEP), call("good", "read_file", '{"path": "x"}'))
    effects = reply_with_calls(driver, model.token, calls)
    assert [r.call_id for r in driver.of(RunTool, effects)] == ["good"]
    finished = {e.call_id: e for e in events(effects) if isinstance(e, ToolFinished)}
    assert not finished["deep"].ok and "not valid JSON (nested too deeply" in finished["deep"].preview
    deep = [m for m in driver.state.transcript if m.role == "tool" and m.tool_call_id == "deep"]
    assert len(deep) == 1 and TOO_DEEP in (deep[0].content or "")


def test_a_structured_answer_nested_too_deeply_gets_a_clear_problem_not_a_crash() -> None:
    assert answer_problem(DEEP, {"type": "json_object"}) == f"the answer is not valid JSON ({TOO_DEEP})"
    recursive = {"type": "json_schema", "json_schema": {"name": "tree", "schema": {"type": "array", "items": {"$ref": "#"}}}}
    assert "is not of type 'array'" in (answer_problem("[" * 50 + "1" + "]" * 50, recursive) or "")
    # 800 levels read, then exhaust the validator's recursion (it nests several calls a level).
    assert answer_problem("[" * 800 + "1" + "]" * 800, recursive) == f"the answer is {TOO_DEEP}"
