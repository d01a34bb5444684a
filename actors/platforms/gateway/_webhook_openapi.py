"""The OpenAPI document of the webhook receiver (``GET /openapi.json`` on its listener, no signature).

The receiver listens on a port of its own (``platforms.webhook.extra.port``), so it describes
itself rather than joining the API server's document, whose routes are the API server's only.
``paths`` are what a platform calls (:data:`ROUTES`; ``test_serve_webhook.py`` calls each on a
real receiver and finds others unanswered); ``webhooks`` (OpenAPI 3.1) are the requests the
receiver itself sends to a route's ``deliver_url``: an answer (or one numbered piece of it) and
an approval request. Every route name in the document is one configured in config.yaml.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._openapi import ERROR_SCHEMA

ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/health"),
    ("GET", "/openapi.json"),
    ("POST", "/webhooks/{route}"),
    ("POST", "/webhooks/{route}/approvals/{request_id}"),
)
"""(method, pattern) of every request the receiver answers; anything else is 404 (405 for a GET of a route)."""

_ERROR = {"$ref": "#/components/schemas/Error"}
_SIGNED: list[dict[str, list[str]]] = [{"hubSignature256": []}, {"webhookSignature": []}, {"gitlabToken": []}]
_DECISION = {
    "type": "object",
    "required": ["decision", "request_id"],
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "once", "deny", "session", "always"]},
        "request_id": {"type": "string", "description": "The request id of the URL again: the signature covers the body only."},
    },
}
_ANSWER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "route", "delivery_id", "session_id", "text"],
    "properties": {
        "type": {"const": "answer"},
        "route": {"type": "string"},
        "delivery_id": {"type": "string", "description": "The delivery id of the webhook that started the turn."},
        "session_id": {"type": "string"},
        "text": {"type": "string", "description": "The model's answer (Markdown as written), or one piece of it ending in (i/N)."},
        "part": {"type": "integer", "minimum": 1, "description": "With parts: this piece's number (the route's max_chars split the answer)."},
        "parts": {"type": "integer", "minimum": 2},
        "attachments": {
            "type": "array",
            "description": "The answer's MEDIA: files (only from the workspace or the Hermes cache), in its last POST; a refused file is a note in text instead.",
            "items": {
                "type": "object",
                "required": ["name", "kind", "mime", "size", "data_base64"],
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"type": "string", "enum": ["photo", "document"]},
                    "mime": {"type": "string"},
                    "size": {"type": "integer", "minimum": 0},
                    "data_base64": {"type": "string", "contentEncoding": "base64"},
                },
            },
        },
    },
}
_APPROVAL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "route", "delivery_id", "session_id", "request_id", "command", "reasons", "timeout_s", "decision_path", "decisions"],
    "properties": {
        "type": {"const": "approval"},
        "route": {"type": "string"},
        "delivery_id": {"type": "string"},
        "session_id": {"type": "string"},
        "request_id": {"type": "string"},
        "command": {"type": "string", "description": "The command waiting to run."},
        "reasons": {"type": "array", "items": {"type": "string"}, "description": "Why it needs a person's approval."},
        "timeout_s": {"type": "number", "description": "Seconds until it is denied by itself."},
        "decision_path": {"type": "string", "description": "Where to POST the signed decision, on this receiver."},
        "decisions": {"type": "array", "items": {"type": "string"}},
    },
}
_OUTBOUND_HEADERS = {
    "X-Webhook-Signature": {"description": "HMAC-SHA256 of the raw body with the route's secret, hex.", "schema": {"type": "string"}, "required": True},
    "X-Webhook-Id": {
        "description": "Distinct per POST and the same on a retry: a receiver may deduplicate by it.",
        "schema": {"type": "string"},
        "required": True,
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _status(*names: str) -> dict[str, Any]:
    return {"type": "object", "required": list(names), "properties": {name: {"type": "string"} for name in names}}


def _operations(route_names: list[str]) -> dict[str, dict[str, Any]]:
    route = {"name": "route", "in": "path", "required": True, "schema": {"type": "string", "enum": route_names}}
    optional_headers = [
        {
            "name": "X-Webhook-Timestamp",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "Unix seconds; when sent, refused 300 s or more away from now (replay window).",
        },
    ]
    refused = {
        "400": _json(_ERROR, "the body is not JSON, or the decision is not valid"),
        "401": _json(_ERROR, "missing or wrong signature, or a timestamp outside the replay window"),
        "404": _json(_ERROR, "no such route, or nothing waits for that approval"),
        "405": _json(_ERROR, "not POST"),
        "413": _json(_ERROR, "the body is over 1 MB"),
    }
    return {
        "GET /health": {"summary": "Liveness of the receiver (no signature).", "responses": {"200": _json(_status("status", "platform"), "ok")}},
        "GET /openapi.json": {"summary": "This document (no signature).", "responses": {"200": _json({"type": "object"}, "the document")}},
        "POST /webhooks/{route}": {
            "summary": "Deliver an event to a route: the route's prompt, filled from the JSON body, starts a turn of a session of its own; "
            "its answer is POSTed to the route's deliver_url (see webhooks). A delivery id seen before is accepted and not run again.",
            "parameters": [
                route,
                *optional_headers,
                {
                    "name": "X-GitHub-Event",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The event name (else X-Gitlab-Event or the body's event_type); a route with events takes only those.",
                },
                {
                    "name": "X-Webhook-Id",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The delivery id (also X-GitHub-Delivery, X-Gitlab-Event-UUID, X-Request-Id); else the body's digest.",
                },
            ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
            "security": _SIGNED,
            "responses": {
                "202": _json(_status("status", "delivery_id"), "accepted; the answer follows at deliver_url"),
                "200": _json(_status("status", "reason"), "ignored: the event is not one of the route's events"),
                **refused,
            },
        },
        "POST /webhooks/{route}/approvals/{request_id}": {
            "summary": "Answer an approval the route's delivery waits for (signed like the route's webhooks); at most once.",
            "parameters": [route, {"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}}, *optional_headers],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _DECISION}}},
            "security": _SIGNED,
            "responses": {"202": _json(_status("status", "request_id", "choice"), "the decision reaches the waiting turn"), **refused},
        },
    }


def _outbound(schema: dict[str, Any], summary: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "parameters": [{"name": name, "in": "header", **spec} for name, spec in _OUTBOUND_HEADERS.items()],
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
            "responses": {
                "2XX": {"description": "delivered"},
                "429": {"description": "retried after Retry-After"},
                "5XX": {"description": "retried with backoff"},
            },
        }
    }


def webhook_document(route_names: Iterable[str], version: str) -> dict[str, Any]:
    names = sorted(route_names)
    operations = _operations(names)
    paths: dict[str, dict[str, Any]] = {}
    for method, pattern in ROUTES:
        paths.setdefault(pattern, {})[method.lower()] = operations[f"{method} {pattern}"]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Hermes webhook receiver",
            "version": version,
            "description": "Signed events in, signed answers and approval requests out to each route's deliver_url.",
        },
        "paths": paths,
        "webhooks": {
            "answer": _outbound(_ANSWER, "A turn's final answer (one POST, or one per numbered piece with the route's max_chars)."),
            "approval": _outbound(_APPROVAL, "A turn waits for a person to approve a command: POST the decision to decision_path."),
        },
        "components": {
            "securitySchemes": {
                "hubSignature256": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Hub-Signature-256",
                    "description": "sha256=<hex HMAC-SHA256 of the raw body with the route's secret> (GitHub's form).",
                },
                "webhookSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Webhook-Signature",
                    "description": "<hex HMAC-SHA256 of the raw body with the route's secret>.",
                },
                "gitlabToken": {"type": "apiKey", "in": "header", "name": "X-Gitlab-Token", "description": "The route's secret itself (GitLab's form)."},
            },
            "schemas": {"Error": ERROR_SCHEMA},
        },
    }
