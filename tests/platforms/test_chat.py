"""The API server driven by the official openai SDK and raw HTTP."""

from __future__ import annotations

import openai
import pytest

from actors.chaos import HttpError, ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit


def test_health_needs_no_key_and_models_lists_the_advertised_model(api: ServerKit) -> None:
    with api.http() as http:
        assert http.get("/health", headers={"Authorization": ""}).json()["status"] == "ok"
    assert [m.id for m in api.client().models.list().data] == ["hermes-test", "hermes-test-plain"]


def test_a_plain_chat_completion_runs_a_turn_with_tools_and_keeps_the_session(api: ServerKit) -> None:
    api.model.script(
        [ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "a", "seconds": 0.01}'),)), TextReply(content="It says hi.")],
        session="conv-1",
    )
    response = api.client().chat.completions.with_raw_response.create(
        model="hermes-test",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What does a say?"}],
        extra_headers={"X-Hermes-Session-Id": "conv-1"},
    )
    completion = response.parse()
    assert completion.choices[0].message.content == "It says hi."
    assert completion.choices[0].finish_reason == "stop"
    assert response.headers["x-hermes-session-id"] == "conv-1"
    sent = api.model.requests[0].body["messages"]
    assert sent[1] == {"role": "system", "content": "Be brief."}  # the ephemeral system prompt, after ours


def test_a_streamed_chat_completion_sends_deltas_tool_progress_usage_and_done(api: ServerKit) -> None:
    api.model.script([TextReply(content="one two three four")], session="conv-2")
    stream = api.client().chat.completions.create(
        model="hermes-test",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Hermes-Session-Id": "conv-2"},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # OpenAI's include_usage shape
    assert all(c.usage is None for c in chunks[:-1])


def test_string_booleans_are_accepted_and_bad_requests_get_the_openai_error_envelope(api: ServerKit) -> None:
    with api.http() as http:
        api.model.script([TextReply(content="ok")], session="conv-3")
        ok = http.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "stream": "false"}, headers={"X-Hermes-Session-Id": "conv-3"}
        )
        assert ok.status_code == 200, ok.text
        missing = http.post("/v1/chat/completions", json={"model": "x"})
        assert missing.status_code == 400
        assert missing.json()["error"]["param"] == "messages"
        broken = http.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
        assert http.get("/v1/nothing").status_code == 404
        huge = http.post("/v1/chat/completions", content=b"x" * (10 * 1024 * 1024 + 1))
        assert huge.status_code == 413
        bad_session = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, headers={"X-Hermes-Session-Id": "a\tb"})
        assert bad_session.status_code == 400
        for header in ({}, {"Authorization": "Bearer wrong-key-wrong-key"}):
            denied = http.get("/v1/models", headers=header or {"Authorization": ""})
            assert denied.status_code == 401 and denied.json()["error"]["type"] == "authentication_error"
        for name in ("x-content-type-options", "x-frame-options"):
            assert name in ok.headers


def test_a_model_failure_becomes_an_error_response(api: ServerKit) -> None:
    api.model.script([HttpError(status=401, message="bad upstream key")], session="conv-4")
    with pytest.raises(openai.APIStatusError) as info:
        api.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Hermes-Session-Id": "conv-4"})
    assert info.value.status_code == 502
    assert "bad upstream key" in str(info.value)


def test_a_disallowed_origin_is_refused(api: ServerKit) -> None:
    with api.http() as http:
        refused = http.get("/v1/models", headers={"Origin": "https://evil.example"})
        assert refused.status_code == 403
