"""Every registered tool's schema is a JSON Schema object the OpenAI tools format accepts."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from actors.tools import REGISTRY

JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_schema(node: Any, where: str) -> None:
    assert isinstance(node, dict), where
    assert "$ref" not in node and "$defs" not in node, f"{where}: references are not inlined"
    kinds = node.get("type")
    for kind in [kinds] if isinstance(kinds, str) else kinds or []:
        assert kind in JSON_TYPES, f"{where}: unknown type {kind!r}"
    for key in ("anyOf", "oneOf", "allOf"):
        for index, option in enumerate(node.get(key, [])):
            check_schema(option, f"{where}.{key}[{index}]")
    if "properties" in node:
        assert isinstance(node["properties"], dict)
        for name, prop in node["properties"].items():
            check_schema(prop, f"{where}.{name}")
        assert set(node.get("required", [])) <= set(node["properties"]), f"{where}: required names a missing property"
    if "items" in node:
        check_schema(node["items"], f"{where}[]")


def test_every_registered_tool_emits_a_valid_function_schema() -> None:
    names = REGISTRY.names()
    assert len(names) >= 15
    for name in names:
        entry = REGISTRY.get(name).spec().schema()
        assert entry["type"] == "function" and NAME.match(entry["function"]["name"])
        assert entry["function"]["description"].strip()
        parameters = entry["function"]["parameters"]
        assert parameters["type"] == "object", name
        check_schema(parameters, name)
        msgspec.json.encode(entry)  # plain JSON, nothing exotic
