"""The test model server's context window over real HTTP on loopback: its own token count,
the overflow 400 in each server's wording past the window, usage reporting the count.

Counts are worked out by hand from the rule in ``actors.chaos._server``'s docstring:
``ceil(C / 4) + 4 * M`` for M messages and C characters of text.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from typing import Any, get_args

import httpx
import openai
import pytest

from actors import UsageError
from actors.chaos import HttpError, ModelServer, TextReply
from actors.chaos._script import ContextStyle

TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {"type": "object"}}}]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "abcd" * 10},
    {"role": "user", "content": [{"type": "text", "text": "1234"}, {"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "5678"}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"p":"x"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "result"},
]
TOOLS_CHARS = len(json.dumps(TOOLS, separators=(",", ":")))
BARE_TOKENS = math.ceil((40 + 8 + (4 + 9) + 6) / 4) + 4 * 4
"""CONVERSATION without tools: the system text, the two text parts, the call's name and arguments, the tool result; four messages."""
CONVERSATION_TOKENS = math.ceil((40 + 8 + (4 + 9) + 6 + TOOLS_CHARS) / 4) + 4 * 4
"""CONVERSATION with TOOLS: their compact JSON counts too."""
LONG = [{"role": "user", "content": "x" * 400}]
LONG_TOKENS = 100 + 4
SHORT = [{"role": "user", "content": "hi"}]
SHORT_TOKENS = 1 + 4


def post(server: ModelServer, messages: list[dict[str, Any]], *, key: str | None = None, **body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client() as http:
        return http.post(f"{server.base_url}/chat/completions", json={"model": "test-model", "messages": messages, **body}, headers=headers)


def answer(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


@contextlib.contextmanager
def sdk(server: ModelServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        yield client


# -- the count and usage --------------------------------------------------------------------


def test_under_the_window_the_scripted_reply_answers_and_usage_reports_the_servers_count() -> None:
    assert (TOOLS_CHARS, CONVERSATION_TOKENS) == (108, 60)  # ceil((67 + 108) / 4) + 16: the rule, pinned
    with ModelServer(context_window=4096) as server:
        server.script([TextReply(content="under the window")])
        response = post(server, CONVERSATION, tools=TOOLS)
    assert answer(response) == "under the window"
    assert response.json()["usage"]["prompt_tokens"] == CONVERSATION_TOKENS
    assert response.json()["usage"]["total_tokens"] == CONVERSATION_TOKENS + 3
    assert [r.prompt_tokens for r in server.requests] == [CONVERSATION_TOKENS]


def test_a_request_of_exactly_the_window_is_served_and_one_token_over_is_not() -> None:
    with ModelServer(context_window=LONG_TOKENS) as fits, ModelServer(context_window=LONG_TOKENS - 1) as tight:
        fits.script([TextReply(content="fits")])
        tight.script([TextReply(content="does not")])
        assert answer(post(fits, LONG)) == "fits"
        assert post(tight, LONG).status_code == 400


def test_without_a_window_nothing_overflows_usage_counts_words_and_the_count_is_still_recorded() -> None:
    with ModelServer() as server:
        server.script([TextReply(content="no limit")])
        response = post(server, [{"role": "user", "content": "two words " * 5000}], max_tokens=10**9)
    assert answer(response) == "no limit"
    assert response.json()["usage"]["prompt_tokens"] == 10_000
    assert [r.prompt_tokens for r in server.requests] == [math.ceil(50_000 / 4) + 4]


def test_only_chat_completions_with_a_messages_list_are_counted() -> None:
    with ModelServer(context_window=10) as server, httpx.Client() as http:
        http.get(f"{server.base_url}/models")
        http.post(f"{server.base_url}/chat/completions", json={"prompt": "x" * 400})
    assert [r.prompt_tokens for r in server.requests] == [None, None]


# -- past the window ------------------------------------------------------------------------

REQUESTED = "However, you requested 124 tokens (104 in the messages, 20 in the completion). Please reduce the length of the messages or completion."
OVERFLOW_BODIES: dict[str, Any] = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 50 tokens. However, your messages resulted in 104 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "vllm": {
        "object": "error",
        "message": f"This model's maximum context length is 50 tokens. {REQUESTED}",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llamacpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 104,
            "n_ctx": 50,
        }
    },
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 104 tokens > 50 maximum"}},
    "ollama": {"error": "the input length exceeds the context length"},
}
"""The body of each style for LONG (104 tokens) against a window of 50 (vllm's asks 20 more for the completion)."""


def test_every_context_style_has_its_expected_body() -> None:
    assert set(OVERFLOW_BODIES) == set(get_args(ContextStyle))


@pytest.mark.parametrize("style", OVERFLOW_BODIES)
def test_past_the_window_the_server_answers_the_styles_real_overflow_400_and_keeps_the_scripted_reply(style: Any) -> None:
    room: dict[str, Any] = {"max_tokens": 20} if style == "vllm" else {}
    with ModelServer(context_window=50, overflow_style=style) as server:
        server.script([TextReply(content="kept for the next request")])
        overflow = post(server, LONG, **room)
        served = post(server, SHORT)
    assert overflow.status_code == 400
    assert overflow.headers["content-type"] == "application/json"
    assert overflow.json() == OVERFLOW_BODIES[style]
    assert answer(served) == "kept for the next request"
    assert served.json()["usage"]["prompt_tokens"] == SHORT_TOKENS
    assert [r.prompt_tokens for r in server.requests] == [LONG_TOKENS, SHORT_TOKENS]


def test_the_sdk_sees_an_openai_style_overflow_as_a_bad_request_with_code_context_length_exceeded() -> None:
    with ModelServer(context_window=50) as server, sdk(server) as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="test-model", messages=LONG)
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length is 50 tokens" in caught.value.message


def test_the_completion_room_asked_for_counts_against_the_window() -> None:
    with ModelServer(context_window=LONG_TOKENS + 20, overflow_style="vllm") as server:
        server.script([TextReply(content="room enough"), TextReply(content="completion tokens win")])
        fits = post(server, LONG, max_tokens=20)
        over = post(server, LONG, max_tokens=21)
        over_new_name = post(server, LONG, max_completion_tokens=21)
        completion_tokens_first = post(server, LONG, max_completion_tokens=20, max_tokens=10_000)
        ignored = post(server, LONG, max_tokens=-5)
    assert answer(fits) == "room enough"
    assert over.status_code == over_new_name.status_code == 400
    assert "you requested 125 tokens (104 in the messages, 21 in the completion)" in over.json()["message"]
    assert over_new_name.json() == over.json()
    assert answer(completion_tokens_first) == "completion tokens win"
    assert ignored.status_code == 500  # not an overflow: it reached the script, which ran dry
    assert ignored.json()["error"]["code"] == "script_exhausted"


def test_the_tools_schemas_count_against_the_window() -> None:
    assert BARE_TOKENS == 33
    with ModelServer(context_window=BARE_TOKENS) as server:
        server.script([TextReply(content="fits without tools")])
        bare = post(server, CONVERSATION)
        with_tools = post(server, CONVERSATION, tools=TOOLS)
    assert answer(bare) == "fits without tools"
    assert with_tools.status_code == 400
    assert f"your messages resulted in {CONVERSATION_TOKENS} tokens" in with_tools.json()["error"]["message"]


# -- streams and precedence -----------------------------------------------------------------


def test_a_streamed_request_past_the_window_is_an_http_400_before_any_stream() -> None:
    with ModelServer(context_window=50, overflow_style="anthropic") as server, sdk(server) as client:
        server.script([TextReply(content="streamed after all")])
        raw = post(server, LONG, stream=True)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="test-model", messages=LONG, stream=True)
        with client.chat.completions.create(
            model="test-model",
            messages=SHORT,
            stream=True,
            stream_options={"include_usage": True},
        ) as stream:
            chunks = list(stream)
    assert raw.status_code == 400
    assert raw.headers["content-type"] == "application/json"
    assert raw.json() == OVERFLOW_BODIES["anthropic"]
    assert "prompt is too long: 104 tokens > 50 maximum" in caught.value.message
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "streamed after all"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == SHORT_TOKENS


def test_a_standing_key_fault_and_a_refused_stream_come_before_the_window() -> None:
    with ModelServer(context_window=50, refuse_stream=True) as server:
        server.fail_key("sk-bad", HttpError.invalid_api_key())
        server.script([TextReply(content="untouched")])
        revoked = post(server, LONG, key="sk-bad")
        refused = post(server, LONG, stream=True)
        overflow = post(server, LONG)
        served = post(server, SHORT)
    assert revoked.status_code == 401
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "stream"
    assert overflow.json()["error"]["code"] == "context_length_exceeded"
    assert answer(served) == "untouched"


def test_echo_mode_is_bound_by_the_window_too() -> None:
    with ModelServer(context_window=50) as server:
        overflow = post(server, LONG)
        echoed = post(server, SHORT)
    assert overflow.status_code == 400
    assert answer(echoed) == "echo: hi"


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"context_window": 0}, "context_window=...) must be a whole number of tokens >= 1, or None for no limit, not 0"),
        ({"context_window": -4096}, "not -4096"),
        ({"context_window": True}, "not True"),
        ({"context_window": 4096.0}, "not 4096.0"),
        ({"context_window": "4096"}, "not '4096'"),
        ({"overflow_style": "gemini"}, "overflow_style=...) must be one of 'openai', 'vllm', 'llamacpp', 'anthropic', 'ollama', not 'gemini'"),
    ],
)
def test_bad_window_arguments_are_refused_with_a_usage_error(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=r"^ModelServer\(") as caught:
        ModelServer(**arguments)
    assert message in str(caught.value)
