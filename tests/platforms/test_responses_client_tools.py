"""Responses API: the client's function tools come back as function_call items; its outputs resume the turn."""

from __future__ import annotations

from typing import Any

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit

LOOKUP = {"type": "function", "name": "lookup", "description": "Look a word up.", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}


def model_bodies(api: ServerKit) -> list[dict[str, Any]]:
    return [r.body for r in api.model.requests if r.path == "/v1/chat/completions"]


def test_a_function_tool_call_is_a_function_call_item_and_its_output_resumes_the_turn(api: ServerKit) -> None:
    api.model.script(
        [ToolCallsReply(calls=(ScriptedCall(name="lookup", arguments='{"word": "ibis"}', id="call_l1"),)), TextReply(content="An ibis is a bird.")]
    )
    client = api.client()
    first = client.responses.create(model="hermes-test", input="what is an ibis?", tools=[LOOKUP])  # type: ignore[list-item]
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, c.call_id, c.arguments) for c in calls] == [("lookup", "call_l1", '{"word": "ibis"}')]
    offered = model_bodies(api)[-1]["tools"]
    assert {"type": "function", "function": {k: LOOKUP[k] for k in ("name", "description", "parameters")}} in offered
    second = client.responses.create(
        model="hermes-test",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_l1", "output": "a wading bird"}],
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    assert second.output_text == "An ibis is a bird."
    sent = [m for m in model_bodies(api)[-1]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"] and sent[-1]["content"] == "a wading bird"


def test_a_whole_conversation_with_function_items_can_be_sent_without_a_previous_response(api: ServerKit) -> None:
    items = [
        {"type": "message", "role": "user", "content": "what is an ibis?"},
        {"type": "function_call", "call_id": "c7", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c7", "output": "a wading bird"},
    ]
    reply = api.client().responses.create(model="hermes-test", input=items, tools=[LOOKUP], store=False)  # type: ignore[arg-type, list-item]
    assert reply.output_text == "echo: what is an ibis?"
    sent = [m for m in model_bodies(api)[-1]["messages"] if m["role"] != "system"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent] == [("user", None), ("assistant", None), ("tool", "c7")]


def test_hosted_tool_types_and_text_format_are_handled_not_dropped(api: ServerKit) -> None:
    with api.http() as http:
        hosted = http.post("/v1/responses", json={"input": "hi", "tools": [{"type": "web_search"}]})
        api.model.script([TextReply(content='{"ok": true}')])
        shaped = http.post(
            "/v1/responses",
            json={"input": "hi", "max_output_tokens": 50, "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}}}},
        )
    assert hosted.status_code == 400 and "web_search" in hosted.json()["error"]["message"]
    assert shaped.status_code == 200, shaped.text
    body = model_bodies(api)[-1]
    assert body["max_tokens"] == 50 and body["response_format"] == {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
