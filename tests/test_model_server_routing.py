"""The test model server's per-model queues and its request barrier, over real HTTP on loopback.

A per-model queue lets a test script a second model (context compression's summary model)
apart from the conversation; ``wait_for_request`` is the barrier a test waits on until a
request it recognises has arrived (a stalled reply then holds the caller while the test acts).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from actors import UsageError
from actors.chaos import ModelServer, RecordedRequest, TextReply
from tests.conftest import DEADLINE

USER = [{"role": "user", "content": "hello"}]


def post(server: ModelServer, model: str, *, session: str | None = None) -> httpx.Response:
    headers = {"X-Hermes-Session-Id": session} if session else {}
    return httpx.post(f"{server.base_url}/chat/completions", json={"model": model, "messages": USER}, headers=headers, timeout=DEADLINE)


def content(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def test_a_model_queue_answers_requests_naming_that_model_before_the_session_queue(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="summary 1"), TextReply(content="summary 2")], model="summarizer")
    model_server.script([TextReply(content="turn 1"), TextReply(content="turn 2")], session="s")
    assert content(post(model_server, "test-model", session="s")) == "turn 1"
    assert content(post(model_server, "summarizer", session="s")) == "summary 1"
    assert content(post(model_server, "test-model", session="s")) == "turn 2"
    assert content(post(model_server, "summarizer", session="s")) == "summary 2"
    dry = post(model_server, "summarizer", session="s")
    assert dry.status_code == 500 and "the script for model 'summarizer' is exhausted after 2 replies" in dry.json()["error"]["message"]


def test_scripting_two_targets_at_once_or_an_empty_model_is_a_usage_error(model_server: ModelServer) -> None:
    with pytest.raises(UsageError, match="one of session=, key= or model="):
        model_server.script([TextReply(content="x")], session="s", model="m")
    with pytest.raises(UsageError, match="model name"):
        model_server.script([TextReply(content="x")], model="")


def test_wait_for_request_returns_a_request_already_received_or_the_next_one_to_match(model_server: ModelServer) -> None:
    model_server.script([TextReply(content="early")], model="early")
    model_server.script([TextReply(content="held", latency=DEADLINE)], model="held")
    content(post(model_server, "early"))
    first = model_server.wait_for_request(lambda r: r.body["model"] == "early", timeout=DEADLINE)
    assert first.body["messages"] == USER

    replies: list[httpx.Response | httpx.HTTPError] = []

    def call_held() -> None:
        try:
            replies.append(post(model_server, "held"))
        except httpx.HTTPError as exc:  # the server stopping ends the held reply
            replies.append(exc)

    caller = threading.Thread(target=call_held)
    caller.start()
    try:
        held = model_server.wait_for_request(lambda r: r.body["model"] == "held", after=1, timeout=DEADLINE)
        assert held.body["model"] == "held" and not replies, "recorded on arrival, before its reply (still held by its latency)"
    finally:
        model_server.stop()  # ends the held reply at once
        caller.join(DEADLINE)
    assert not caller.is_alive() and len(replies) == 1 and isinstance(replies[0], httpx.HTTPError)


def test_wait_for_request_times_out_naming_what_it_received(model_server: ModelServer) -> None:
    content(post(model_server, "test-model"))

    def never(request: RecordedRequest) -> bool:
        return False

    with pytest.raises(TimeoutError, match="no matching request within 0.05 s \\(1 received in all\\)"):
        model_server.wait_for_request(never, timeout=0.05)
