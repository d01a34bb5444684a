"""A JSON Schema someone else wrote, applied without letting it hang or crash us.

A client's ``response_format`` schema is applied inside the turn machine's step; an MCP
server's ``outputSchema`` to each of its tool's results. Either must never raise and never run
unbounded:

- ``pattern`` is matched by the ``regex`` module, with one time budget for all the matches of a
  check (:data:`PATTERN_BUDGET_S`). Python's ``re``, which ``jsonschema`` uses, backtracks
  without end on patterns such as ``(a|aa)+$`` and holds the GIL while it does: one request
  froze the whole server.
- ``patternProperties`` is refused (as OpenAI's structured outputs refuse it): ``jsonschema``
  matches those patterns with ``re`` in several places (``additionalProperties``,
  ``unevaluatedProperties``), out of our reach.
- A ``$ref`` that cannot be resolved (``jsonschema`` never fetches a remote one), or that refers
  to itself without end, is the schema's problem, said as such; a ``$schema`` that is not a
  string too.

Every text names the schema by the ``subject`` the caller gives ("the response_format schema",
"the outputSchema of the MCP tool x"). :func:`schema_problem` is what the API asks before it
accepts a request (a 400), and what :func:`actors.agent._answer_format.answer_problem` asks
before it checks an answer; :func:`check` applies a schema to one value.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing.exceptions
import regex

from ._json_text import nests_deeper_than

PATTERN_BUDGET_S = 0.25
"""Seconds all the ``pattern`` matches of one check may take together."""

_PROBES: tuple[Any, ...] = (None, {}, [], "", 0)
"""Instances a schema is tried on before any answer: a ``$ref`` loop or a dangling ``$ref`` at
the top shows on one of them."""

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_ONE = (
    *("additionalProperties", "unevaluatedProperties", "items", "additionalItems", "unevaluatedItems"),
    *("contains", "propertyNames", "not", "if", "then", "else"),
)


class SchemaUnusable(Exception):
    """The schema cannot be applied to this value; the text says why, for whoever wrote it."""


class _Budget:
    """The time left for a check's pattern matches."""

    def __init__(self, subject: str) -> None:
        self.until = time.monotonic() + PATTERN_BUDGET_S
        self.subject = subject

    def search(self, pattern: str, text: str) -> bool:
        try:
            compiled = regex.compile(pattern)
        except (regex.error, ValueError) as exc:
            raise SchemaUnusable(f"the pattern {pattern!r} of {self.subject} cannot be used ({exc})") from None
        try:
            return compiled.search(text, timeout=max(0.0, self.until - time.monotonic())) is not None
        except TimeoutError:
            why = "patterns with nested or overlapping repetition, like (a|aa)+, can take exponential time"
            raise SchemaUnusable(f"checking the pattern {pattern!r} of {self.subject} took longer than {PATTERN_BUDGET_S:g} s ({why}); simplify it") from None


def _validator(schema: dict[str, Any], subject: str) -> jsonschema.protocols.Validator:
    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        raise SchemaUnusable(f"the $schema of {subject} must be a URI string, like https://json-schema.org/draft/2020-12/schema")
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        base.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaUnusable(f"{subject} itself is invalid ({exc.message})") from None
    except RecursionError:
        raise SchemaUnusable(f"{subject} nests too deeply to be read") from None
    refused = _refused_keyword(schema)
    if refused is not None:
        raise SchemaUnusable(f"{subject} uses {refused}, which is not supported; name the properties, or use additionalProperties")
    budget = _Budget(subject)

    def pattern(validator: Any, value: str, instance: Any, _schema: Any) -> Iterator[jsonschema.exceptions.ValidationError]:
        if validator.is_type(instance, "string") and not budget.search(value, instance):
            yield jsonschema.exceptions.ValidationError(f"{instance!r} does not match the pattern {value!r}")

    safe: Any = jsonschema.validators.extend(base, validators={"pattern": pattern})  # type: ignore[no-untyped-call]
    validator: jsonschema.protocols.Validator = safe(schema)
    return validator


def _refused_keyword(schema: Any) -> str | None:
    """``patternProperties`` where a subschema may stand, if anywhere; None otherwise."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict):
            continue
        if "patternProperties" in node:
            return "patternProperties"
        for key in _SUBSCHEMA_MAPS:
            if isinstance(node.get(key), dict):
                todo += node[key].values()
        for key in _SUBSCHEMA_LISTS:
            if isinstance(node.get(key), list):
                todo += node[key]
        todo += (node[key] for key in _SUBSCHEMA_ONE if key in node)
        if isinstance(node.get("items"), list):  # draft 4-7 tuple form
            todo += node["items"]
    return None


def check(schema: dict[str, Any], value: Any, subject: str) -> jsonschema.exceptions.ValidationError | None:
    """The best error of ``value`` against ``schema``, or None; :class:`SchemaUnusable` when the
    schema itself is at fault, ``RecursionError`` when ``value`` nests too deeply to check (or a
    ``$ref`` loops: :func:`endless` says so)."""
    return _best_error(_validator(schema, subject), value, subject)


def _best_error(validator: jsonschema.protocols.Validator, value: Any, subject: str) -> jsonschema.exceptions.ValidationError | None:
    try:
        best: jsonschema.exceptions.ValidationError | None = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaUnusable(f"{subject} has a $ref that cannot be resolved ({exc}); only references inside the schema (#/...) are followed") from None
    return best


def schema_problem(schema: dict[str, Any], subject: str) -> str | None:
    """What keeps ``schema`` from being applied, in one line; None when it can be."""
    try:
        validator = _validator(schema, subject)  # once: checking the schema against its draft is the costly part
        for probe in _PROBES:
            _best_error(validator, probe, subject)
    except SchemaUnusable as exc:
        return str(exc)
    except RecursionError:
        return endless(subject)
    return None


def endless(subject: str) -> str:
    return f"{subject} refers to itself without end (a $ref loop that never reaches a type); fix the $ref"


DEEP_VALUE = 100
"""Levels of nesting past which a check that ran out of recursion blames the value, not the schema."""


def out_of_recursion(value: Any, subject: str, deep: str) -> str:
    """What to say when :func:`check` raised ``RecursionError``: ``deep`` (the value's fault) when
    it nests past :data:`DEEP_VALUE` levels, else the schema's ``$ref`` loop."""
    return deep if nests_deeper_than(value, DEEP_VALUE) else endless(subject)
