"""The webhook receiver's OpenAPI document: every route the receiver answers and nothing else,
its schemas valid JSON Schema, the route names the configured ones. (What the real receiver
sends and takes is checked against the document in ``test_serve_webhook.py``.)"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from actors.platforms.gateway._webhook_approvals import DECISIONS
from actors.platforms.gateway._webhook_openapi import ROUTES, webhook_document


def _schemas(node: Any) -> list[dict[str, Any]]:
    """Every ``schema`` object in the document."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "schema" and isinstance(value, dict):
                found.append(value)
            found.extend(_schemas(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_schemas(item))
    return found


def test_the_document_names_each_route_of_the_receiver_with_its_parameters_and_nothing_else() -> None:
    document = webhook_document(["ops", "ci"], "1.2.3")
    assert document["openapi"] == "3.1.0" and document["info"]["version"] == "1.2.3"
    named = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert named == set(ROUTES)
    for path, ops in document["paths"].items():
        for op in ops.values():
            assert op["summary"] and op["responses"]
            in_path = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
            assert in_path == [part[1:-1] for part in path.split("/") if part.startswith("{")]
            if path.startswith("/webhooks/"):
                assert {"401", "404"} <= set(op["responses"]) and op["security"]
                route = next(p for p in op["parameters"] if p["name"] == "route")
                assert route["schema"]["enum"] == ["ci", "ops"]  # the configured routes, sorted
    assert set(document["webhooks"]) == {"answer", "approval"}


def test_every_schema_in_the_document_is_valid_json_schema() -> None:
    document = webhook_document(["ci"], "1")
    schemas = _schemas(document) + list(document["components"]["schemas"].values())
    assert len(schemas) > 10
    for schema in schemas:
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("decision", sorted(DECISIONS))
def test_the_documented_decision_body_takes_each_word_the_receiver_takes(decision: str) -> None:
    op = webhook_document(["ci"], "1")["paths"]["/webhooks/{route}/approvals/{request_id}"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    jsonschema.validate({"decision": decision, "request_id": "r1"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"decision": "maybe", "request_id": "r1"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"decision": decision}, schema)
