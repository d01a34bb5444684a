"""The test model server over real HTTP on loopback, driven by the real openai SDK (no mocks).

Synchronisation is by the HTTP exchange itself: a response, an exception, the end of a
stream. Sleeps happen only inside the server, as the latency or stall under test.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import trio

import actors.chaos
from actors import UsageError
from actors.chaos import (
    HttpError,
    ModelServer,
    Reply,
    ScriptedCall,
    TextReply,
    ToolCallsReply,
    open_model_server,
)
from protocols import from_json, to_json

USER = [{"role": "user", "content": "what is two plus two"}]


@contextlib.contextmanager
def client_of(server: ModelServer, **options: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, **options) as client:
        yield client


def stream_chunks(client: openai.OpenAI, **options: Any) -> list[Any]:
    options.setdefault("messages", USER)
    with client.chat.completions.create(model="test-model", stream=True, **options) as stream:
        return list(stream)


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def sse_events(body: bytes) -> list[bytes]:
    assert body.endswith(b"\n\n")
    return body[: -len(b"\n\n")].split(b"\n\n")


# -- replies --------------------------------------------------------------------------------


def test_a_non_streaming_request_gets_the_scripted_text_as_a_chat_completion(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="Two plus two is four.")])
    with client_of(model_server) as client:
        completion = client.chat.completions.create(model="test-model", messages=USER)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "Two plus two is four."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 5)
    assert completion.id.startswith("chatcmpl-")


def test_a_streamed_text_reply_reassembles_exactly_from_several_chunks(model_server: ModelServer) -> None:
    text = "Two plus two is four, and four plus four is eight. Ünïcödé survives too."
    model_server.script([TextReply(content=text)])
    with client_of(model_server) as client:
        chunks = stream_chunks(client)
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [c for c in chunks if c.choices[0].delta.content]
    assert len(content_chunks) >= 3
    assert text_of(chunks) == text
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_two_streamed_tool_calls_reassemble_to_the_scripted_names_and_arguments(model_server: ModelServer) -> None:
    calls = (
        ScriptedCall(name="read_file", arguments='{"path": "/etc/hosts", "limit": 20}'),
        ScriptedCall(name="run", arguments='{"command": "ls -la /tmp && echo done"}', id="call_fixed"),
    )
    model_server.script([ToolCallsReply(calls=calls, content="Let me look.")])
    with client_of(model_server) as client:
        chunks = stream_chunks(client)
    assembled: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            if delta.index not in assembled:
                # The first chunk of a call carries id, type and name, and no arguments yet.
                assert delta.id and delta.type == "function" and delta.function.name
                assert delta.function.arguments == ""
                assembled[delta.index] = {"id": delta.id, "name": delta.function.name, "arguments": "", "pieces": 0}
            else:
                assert delta.id is None and delta.function.name is None
                assembled[delta.index]["arguments"] += delta.function.arguments
                assembled[delta.index]["pieces"] += 1
    assert [(a["name"], a["arguments"]) for a in assembled.values()] == [(c.name, c.arguments) for c in calls]
    assert all(a["pieces"] >= 3 for a in assembled.values())
    assert assembled[0]["id"].startswith("call_") and assembled[1]["id"] == "call_fixed"
    assert text_of(chunks) == "Let me look."
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_reasoning_arrives_as_reasoning_content_or_inside_think_tags(model_server: ModelServer) -> None:
    model_server.script(
        [
            TextReply(content="It is 4.", reasoning="two and two make four"),
            TextReply(content="It is 4.", reasoning="two and two make four"),
            TextReply(content="It is 4.", reasoning="two and two make four", think=True),
            TextReply(content="It is 4.", reasoning="two and two make four", think=True),
        ]
    )
    with client_of(model_server) as client:
        chunks = stream_chunks(client)
        message = client.chat.completions.create(model="test-model", messages=USER).choices[0].message
        think_chunks = stream_chunks(client)
        think_message = client.chat.completions.create(model="test-model", messages=USER).choices[0].message
    # The SDK keeps the non-standard field as a pydantic extra.
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content", "") for c in chunks)
    assert reasoning == "two and two make four"
    assert text_of(chunks) == "It is 4."
    assert message.content == "It is 4."
    assert (message.model_extra or {})["reasoning_content"] == "two and two make four"
    assert text_of(think_chunks) == "<think>two and two make four</think>It is 4."
    assert think_message.content == "<think>two and two make four</think>It is 4."
    assert "reasoning_content" not in (think_message.model_extra or {})


def test_include_usage_adds_a_last_chunk_with_no_choices_and_word_counts(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="four, as always"), TextReply(content="four")])
    with client_of(model_server) as client:
        chunks = stream_chunks(client, stream_options={"include_usage": True})
        without = stream_chunks(client)
    *body, last = chunks
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (5, 3, 8)
    assert all(c.usage is None for c in body)
    assert all(c.choices for c in without)


def test_malformed_tool_call_arguments_arrive_verbatim(model_server: ModelServer) -> None:
    broken = '{"path": "/tmp/x", "mode": '
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="write", arguments=broken),))] * 2)
    with client_of(model_server) as client:
        message = client.chat.completions.create(model="test-model", messages=USER).choices[0].message
        chunks = stream_chunks(client)
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.arguments == broken
    streamed = "".join(d.function.arguments or "" for c in chunks for d in c.choices[0].delta.tool_calls or [] if d.function)
    assert streamed == broken


# -- errors ---------------------------------------------------------------------------------


def test_a_429_raises_rate_limit_error_with_the_retry_after_header_visible(model_server: ModelServer) -> None:
    model_server.script([HttpError(status=429, message="Rate limit reached", code="rate_limit_exceeded", retry_after=7)])
    with client_of(model_server) as client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="test-model", messages=USER)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.body == {
        "message": "Rate limit reached",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_a_401_raises_authentication_error(model_server: ModelServer) -> None:
    model_server.script([HttpError(status=401, message="Incorrect API key provided", code="invalid_api_key")])
    with client_of(model_server) as client, pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(model="test-model", messages=USER)
    assert caught.value.code == "invalid_api_key"


@pytest.mark.parametrize("status", [500, 503])
def test_a_500_or_503_raises_internal_server_error(model_server: ModelServer, status: int) -> None:
    model_server.script([HttpError(status=status, message="The server is overloaded", retry_after=0.5)])
    with client_of(model_server) as client, pytest.raises(openai.InternalServerError) as caught:
        stream_chunks(client)
    assert caught.value.status_code == status
    assert caught.value.type == "server_error"
    assert caught.value.response.headers["retry-after"] == "0.5"


def test_a_context_length_400_raises_bad_request_with_code_context_length_exceeded(model_server: ModelServer) -> None:
    model_server.script([HttpError.context_length_exceeded(limit=4096)])
    with client_of(model_server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="test-model", messages=USER)
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.type == "invalid_request_error"
    assert "maximum context length is 4096 tokens" in caught.value.message


# -- faults ---------------------------------------------------------------------------------


def test_a_stall_mid_stream_fails_a_client_with_a_short_timeout_after_the_chunks_before_it(
    model_server: ModelServer,
) -> None:
    model_server.script([TextReply(content="this reply stalls after its third chunk", stall_after_chunks=3, stall_seconds=2)])
    received = []
    with client_of(model_server, timeout=0.2) as client:
        stream = client.chat.completions.create(model="test-model", messages=USER, stream=True)
        # The response head came in time, so the SDK is past its own error wrapping: a read
        # timeout while iterating is httpx's exception, not openai.APITimeoutError.
        with stream, pytest.raises(httpx.ReadTimeout):
            for chunk in stream:
                received.append(chunk)
    assert len(received) == 3


def test_latency_beyond_the_client_timeout_raises_api_timeout_error(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="too late", latency=2)])
    with client_of(model_server, timeout=0.2) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="test-model", messages=USER, stream=True)


def test_a_cut_mid_stream_raises_in_the_client_and_the_server_serves_the_next_request(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="this reply is cut after two chunks", cut_after_chunks=2), TextReply(content="fine")])
    received = []
    with client_of(model_server) as client:
        stream = client.chat.completions.create(model="test-model", messages=USER, stream=True)
        with stream, pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
            for chunk in stream:
                received.append(chunk)
        assert len(received) == 2
        assert text_of(stream_chunks(client)) == "fine"
    assert [r.connection for r in model_server.requests] == [1, 2]


def test_a_cut_of_a_non_streaming_reply_raises_api_connection_error(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="never arrives", cut_after_chunks=0)])
    with client_of(model_server) as client, pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="test-model", messages=USER)


def test_stop_returns_while_a_stream_is_stalled_and_the_client_sees_the_connection_end() -> None:
    server = ModelServer().start()
    server.script([TextReply(content="stalls for a long time", stall_after_chunks=1, stall_seconds=60)])
    with httpx.Client() as http:
        body = {"model": "test-model", "messages": USER, "stream": True}
        with http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
            chunks = response.iter_bytes()
            assert next(chunks).startswith(b"data: ")
            server.stop(timeout=5)  # raises TimeoutError rather than hanging
            with pytest.raises(httpx.RemoteProtocolError):
                list(chunks)
    assert server.internal_errors == []


# -- scripts --------------------------------------------------------------------------------


def test_a_session_header_selects_its_own_script_and_other_requests_take_the_default(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="for alpha")], session="alpha")
    model_server.script([TextReply(content="default one"), TextReply(content="default two")])
    with client_of(model_server) as client:

        def ask(session: str | None) -> str | None:
            headers = {"X-Hermes-Session-Id": session} if session else None
            completion = client.chat.completions.create(model="test-model", messages=USER, extra_headers=headers)
            return completion.choices[0].message.content

        answers = [ask("beta"), ask("alpha"), ask(None)]
    assert answers == ["default one", "for alpha", "default two"]
    assert [r.session for r in model_server.requests] == ["beta", "alpha", None]
    assert model_server.requests[1].path == "/v1/chat/completions"
    assert model_server.requests[1].body["messages"] == USER


def test_with_no_script_at_all_the_server_echoes_the_last_user_message(model_server: ModelServer) -> None:
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second question"}]},
    ]
    with client_of(model_server) as client:
        plain = client.chat.completions.create(model="test-model", messages=messages)
        streamed = stream_chunks(client, messages=messages)
    assert plain.choices[0].message.content == "echo: second question"
    assert text_of(streamed) == "echo: second question"


def test_an_exhausted_script_answers_500_naming_the_session_and_how_many_replies_it_had(
    model_server: ModelServer,
) -> None:
    model_server.script([TextReply(content="only one")], session="s1")
    headers = {"X-Hermes-Session-Id": "s1"}
    with client_of(model_server) as client:
        client.chat.completions.create(model="test-model", messages=USER, extra_headers=headers)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="test-model", messages=USER, extra_headers=headers)
    assert caught.value.code == "script_exhausted"
    assert "the script for session 's1' is exhausted after 1 reply" in caught.value.message


def test_scripting_a_reply_with_negative_latency_is_refused_with_a_usage_error() -> None:
    with pytest.raises(UsageError, match="latency"):
        TextReply(content="x", latency=-1)
    with pytest.raises(UsageError, match="4xx or 5xx"):
        HttpError(status=200, message="not an error")


def test_a_script_round_trips_through_json_as_tagged_replies() -> None:
    script = [
        TextReply(content="hi", reasoning="why", think=True, latency=0.1),
        ToolCallsReply(calls=(ScriptedCall(name="f", arguments="{"),), cut_after_chunks=3),
        HttpError(status=429, message="slow down", retry_after=2),
    ]
    data = to_json(script)
    assert b'"type":"ToolCallsReply"' in data
    assert from_json(data, list[Reply]) == script


def test_the_same_seed_gives_the_same_ids_and_chunk_splits_and_another_seed_does_not() -> None:
    script = [ToolCallsReply(calls=(ScriptedCall(name="f", arguments='{"a": 1, "b": [1, 2, 3]}'),), content="Calling f now.")]
    body = {"model": "test-model", "messages": USER, "stream": True}

    def wire_bytes(seed: int) -> bytes:
        with ModelServer(seed=seed) as server, httpx.Client() as http:
            server.script(script)
            return http.post(f"{server.base_url}/chat/completions", json=body).content

    assert wire_bytes(7) == wire_bytes(7)
    assert wire_bytes(7) != wire_bytes(8)


# -- HTTP -----------------------------------------------------------------------------------


def test_models_lists_the_one_configured_model() -> None:
    with ModelServer(model="tiny-model") as server, client_of(server) as client:
        listed = client.models.list()
    assert [m.id for m in listed.data] == ["tiny-model"]
    assert listed.data[0].object == "model"


def test_the_stream_is_server_sent_events_ending_with_done(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="wire format")])
    with httpx.Client() as http:
        response = http.post(f"{model_server.base_url}/chat/completions", json={"model": "m", "messages": USER, "stream": True})
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["transfer-encoding"] == "chunked"
    events = sse_events(response.content)
    assert all(e.startswith(b"data: ") for e in events)
    assert events[-1] == b"data: [DONE]"
    first = json.loads(events[0].removeprefix(b"data: "))
    assert first["object"] == "chat.completion.chunk"
    assert first["model"] == "m"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_an_unknown_route_is_a_404_and_a_bad_body_a_400_both_in_openai_error_shape(model_server: ModelServer) -> None:
    with httpx.Client(base_url=model_server.base_url) as http:
        missing = http.post("/embeddings", json={})
        bad_json = http.post("/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"})
        no_messages = http.post("/chat/completions", json={"model": "m"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url"
    assert "POST /v1/embeddings" in missing.json()["error"]["message"]
    assert bad_json.status_code == 400
    assert set(bad_json.json()["error"]) >= {"message", "type", "code"}
    assert bad_json.json()["error"]["type"] == "invalid_request_error"
    assert no_messages.status_code == 400
    assert [r.body for r in model_server.requests] == [{}, None, {"model": "m"}]


def test_the_sdk_reuses_one_keep_alive_connection_across_requests_and_errors(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="one"), HttpError(status=429, message="slow down"), TextReply(content="three")])
    with client_of(model_server) as client:
        client.chat.completions.create(model="test-model", messages=USER)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="test-model", messages=USER)
        client.models.list()
        client.chat.completions.create(model="test-model", messages=USER)
    assert [r.connection for r in model_server.requests] == [1, 1, 1, 1]


def test_a_connection_stays_open_after_a_stream_read_to_its_end(model_server: ModelServer) -> None:
    # Not through the SDK: it stops reading at [DONE], before the chunked body's last
    # (empty) chunk, so httpx cannot reuse that connection and opens a new one.
    body = {"model": "test-model", "messages": USER, "stream": True}
    with httpx.Client(base_url=model_server.base_url) as http:
        streamed = http.post("/chat/completions", json=body)
        listed = http.get("/models")
    assert sse_events(streamed.content)[-1] == b"data: [DONE]"
    assert listed.status_code == 200
    assert [r.connection for r in model_server.requests] == [1, 1]


# The SDK's AsyncStream breaks out of its SSE generator at [DONE] without closing it, and
# with it the generators of httpx and httpcore under it; trio warns when they are garbage
# collected (and closes them), asyncio closes them silently.
@pytest.mark.filterwarnings(r"ignore:Async generator '(openai|httpx|httpcore)\._[^']*' was garbage:ResourceWarning")
async def test_async_openai_streams_inside_trio_from_open_model_server() -> None:
    async with open_model_server(seed=5) as server:
        server.script([TextReply(content="streamed under trio through anyio", reasoning="async")])
        server.script([TextReply(content="for other")], session="other")
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
            stream = await client.chat.completions.create(model="test-model", messages=USER, stream=True)
            async with stream:
                chunks = [chunk async for chunk in stream]
            other = await client.chat.completions.create(model="test-model", messages=USER, extra_headers={"X-Hermes-Session-Id": "other"})
    assert text_of(chunks) == "streamed under trio through anyio"
    assert other.choices[0].message.content == "for other"


async def test_leaving_open_model_server_ends_a_stalled_stream() -> None:
    async with httpx.AsyncClient() as http:
        async with open_model_server() as server:
            server.script([TextReply(content="stalls", stall_after_chunks=1, stall_seconds=60)])
            body = {"model": "test-model", "messages": USER, "stream": True}
            request = http.build_request("POST", f"{server.base_url}/chat/completions", json=body)
            response = await http.send(request, stream=True)
            chunks = response.aiter_bytes()
            assert (await chunks.__anext__()).startswith(b"data: ")
        with trio.fail_after(5), pytest.raises(httpx.RemoteProtocolError):
            async for _ in chunks:
                pass
        await response.aclose()


def test_the_chaos_package_exports_a_sorted_all_of_exactly_its_public_names() -> None:
    exported = list(actors.chaos.__all__)
    assert exported == sorted(exported)
    public = sorted(name for name, value in vars(actors.chaos).items() if not name.startswith("_") and type(value).__name__ != "module")
    assert exported == public
