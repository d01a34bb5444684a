"""A client's response_format schema, applied as a hostile client might write it: a ``$ref`` that
loops or points nowhere, a pattern that backtracks for ever, keywords we refuse. Each is one
clear line from the check, never an exception out of the machine's step, never a hang."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from actors.agent._answer_format import SUBJECT, answer_problem
from actors.agent._json_schema import PATTERN_BUDGET_S, endless, schema_problem

ENDLESS = endless(SUBJECT)


def form(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$ref": "#"}, ENDLESS),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, ENDLESS),
        ({"$anchor": "x", "$ref": "#x"}, ENDLESS),
        ({"$ref": "https://example.com/schema.json"}, "has a $ref that cannot be resolved (Unresolvable: https://example.com/schema.json)"),
        ({"$ref": "#/definitions/nope"}, "has a $ref that cannot be resolved (PointerToNowhere"),
        ({"$dynamicRef": "#x"}, "has a $ref that cannot be resolved"),
        ({"$schema": 5}, "the $schema of the response_format schema must be a URI string"),
        ({"type": "nope"}, "the response_format schema itself is invalid"),
        ({"pattern": "("}, "the response_format schema itself is invalid"),
        ({"type": "object", "patternProperties": {"^a": {"type": "string"}}}, "uses patternProperties, which is not supported"),
        ({"properties": {"deep": {"allOf": [{"patternProperties": {"(a|aa)+$": {}}}]}}}, "uses patternProperties"),
    ],
)
def test_a_schema_that_cannot_be_applied_is_said_so_in_one_line(schema: dict[str, Any], said: str) -> None:
    problem = schema_problem(schema, SUBJECT)
    assert problem is not None and said in problem
    assert answer_problem('{"a": 1}', form(schema)) == problem  # and the answer check says the same, without raising


def test_usable_schemas_pass_and_a_property_named_like_a_keyword_is_a_name() -> None:
    for schema in (
        {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]+$"}}},
        {"properties": {"patternProperties": {"type": "object"}}},  # a property of that name
        {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"},  # recursion that consumes the value
    ):
        assert schema_problem(schema, SUBJECT) is None
    city = form({"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]+$"}}})
    assert answer_problem('{"city": "Porto"}', city) is None
    assert answer_problem('{"city": "porto"}', city) == "the answer does not match the schema at city: 'porto' does not match the pattern '^[A-Z][a-z]+$'"


def test_a_ref_loop_reached_only_by_the_answer_blames_the_schema_and_a_deep_answer_blames_the_answer() -> None:
    looping = form({"properties": {"a": {"$ref": "#/properties/a"}}})
    assert schema_problem(looping["json_schema"]["schema"], SUBJECT) is None  # no probe reaches it
    assert answer_problem('{"a": {"a": 1}}', looping) == ENDLESS
    tree = form({"type": "array", "items": {"$ref": "#"}})
    assert "nested too deeply" in (answer_problem("[" * 800 + "]" * 800, tree) or "")


def test_a_pattern_that_backtracks_for_ever_is_stopped_by_the_budget() -> None:
    """In a child process with a deadline: before, ``re`` would run (a|aa)+$ against 60 a's for
    longer than the age of the universe, holding the GIL, and this test could never time out."""
    code = (
        "from actors.agent._answer_format import answer_problem\n"
        "schema = {'type': 'object', 'properties': {'a': {'type': 'string', 'pattern': '(a|aa)+$'}}}\n"
        "print(answer_problem('{\"a\": \"' + 'a' * 60 + '!\"}', {'type': 'json_schema', 'json_schema': {'name': 'x', 'schema': schema}}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    said = done.stdout.strip()
    assert said.startswith("checking the pattern '(a|aa)+$' of the response_format schema took longer than") and f"{PATTERN_BUDGET_S:g} s" in said
