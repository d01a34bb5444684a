"""The test model server's prompt cache and reasoning_details, over real HTTP on loopback.

Counts follow the server's rule (``ceil(C / 4) + 4 * M``, with a context window set).
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import msgspec

from actors.chaos import ModelServer, TextReply

MARK = {"type": "ephemeral"}
SYSTEM = "s" * 400


def marked(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text, "cache_control": MARK}]}


def post(server: ModelServer, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    with httpx.Client() as http:
        response = http.post(f"{server.base_url}/chat/completions", json={"model": "claude-x", "messages": messages, **body})
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def tokens(*texts: str) -> int:
    return math.ceil(sum(len(t) for t in texts) / 4) + 4 * len(texts)


def test_a_marked_prefix_seen_before_is_reported_as_cached_and_a_new_one_as_written() -> None:
    with ModelServer(context_window=100_000) as server:
        first = post(server, [marked("system", SYSTEM), marked("user", "u1" * 20)])
        assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": tokens(SYSTEM, "u1" * 20)}
        # The next call: the marks roll forward; the earlier user message is plain text now.
        second = post(
            server,
            [marked("system", SYSTEM), marked("user", "u1" * 20), marked("assistant", "a1" * 20), marked("user", "u2" * 20)],
        )
        cached = tokens(SYSTEM, "u1" * 20)
        assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": cached, "cache_write_tokens": second["usage"]["prompt_tokens"] - cached}
        third = post(
            server,
            [marked("system", SYSTEM), {"role": "user", "content": "u1" * 20}, marked("assistant", "a1" * 20), marked("user", "u2" * 20)],
        )
        assert third["usage"]["prompt_tokens_details"] == {"cached_tokens": third["usage"]["prompt_tokens"], "cache_write_tokens": 0}
        # A changed system prompt shares no prefix with what was cached.
        other = post(server, [marked("system", "other" + SYSTEM), marked("user", "u1" * 20)])
        assert other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_a_request_without_marks_reports_no_cache() -> None:
    with ModelServer(context_window=100_000) as server:
        for _ in range(2):
            reply = post(server, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}])
            assert "prompt_tokens_details" not in reply["usage"]


def test_cached_tokens_are_in_words_when_no_window_is_set_and_arrive_in_the_streamed_usage() -> None:
    with ModelServer() as server:
        post(server, [marked("system", "one two three"), marked("user", "four five")])
        with httpx.Client() as http:
            body = {"model": "claude-x", "messages": [marked("system", "one two three"), marked("user", "four five")], "stream": True}
            body["stream_options"] = {"include_usage": True}
            text = http.post(f"{server.base_url}/chat/completions", json=body).text
        chunks = [msgspec.json.decode(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        (usage,) = [c["usage"] for c in chunks if c.get("usage")]
        assert usage["prompt_tokens"] == 5
        assert usage["prompt_tokens_details"] == {"cached_tokens": 5, "cache_write_tokens": 0}


FRAGMENTS = (
    {"type": "reasoning.text", "text": "Let", "format": "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.text", "signature": "sig==", "format": "anthropic-claude-v1", "index": 0},
)


def test_reasoning_details_stream_one_fragment_a_delta_and_a_whole_reply_lists_them() -> None:
    with ModelServer() as server:
        server.script([TextReply(content="answer", reasoning_details=FRAGMENTS)] * 2)
        with httpx.Client() as http:
            text = http.post(f"{server.base_url}/chat/completions", json={"messages": [{"role": "user", "content": "q"}], "stream": True}).text
        chunks = [msgspec.json.decode(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
        streamed = [c["choices"][0]["delta"]["reasoning_details"] for c in chunks if "reasoning_details" in c["choices"][0]["delta"]]
        assert streamed == [[FRAGMENTS[0]], [FRAGMENTS[1]]]
        whole = post(server, [{"role": "user", "content": "q"}])
        assert whole["choices"][0]["message"]["reasoning_details"] == list(FRAGMENTS)
