"""The plain model id: chat completions forwarded to the upstream model, no tools, nothing stored."""

from __future__ import annotations

import openai
import pytest

from actors.chaos import HttpError, TextReply
from tests.platforms.server_kit import ServerKit

PLAIN = "hermes-test-plain"
TASK = [{"role": "system", "content": "Write a 3-word title."}, {"role": "user", "content": "We talked about trains."}]


def test_models_lists_the_agent_and_the_plain_model(api: ServerKit) -> None:
    assert [m.id for m in api.client().models.list().data] == ["hermes-test", PLAIN]


def test_a_plain_completion_forwards_the_messages_and_sampling_parameters_and_stores_nothing(api: ServerKit) -> None:
    api.model.script([TextReply(content="Talking About Trains")])
    reply = api.client().chat.completions.create(model=PLAIN, messages=TASK, temperature=0.2, max_tokens=12, stop=["\n"], seed=7)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "Talking About Trains"
    assert reply.object == "chat.completion" and reply.usage is not None
    sent = api.model.requests[-1]
    assert sent.session is None
    assert sent.body == {"messages": TASK, "temperature": 0.2, "max_tokens": 12, "stop": ["\n"], "seed": 7, "stream": False, "model": "test-model"}
    with api.http() as http:
        assert http.get("/v1/sessions").json()["data"] == []


def test_a_streamed_plain_completion_arrives_as_chunks_and_done(api: ServerKit) -> None:
    api.model.script([TextReply(content="Talking About Trains")])
    stream = api.client().chat.completions.create(model=PLAIN, messages=TASK, stream=True, stream_options={"include_usage": True})  # type: ignore[arg-type]
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Talking About Trains"
    assert chunks[-1].usage is not None
    assert "tools" not in api.model.requests[-1].body and api.model.requests[-1].body["stream"] is True


def test_plain_completion_failures_are_openai_envelopes_with_the_right_status(api: ServerKit) -> None:
    client = api.client()
    api.model.script([HttpError(status=400, message="temperature is out of range", code="invalid_value")])
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=PLAIN, messages=TASK, temperature=9)  # type: ignore[arg-type]
    assert "temperature is out of range" in str(bad.value) and bad.value.code == "invalid_value"
    api.model.script([HttpError(status=401, message="bad upstream key")])
    with pytest.raises(openai.APIStatusError) as upstream:
        client.chat.completions.create(model=PLAIN, messages=TASK, stream=True)  # type: ignore[arg-type]
    assert upstream.value.status_code == 502 and "bad upstream key" in str(upstream.value)
    api.model.script([HttpError(status=429, message="slow down", retry_after=3)])
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model=PLAIN, messages=TASK)  # type: ignore[arg-type]
    assert limited.value.response.headers["retry-after"] == "3"
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(model=PLAIN, messages=TASK, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])  # type: ignore[arg-type]
    assert tools.value.code == "tools_not_supported"


def test_a_plain_stream_cut_by_the_upstream_ends_with_an_error_frame(api: ServerKit) -> None:
    api.model.script([TextReply(content="one two three four five six", cut_after_chunks=2)])
    stream = api.client().chat.completions.create(model=PLAIN, messages=TASK, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError) as cut:
        list(stream)
    assert "upstream model" in str(cut.value)
