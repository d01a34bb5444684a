"""The test model server's provider faults over real HTTP on loopback: per-key scripts and
standing faults, the errors real providers send, silent streams, ``length``, refused streams.

Bodies and headers are read with httpx (exactly as sent); how the openai SDK classifies them
is checked with the SDK. Dated headers are read against a pinned server clock.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import openai
import pytest
import trio

from actors import UsageError
from actors.chaos import ClockHeader, HttpError, ModelServer, Reply, ScriptedCall, TextReply, ToolCallsReply
from actors.chaos._http import serve_connection
from actors.chaos._render import render
from protocols import from_json, to_json

USER = [{"role": "user", "content": "what is two plus two"}]
NOW = 1_700_000_000.0
"""The pinned clock: 2023-11-14T22:13:20Z."""
HINTS = {
    "retry-after",
    "retry-after-ms",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "x-ratelimit-reset",
}
"""Every header that says when a rate limit resets."""


def post(server: ModelServer, *, key: str | None = None, session: str | None = None, **body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if session:
        headers["X-Hermes-Session-Id"] = session
    with httpx.Client() as http:
        return http.post(f"{server.base_url}/chat/completions", json={"model": "test-model", "messages": USER, **body}, headers=headers)


def answer(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def served(reply: Reply, *, clock: float = NOW, **body: Any) -> httpx.Response:
    """The response a new server with a pinned clock sends for ``reply``."""
    with ModelServer(clock=lambda: clock) as server:
        server.script([reply])
        return post(server, **body)


@contextlib.contextmanager
def sdk(server: ModelServer, key: str = "test", **options: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, **options) as client:
        yield client


def sdk_error(reply: Reply) -> openai.APIStatusError:
    """The exception the openai SDK raises when the server answers ``reply``."""
    with ModelServer() as server, sdk(server) as client:
        server.script([reply])
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="test-model", messages=USER)
    return caught.value


# -- per-key scripts and standing faults ----------------------------------------------------


def test_a_key_with_a_queue_takes_from_it_before_its_session_and_other_keys_fall_through(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="for key b")], key="sk-b")
    model_server.script([TextReply(content="for alpha")], session="alpha")
    model_server.script([TextReply(content="default")])
    answers = [
        answer(post(model_server, key="sk-b", session="alpha")),
        answer(post(model_server, key="sk-a", session="alpha")),
        answer(post(model_server, key="sk-c")),
    ]
    dry = post(model_server, key="sk-b")
    assert answers == ["for key b", "for alpha", "default"]
    assert dry.status_code == 500
    assert dry.json()["error"]["code"] == "script_exhausted"
    assert "the script for key 'sk-b' is exhausted after 1 reply" in dry.json()["error"]["message"]
    assert "key='sk-b'" in dry.json()["error"]["message"]
    assert [r.api_key for r in model_server.requests] == ["sk-b", "sk-a", "sk-c", "sk-b"]


def test_the_api_key_is_recorded_from_a_bearer_header_only(model_server: ModelServer) -> None:
    with httpx.Client() as http:
        url = f"{model_server.base_url}/chat/completions"
        for headers in ({"Authorization": "bearer sk-lower"}, {"Authorization": "Basic dXNlcjpwdw=="}, {}):
            http.post(url, json={"messages": USER}, headers=headers)
    with sdk(model_server, key="sk-sdk") as client:
        client.models.list()
    assert [r.api_key for r in model_server.requests] == ["sk-lower", None, None, "sk-sdk"]


def test_a_standing_key_fault_answers_every_request_with_that_key_until_cleared(model_server: ModelServer) -> None:
    revoked = HttpError.invalid_api_key("sk-old-0123456789")
    model_server.fail_key("sk-old", revoked)
    model_server.script([TextReply(content="after the fix")], key="sk-old")
    model_server.script([TextReply(content="other key")])
    with sdk(model_server, key="sk-old") as old, sdk(model_server, key="sk-new") as new:
        for _ in range(3):
            with pytest.raises(openai.AuthenticationError) as caught:
                old.chat.completions.create(model="test-model", messages=USER, stream=True)
            assert caught.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            old.models.list()
        assert new.models.list().data[0].id == "test-model"
        assert new.chat.completions.create(model="test-model", messages=USER).choices[0].message.content == "other key"
        model_server.clear_key("sk-old")
        model_server.clear_key("sk-never-failed")
        # The standing fault took nothing from the key's queue.
        assert old.chat.completions.create(model="test-model", messages=USER).choices[0].message.content == "after the fix"


def test_a_standing_fault_may_be_any_reply_and_replaces_an_earlier_one(model_server: ModelServer) -> None:
    model_server.fail_key("sk-slow", HttpError.overloaded(status=503))
    model_server.fail_key("sk-slow", TextReply(content="always this", finish_reason="length"))
    first, second = post(model_server, key="sk-slow"), post(model_server, key="sk-slow")
    assert [answer(first), answer(second)] == ["always this", "always this"]
    assert first.json()["choices"][0]["finish_reason"] == "length"
    assert first.json()["id"] != second.json()["id"]


def test_scripting_by_key_is_checked(model_server: ModelServer) -> None:
    with pytest.raises(UsageError, match="not both"):
        model_server.script([TextReply(content="x")], session="s", key="k")
    with pytest.raises(UsageError, match="non-empty string without spaces"):
        model_server.script([TextReply(content="x")], key="")
    with pytest.raises(UsageError, match="non-empty string without spaces"):
        model_server.fail_key("sk a", HttpError.invalid_api_key())
    with pytest.raises(UsageError, match="fail_key.*TextReply, ToolCallsReply or HttpError"):
        model_server.fail_key("sk-a", "401")
    with pytest.raises(UsageError, match="script.*TextReply, ToolCallsReply or HttpError"):
        model_server.script([{"content": "x"}])
    assert answer(post(model_server, key="sk-a")) == "echo: what is two plus two"


# -- rate limits in every spelling ----------------------------------------------------------

SPELLINGS: dict[str, dict[str, str]] = {
    "retry-after": {"retry-after": "90"},
    "http-date": {"retry-after": "Tue, 14 Nov 2023 22:14:50 GMT"},
    "retry-after-ms": {"retry-after-ms": "90000"},
    "openai": {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1m30s",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "28500",
        "x-ratelimit-reset-tokens": "20ms",
    },
    "anthropic": {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2023-11-14T22:14:50Z",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "38000",
        "anthropic-ratelimit-tokens-reset": "2023-11-14T22:13:21Z",
    },
    "openrouter": {"x-ratelimit-limit": "20", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000090000"},
    "none": {},
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_rate_limit_sends_its_reset_hint_in_one_spelling_and_no_other(spelling: Any) -> None:
    response = served(HttpError.rate_limited(seconds=90, spelling=spelling))
    assert response.status_code == 429
    assert response.reason_phrase == "Too Many Requests"
    expected = SPELLINGS[spelling]
    assert {name: response.headers[name] for name in expected} == expected
    assert HINTS & set(response.headers) == HINTS & set(expected)


def test_each_provider_spelling_comes_with_that_providers_body() -> None:
    openai_body = served(HttpError.rate_limited(seconds=90, spelling="openai")).json()["error"]
    assert (openai_body["type"], openai_body["code"]) == ("requests", "rate_limit_exceeded")
    assert "Please try again in 1m30s." in openai_body["message"]
    anthropic_body = served(HttpError.rate_limited(seconds=90, spelling="anthropic")).json()
    assert set(anthropic_body) == {"type", "error"}
    assert anthropic_body["type"] == "error"
    assert anthropic_body["error"]["type"] == "rate_limit_error"
    assert "50 requests per minute" in anthropic_body["error"]["message"]
    assert served(HttpError.rate_limited(spelling="openrouter")).json() == {"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min."}}
    generic = served(HttpError.rate_limited(spelling="http-date")).json()["error"]
    assert (generic["type"], generic["code"]) == ("rate_limit_error", "rate_limit_exceeded")


def test_a_tokens_limit_is_the_exhausted_one_when_asked() -> None:
    openai_tokens = served(HttpError.rate_limited(seconds=6, spelling="openai", exhausted="tokens"))
    assert openai_tokens.headers["x-ratelimit-remaining-tokens"] == "0"
    assert openai_tokens.headers["x-ratelimit-reset-tokens"] == "6s"
    assert openai_tokens.headers["x-ratelimit-remaining-requests"] == "475"
    assert openai_tokens.headers["x-ratelimit-reset-requests"] == "20ms"
    assert openai_tokens.json()["error"]["type"] == "tokens"
    assert "tokens per min (TPM)" in openai_tokens.json()["error"]["message"]
    anthropic_tokens = served(HttpError.rate_limited(seconds=6, spelling="anthropic", exhausted="tokens"))
    assert anthropic_tokens.headers["anthropic-ratelimit-tokens-remaining"] == "0"
    assert anthropic_tokens.headers["anthropic-ratelimit-tokens-reset"] == "2023-11-14T22:13:26Z"


@pytest.mark.parametrize(
    ("seconds", "duration"),
    [(0, "0s"), (0.02, "20ms"), (0.0125, "12.5ms"), (1, "1s"), (7.5, "7.5s"), (90, "1m30s"), (360, "6m0s"), (3725.25, "1h2m5.25s")],
)
def test_openai_reset_durations_are_written_as_go_durations(seconds: float, duration: str) -> None:
    assert dict(HttpError.rate_limited(seconds=seconds, spelling="openai").headers)["x-ratelimit-reset-requests"] == duration


def test_dated_headers_are_written_from_the_clock_when_sent_rounded_up_to_the_second() -> None:
    now = [NOW + 0.25]
    reply = HttpError.rate_limited(seconds=90, spelling="http-date")
    with ModelServer(clock=lambda: now[0]) as server:
        server.script([reply, reply, HttpError.rate_limited(seconds=90, spelling="openrouter")])
        first = post(server)
        now[0] += 60
        second, openrouter = post(server), post(server)
    assert first.headers["retry-after"] == "Tue, 14 Nov 2023 22:14:51 GMT"
    assert second.headers["retry-after"] == "Tue, 14 Nov 2023 22:15:51 GMT"
    assert openrouter.headers["x-ratelimit-reset"] == "1700000150250"


def test_a_clock_header_in_unix_seconds_and_scripted_headers_replace_the_usual_ones() -> None:
    reply = HttpError(
        status=502,
        message="bad gateway",
        headers=(("content-type", "text/html"), ("x-request-id", "req_fixed"), ("server", "nginx")),
        clock_headers=(ClockHeader(name="x-ratelimit-reset", seconds=30, format="unix"),),
        body="<html><body>502 Bad Gateway</body></html>",
    )
    response = served(reply)
    assert response.status_code == 502
    assert response.text == "<html><body>502 Bad Gateway</body></html>"
    assert response.headers["content-type"] == "text/html"
    assert response.headers.get_list("x-request-id") == ["req_fixed"]
    assert response.headers.get_list("server") == ["nginx"]
    assert response.headers["x-ratelimit-reset"] == "1700000030"


def test_the_sdk_sees_every_rate_limit_as_a_rate_limit_error_with_its_headers() -> None:
    for spelling in SPELLINGS:
        error = sdk_error(HttpError.rate_limited(seconds=90, spelling=spelling))
        assert isinstance(error, openai.RateLimitError), spelling
        assert HINTS & set(error.response.headers) == HINTS & set(SPELLINGS[spelling])


# -- the other failures ---------------------------------------------------------------------


def test_out_of_credit_is_openrouters_402_or_openais_insufficient_quota_429() -> None:
    credits = served(HttpError.insufficient_credits())
    assert credits.status_code == 402
    assert credits.json() == {"error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits"}}
    quota = sdk_error(HttpError.insufficient_quota())
    assert isinstance(quota, openai.RateLimitError)
    assert quota.code == "insufficient_quota"
    assert quota.type == "insufficient_quota"
    assert quota.body["message"].startswith("You exceeded your current quota")
    assert HINTS.isdisjoint(quota.response.headers)
    assert sdk_error(HttpError.insufficient_credits()).status_code == 402


def test_an_invalid_key_is_openais_401_with_the_key_masked() -> None:
    error = sdk_error(HttpError.invalid_api_key("sk-proj-abcdef123456"))
    assert isinstance(error, openai.AuthenticationError)
    assert error.code == "invalid_api_key"
    assert error.body["message"].startswith("Incorrect API key provided: sk-******3456. ")
    assert "abcdef" not in error.message
    assert sdk_error(HttpError.invalid_api_key()).body["message"].startswith("Incorrect API key provided. ")


def test_overload_is_anthropics_529_or_a_503_and_both_are_server_errors() -> None:
    anthropic = served(HttpError.overloaded())
    assert anthropic.status_code == 529
    assert anthropic.reason_phrase == ""
    assert anthropic.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    busy = served(HttpError.overloaded(status=503, retry_after=2))
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "2"
    assert busy.json()["error"]["type"] == "server_error"
    for reply in (HttpError.overloaded(), HttpError.overloaded(status=503)):
        assert isinstance(sdk_error(reply), openai.InternalServerError)


CONTEXT_BODIES: dict[str, Any] = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "vllm": {
        "object": "error",
        "message": (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). "
            "Please reduce the length of the messages or completion."
        ),
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llamacpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 4000,
            "n_ctx": 4096,
        }
    },
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 4000 tokens > 4096 maximum"}},
    "ollama": {"error": "the input length exceeds the context length"},
}


@pytest.mark.parametrize("style", CONTEXT_BODIES)
def test_a_context_overflow_is_a_400_in_each_servers_wording(style: Any) -> None:
    if style == "openai":
        reply = HttpError.context_overflow(style=style, limit=4096, prompt_tokens=5000)
    else:
        reply = HttpError.context_overflow(style=style, limit=4096, prompt_tokens=4000, max_tokens=1000)
    response = served(reply)
    assert response.status_code == 400
    assert response.json() == CONTEXT_BODIES[style]
    assert isinstance(sdk_error(reply), openai.BadRequestError)


def test_an_unknown_model_is_a_404_and_an_unsupported_parameter_a_400_naming_it() -> None:
    missing = sdk_error(HttpError.model_not_found("gpt-9"))
    assert isinstance(missing, openai.NotFoundError)
    assert missing.code == "model_not_found"
    assert missing.body["message"] == "The model `gpt-9` does not exist or you do not have access to it."
    unsupported = served(HttpError.unsupported_parameter()).json()["error"]
    assert unsupported == {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
    bare = HttpError.unsupported_parameter("logprobs", instead=None)
    assert bare.message == "Unsupported parameter: 'logprobs' is not supported with this model."


def test_provider_errors_round_trip_through_json() -> None:
    script: list[Reply] = [
        HttpError.rate_limited(spelling="anthropic"),
        HttpError.rate_limited(spelling="openai"),
        HttpError.context_overflow(style="llamacpp"),
        TextReply(content="cut", finish_reason="length", silent_after_chunks=2),
    ]
    assert from_json(to_json(script), list[Reply]) == script


def test_new_reply_fields_are_checked_with_usage_errors() -> None:
    cases: list[tuple[str, Any]] = [
        ("finish_reason must be 'stop', 'length' or 'content_filter'", lambda: TextReply(content="x", finish_reason="max_tokens")),
        ("silent_after_chunks must be >= 0", lambda: TextReply(content="x", silent_after_chunks=-1)),
        ("HTTP token", lambda: HttpError(status=429, message="x", headers=(("retry after", "1"),))),
        ("sets the 'Content-Length' header itself", lambda: HttpError(status=429, message="x", headers=(("Content-Length", "1"),))),
        ("printable ASCII", lambda: HttpError(status=429, message="x", headers=(("x-a", "1\r\nx-b: 2"),))),
        ("pairs", lambda: HttpError(status=429, message="x", headers=(("x-a",),))),
        ("retry_after must be a finite number", lambda: HttpError(status=429, message="x", retry_after=-1)),
        ("ClockHeader.format", lambda: ClockHeader(name="x-reset", seconds=1, format="iso")),
        ("ClockHeader.seconds", lambda: ClockHeader(name="x-reset", seconds=float("inf"), format="unix")),
        ("spelling=...) must be one of", lambda: HttpError.rate_limited(spelling="github")),
        ("exhausted=...) must be one of", lambda: HttpError.rate_limited(exhausted="minutes")),
        ("rate_limited(seconds=...) must be a finite", lambda: HttpError.rate_limited(seconds=-1)),
        ("style=...) must be one of", lambda: HttpError.context_overflow(style="gemini")),
        ("limit=...) must be a whole number of tokens >= 1", lambda: HttpError.context_overflow(limit=0)),
        ("status=...) must be one of 503, 529", lambda: HttpError.overloaded(status=500)),
        ("clock=...) takes a function", lambda: ModelServer(clock=1.0)),
        ("refuse_stream=...) must be True or False", lambda: ModelServer(refuse_stream="yes")),
    ]
    for match, make in cases:
        with pytest.raises(UsageError, match=re.escape(match)):
            make()
    # A script loaded from JSON is checked the same way.
    with pytest.raises(UsageError, match="silent_after_chunks"):
        msgspec.json.decode(b'{"type": "TextReply", "content": "x", "silent_after_chunks": -1}', type=Reply)
    with pytest.raises(msgspec.ValidationError, match="finish_reason"):
        msgspec.json.decode(b'{"type": "TextReply", "content": "x", "finish_reason": "oops"}', type=Reply)


# -- silent streams ---------------------------------------------------------------------------


def test_a_silent_stream_sends_its_first_chunks_then_nothing_until_the_client_times_out(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="this reply goes silent after its second chunk", silent_after_chunks=2), TextReply(content="next")])
    received = []
    with sdk(model_server, timeout=0.3) as client:
        stream = client.chat.completions.create(model="test-model", messages=USER, stream=True)
        with stream, pytest.raises(httpx.ReadTimeout):
            for chunk in stream:
                received.append(chunk)
        assert client.chat.completions.create(model="test-model", messages=USER).choices[0].message.content == "next"
    assert len(received) == 2


def test_a_silent_non_streaming_reply_sends_its_head_and_never_its_body(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="never arrives", silent_after_chunks=0)])
    with sdk(model_server, timeout=0.3) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="test-model", messages=USER)


def test_stop_ends_a_silent_stream_at_once() -> None:
    server = ModelServer().start()
    server.script([TextReply(content="silent for ever", silent_after_chunks=1)])
    with httpx.Client() as http:
        body = {"model": "test-model", "messages": USER, "stream": True}
        with http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
            chunks = response.iter_bytes()
            assert next(chunks).startswith(b"data: ")
            server.stop(timeout=5)  # raises TimeoutError rather than hanging
            with pytest.raises(httpx.RemoteProtocolError):
                list(chunks)
    assert server.internal_errors == []


async def test_a_silent_connection_ends_on_the_server_when_the_client_closes_it() -> None:
    planned = render(TextReply(content="goes silent", silent_after_chunks=1), {"messages": USER, "stream": True}, rng=random.Random(0), model="m", now=NOW)
    server_socket, client_socket = trio.socket.socketpair()
    client = trio.SocketStream(client_socket)
    ended = trio.Event()

    async def serve() -> None:
        await serve_connection(trio.SocketStream(server_socket), 1, lambda incoming: planned)
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        await client.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n{}")
        received = b""
        while b"data: " not in received:
            received += await client.receive_some(65536)
        with trio.move_on_after(0.2):
            await ended.wait()
        assert not ended.is_set(), "the server ended a silent response on its own"
        await client.aclose()
        with trio.fail_after(5):
            await ended.wait()


# -- length, non-streaming, refused streams ---------------------------------------------------


def test_a_reply_cut_by_the_token_limit_finishes_with_length_streamed_and_not(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="The answer is four, because two", finish_reason="length")] * 2)
    with sdk(model_server) as client:
        whole = client.chat.completions.create(model="test-model", messages=USER).choices[0]
        with client.chat.completions.create(model="test-model", messages=USER, stream=True) as stream:
            chunks = list(stream)
    assert (whole.message.content, whole.finish_reason) == ("The answer is four, because two", "length")
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "The answer is four, because two"
    assert [c.choices[0].finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["length"]


def test_a_stream_false_request_gets_one_whole_json_completion(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="whole"), ToolCallsReply(calls=(ScriptedCall(name="f", arguments="{}"),))])
    text, calls = post(model_server, stream=False), post(model_server, stream=False)
    assert text.headers["content-type"] == "application/json"
    assert int(text.headers["content-length"]) == len(text.content)
    assert text.json()["object"] == "chat.completion"
    assert answer(text) == "whole"
    assert calls.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert calls.json()["choices"][0]["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}


def test_an_endpoint_that_refuses_streaming_answers_400_and_serves_plain_requests() -> None:
    with ModelServer(refuse_stream=True) as server, sdk(server) as client:
        server.script([TextReply(content="plain works"), TextReply(content="explicit works")])
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="test-model", messages=USER, stream=True)
        plain = client.chat.completions.create(model="test-model", messages=USER)
        explicit = post(server, stream=False)
    assert caught.value.param == "stream"
    assert caught.value.code == "unsupported_value"
    assert "Streaming is not supported" in caught.value.message
    # The refusal took no scripted reply: the plain request got it.
    assert plain.choices[0].message.content == "plain works"
    assert answer(explicit) == "explicit works"
    assert [r.body.get("stream") for r in server.requests] == [True, None, False]


def test_a_standing_key_fault_comes_before_a_refused_stream_which_comes_before_the_keys_queue() -> None:
    with ModelServer(refuse_stream=True) as server:
        server.fail_key("sk-bad", HttpError.invalid_api_key())
        server.script([TextReply(content="for sk-b")], key="sk-bad")
        server.script([TextReply(content="for sk-ok")], key="sk-ok")
        revoked = post(server, key="sk-bad", stream=True)
        refused = post(server, key="sk-ok", stream=True)
        served_plain = post(server, key="sk-ok")
    assert revoked.status_code == 401
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "stream"
    assert answer(served_plain) == "for sk-ok"
