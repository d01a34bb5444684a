"""The Responses API through the official openai SDK."""

from __future__ import annotations

import openai
import pytest

from actors.chaos import ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit


def test_a_plain_response_is_stored_and_previous_response_id_continues_its_session(api: ServerKit) -> None:
    client = api.client()
    api.model.script([TextReply(content="Nice to meet you, Ada.")])
    first = client.responses.create(model="hermes-test", input="My name is Ada.", instructions="Be warm.")
    assert first.output_text == "Nice to meet you, Ada."
    assert first.status == "completed" and first.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0  # a model that is not Claude: no cache marks, nothing read
    session = api.model.requests[-1]
    api.model.script([TextReply(content="Your name is Ada.")])
    second = client.responses.create(model="hermes-test", input="What is my name?", previous_response_id=first.id)
    assert second.output_text == "Your name is Ada."
    sent = [m["content"] for m in api.model.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]
    assert api.model.requests[-1].session == session.session  # the same session continued
    assert client.responses.retrieve(first.id).id == first.id
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


def test_a_streamed_response_sends_named_events_with_sequence_numbers(api: ServerKit) -> None:
    api.model.script(
        [ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "a", "seconds": 0.01}'),)), TextReply(content="streamed words here")]
    )
    events = list(api.client().responses.create(model="hermes-test", input="go", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.output_item.done" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "streamed words here"
    final = events[-1].response
    assert [item.type for item in final.output] == ["mcp_call", "message"]


def test_conversation_and_previous_response_id_together_are_refused(api: ServerKit) -> None:
    with api.http() as http:
        both = http.post("/v1/responses", json={"input": "x", "conversation": "c1", "previous_response_id": "resp_x"})
        assert both.status_code == 400 and both.json()["error"]["param"] == "conversation"
        unknown = http.post("/v1/responses", json={"input": "x", "previous_response_id": "resp_missing"})
        assert unknown.status_code == 404


def test_stored_responses_survive_a_restart_of_the_server(tmp_path, model_server) -> None:  # type: ignore[no-untyped-def]
    from tests.platforms.server_kit import start_server

    first_kit = start_server(tmp_path, model_server)
    try:
        model_server.script([TextReply(content="Noted: the code is 42.")])
        first = first_kit.client().responses.create(model="m", input="Remember code 42.")
    finally:
        assert first_kit.stop()
    second_kit = start_server(tmp_path, model_server)
    try:
        model_server.script([TextReply(content="The code is 42.")])
        second = second_kit.client().responses.create(model="m", input="What was the code?", previous_response_id=first.id)
        assert second.output_text == "The code is 42."
        sent = [m["content"] for m in model_server.requests[-1].body["messages"] if m["role"] != "system"]
        assert sent == ["Remember code 42.", "Noted: the code is 42.", "What was the code?"]
    finally:
        assert second_kit.stop()
