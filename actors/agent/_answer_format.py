"""Whether a final answer honours the client's ``response_format`` (a pure check).

``json_object``: the answer is one JSON object. ``json_schema``: it is JSON that the schema
accepts (``jsonschema``, the draft the schema names, Draft 2020-12 by default, applied as
``_json_schema`` says: patterns on a time budget, never an exception out of the check). A
fenced answer (```` ```json ... ``` ````) is read inside its fence, as models often add one.
"""

from __future__ import annotations

import re
from typing import Any

from ._json_schema import SchemaUnusable, check, out_of_recursion, schema_problem
from ._json_text import TOO_DEEP, read_json

_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(?P<body>.*?)\n\s*```\s*\Z", re.DOTALL)

SUBJECT = "the response_format schema"


def _json(text: str) -> Any:
    found = _FENCE.match(text)
    return read_json(found.group("body") if found else text)


def answer_problem(text: str, response_format: dict[str, Any]) -> str | None:
    """None when ``text`` satisfies ``response_format``; else what is wrong, in one line."""
    kind = response_format.get("type")
    if kind not in ("json_object", "json_schema"):
        return None
    try:
        value = _json(text)
    except ValueError as exc:
        return f"the answer is not valid JSON ({exc})"
    if kind == "json_object":
        return None if isinstance(value, dict) else f"the answer is JSON but not an object (it is a {type(value).__name__})"
    schema = response_format.get("json_schema", {}).get("schema")
    if not isinstance(schema, dict):
        return None
    problem = schema_problem(schema, SUBJECT)
    if problem is not None:
        return problem
    try:
        error = check(schema, value, SUBJECT)
    except SchemaUnusable as exc:
        return str(exc)
    except RecursionError:  # a deep answer exhausts the validator before the reader; a shallow one, a $ref loop
        return out_of_recursion(value, SUBJECT, f"the answer is {TOO_DEEP}")
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"the answer does not match the schema at {where}: {error.message}"
