"""The OpenAPI document of the API server, built from the route table (a test keeps it true)."""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
"""Every error body: ``{"error": {"message", "type", "param", "code"}}`` (the webhook receiver's too)."""
JSON_OBJECT: dict[str, Any] = {"type": "object"}

# route (method, pattern) -> (summary, request body schema or None, success status)
DOCS: dict[tuple[str, str], tuple[str, dict[str, Any] | None, str]] = {
    ("GET", "/health"): ("Liveness (no auth).", None, "200"),
    ("GET", "/v1/health"): ("Liveness (no auth).", None, "200"),
    ("GET", "/health/detailed"): (
        "The live actor tree, active sessions and turns, reactor lag, credential pools, gateway adapters, the scheduler (jobs, next run, running, last lateness).",
        None,
        "200",
    ),
    ("GET", "/openapi.json"): ("This document (no auth).", None, "200"),
    ("GET", "/api/jobs"): ("Scheduled jobs: each with its schedule, state, next run and last outcome.", None, "200"),
    ("POST", "/api/jobs"): (
        "Create a scheduled job (prompt, schedule; name, deliver, timezone, repeat, model, toolsets, skills, deadline).",
        {"type": "object"},
        "201",
    ),
    ("GET", "/api/jobs/{job_id}"): ("One scheduled job.", None, "200"),
    ("PATCH", "/api/jobs/{job_id}"): ("Change a job's fields.", {"type": "object"}, "200"),
    ("DELETE", "/api/jobs/{job_id}"): ("Remove a job (its occurrences stay as history).", None, "200"),
    ("POST", "/api/jobs/{job_id}/pause"): ("Pause a job.", None, "200"),
    ("POST", "/api/jobs/{job_id}/resume"): ("Resume a paused job (what fell due meanwhile is skipped).", None, "200"),
    ("POST", "/api/jobs/{job_id}/run"): ("Run a job now (answered once its occurrence is claimed).", None, "202"),
    ("POST", "/v1/chaos/crash"): (
        "Chaos testing: crash the actor at 'path' (its supervisor restarts it). 404 unless the server runs with HERMES_CHAOS_ROUTES=1.",
        {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
        "202",
    ),
    ("GET", "/v1/models"): ("The advertised models in OpenAI's list shape: the agent, and the plain model (no tools, nothing stored).", None, "200"),
    (
        "POST",
        "/v1/chat/completions",
    ): (
        "OpenAI chat completions over a session turn; stream true/false; X-Hermes-Session-Id continues a session; "
        "X-Hermes-Tool-Progress: true adds tool progress to a stream as SSE comments. The plain model id is forwarded "
        "to the upstream model instead (no tools, no session).",
        {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "model": {"type": "string"},
                "messages": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["role"],
                        "properties": {
                            "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
                            "content": {"type": ["string", "array", "null"]},
                        },
                    },
                },
                "stream": {"type": ["boolean", "string"]},
            },
        },
        "200",
    ),
    (
        "POST",
        "/v1/responses",
    ): (
        "OpenAI Responses: input string or items, instructions, previous_response_id or conversation, store, stream. "
        "Tools the server runs are mcp_call items (server_label hermes).",
        {
            "type": "object",
            "required": ["input"],
            "properties": {
                "model": {"type": "string"},
                "input": {"type": ["string", "array"]},
                "instructions": {"type": "string"},
                "previous_response_id": {"type": "string"},
                "conversation": {"type": ["string", "object"]},
                "store": {"type": "boolean"},
                "stream": {"type": ["boolean", "string"]},
            },
        },
        "200",
    ),
    ("GET", "/v1/responses/{response_id}"): ("A stored response.", None, "200"),
    ("DELETE", "/v1/responses/{response_id}"): ("Forget a stored response.", None, "200"),
    (
        "POST",
        "/v1/runs",
    ): (
        "Start a run (a turn) and answer 202 at once.",
        {
            "type": "object",
            "required": ["input"],
            "properties": {"input": {"type": ["string", "array"]}, "session_id": {"type": "string"}, "instructions": {"type": "string"}},
        },
        "202",
    ),
    ("GET", "/v1/sessions"): ("Sessions, newest first (limit, offset, source).", None, "200"),
    ("POST", "/v1/sessions"): (
        "Create a session (optional id, title).",
        {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"}}},
        "201",
    ),
    ("GET", "/v1/sessions/search"): ("Full-text search over messages (q, limit, session_id).", None, "200"),
    ("GET", "/v1/sessions/{session_id}"): ("One session.", None, "200"),
    ("PATCH", "/v1/sessions/{session_id}"): (
        "Rename a session (title) and/or switch the model it calls (model).",
        {"type": "object", "properties": {"title": {"type": "string"}, "model": {"type": "string"}}},
        "200",
    ),
    ("POST", "/v1/sessions/{session_id}/undo"): ("Take back the last exchange (409 while a turn runs or when there is none).", None, "200"),
    ("POST", "/v1/sessions/{session_id}/compress"): (
        "Compress the conversation now: its middle becomes a summary in a new segment (focus: a topic kept in detail;"
        " wait: false answers 202 and reports on the event stream; 404 for no session, 502 when the summary call failed).",
        {
            "type": "object",
            "properties": {
                "focus": {"type": "string", "maxLength": 2000},
                "policy": {"type": "string", "enum": ["queue", "interrupt", "reject"]},
                "wait": {"type": "boolean"},
            },
        },
        "200",
    ),
    ("DELETE", "/v1/sessions/{session_id}"): ("Delete a session and its messages.", None, "200"),
    ("GET", "/v1/sessions/{session_id}/messages"): ("A session's transcript.", None, "200"),
    ("POST", "/v1/sessions/{session_id}/fork"): ("Copy a session into a new one that continues from it.", None, "201"),
    ("GET", "/v1/sessions/{session_id}/events"): (
        "Every event of a session as SSE (typed JSON, id = sequence number); resume with Last-Event-ID or ?after=.",
        None,
        "200",
    ),
    ("POST", "/v1/sessions/{session_id}/turns"): (
        "Send a user message to a session (policy queue, interrupt or reject).",
        {
            "type": "object",
            "required": ["text"],
            "properties": {"text": {"type": "string"}, "policy": {"type": "string", "enum": ["queue", "interrupt", "reject"]}},
        },
        "202",
    ),
    ("POST", "/v1/sessions/{session_id}/cancel"): ("Cancel the session's running turn (or one turn by id).", None, "202"),
    ("POST", "/v1/sessions/{session_id}/answer"): (
        "Answer an approval (choice) or a clarification (answer).",
        {
            "type": "object",
            "required": ["request_id"],
            "properties": {
                "request_id": {"type": "string"},
                "choice": {"type": "string", "enum": ["once", "session", "always", "deny"]},
                "answer": {"type": "string"},
            },
        },
        "202",
    ),
    ("GET", "/v1/runs/{run_id}"): ("A run's status: queued, running, waiting_for_approval, completed, failed, cancelled.", None, "200"),
    ("GET", "/v1/runs/{run_id}/events"): ("The run's events as SSE; resume with Last-Event-ID.", None, "200"),
    ("POST", "/v1/runs/{run_id}/stop"): ("Cancel the run.", None, "200"),
    (
        "POST",
        "/v1/runs/{run_id}/approval",
    ): (
        "Answer the run's pending approval.",
        {
            "type": "object",
            "required": ["choice"],
            "properties": {"choice": {"type": "string", "enum": ["once", "session", "always", "deny"]}, "request_id": {"type": "string"}},
        },
        "200",
    ),
}


def openapi_document(routes: list[tuple[str, str, Any]], version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, pattern, _handler in routes:
        summary, body, status = DOCS[(method, pattern)]
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {
                status: {"description": "success", "content": {"application/json": {"schema": JSON_OBJECT}}},
                "400": {"description": "bad request", "content": {"application/json": {"schema": ERROR}}},
                "401": {"description": "missing or wrong API key", "content": {"application/json": {"schema": ERROR}}},
                "404": {"description": "not found", "content": {"application/json": {"schema": ERROR}}},
            },
        }
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in _path_params(pattern)]
        if parameters:
            operation["parameters"] = parameters
        if body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        if pattern not in ("/health", "/v1/health", "/openapi.json"):
            operation["security"] = [{"bearer": []}]
        paths.setdefault(pattern, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Hermes agent API", "version": version},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": ERROR_SCHEMA,
            },
        },
    }


def _path_params(pattern: str) -> list[str]:
    return [part[1:-1] for part in pattern.split("/") if part.startswith("{") and part.endswith("}")]
