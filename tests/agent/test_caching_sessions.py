"""Prompt caching and the reasoning round trip through running sessions, against the test model
server (its prompt cache reports what an Anthropic-style cache would read)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.agent import ModelSettings, Price
from actors.agent._caching import count_breakpoints
from actors.chaos import ModelServer, TextReply
from actors.chaos._render import count_prompt_tokens
from actors.store import StoreReader
from protocols._session import TurnCompleted
from tests.agent.session_kit import AgentKit, start_kit, until
from tests.conftest import DEADLINE

CLAUDE = "anthropic/claude-sonnet-4"
PRICE = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
FRAGMENTS = (
    {"type": "reasoning.text", "text": "Let me", "format": "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.text", "text": " think.", "format": "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.text", "signature": "EqQBCkgIsig==", "format": "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "gAAAAB\u00e9xyz==", "id": "rs_7", "format": "openai-responses-v1", "index": 1},
)
DETAILS = (
    b'[{"type":"reasoning.text","text":"Let me think.","format":"anthropic-claude-v1","index":0,"signature":"EqQBCkgIsig=="},'
    b'{"type":"reasoning.encrypted","data":"gAAAAB\xc3\xa9xyz==","id":"rs_7","format":"openai-responses-v1","index":1}]'
)
"""What every later request must carry on the first answer: the signed block joined from its
fragments, the encrypted block as the server sent it."""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(context_window=200_000) as server:
        yield server


def claude_kit(store: Path, server: ModelServer) -> AgentKit:
    model = ModelSettings(model=CLAUDE, base_url=server.base_url, api_key="test-key", prices={CLAUDE: PRICE})
    return start_kit(store, server, model=model)


def turn(kit: AgentKit, session_id: str, text: str) -> TurnCompleted:
    """Run one turn and return its end (subscribed after the events seen so far: the hub replays from 0)."""
    probes = kit.__dict__.setdefault("probes", {})
    if session_id not in probes:
        probes[session_id] = kit.subscribe(session_id)
    kit.start_turn(session_id, text)
    done = until(probes[session_id], TurnCompleted)[-1]
    assert isinstance(done, TurnCompleted)
    return done


def completions(server: ModelServer, session_id: str) -> list[Any]:
    return [r for r in server.requests if r.path == "/v1/chat/completions" and r.session == session_id]


def test_a_claude_session_sends_four_marks_is_charged_for_cached_tokens_and_sends_reasoning_details_back_after_a_reload(
    tmp_path: Path, server: ModelServer
) -> None:
    store = tmp_path / "state.db"
    server.script(
        [
            TextReply(content="first answer", reasoning="I thought", reasoning_details=FRAGMENTS),
            TextReply(content="second answer"),
            TextReply(content="third answer"),
        ],
        session="c",
    )
    kit = claude_kit(store, server)
    try:
        first = turn(kit, "c", "u1 " * 100)
        second = turn(kit, "c", "u2 " * 100)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)

    one, two = (r.body for r in completions(server, "c"))
    assert [m["role"] for m in one["messages"]] == ["system", "user"]
    assert count_breakpoints(one["messages"]) == 2
    assert first.cache_read_tokens == 0
    assert first.cache_write_tokens == first.input_tokens  # the whole prompt was new to the cache

    assert [m["role"] for m in two["messages"]] == ["system", "user", "assistant", "user"]
    assert count_breakpoints(two["messages"]) == 4
    assert all(isinstance(m["content"], list) and m["content"][-1]["cache_control"] == {"type": "ephemeral"} for m in two["messages"])
    # The server's cache read turn 1's marked prefix (the system prompt and the first message).
    cached = count_prompt_tokens({**two, "messages": two["messages"][:2]})
    assert second.cache_read_tokens == cached > 0
    assert second.cache_write_tokens == second.input_tokens - cached
    expected = (cached * 0.3 + (second.input_tokens - cached) * 3.75 + second.output_tokens * 15.0) / 1e6  # PRICE's cache_read, cache_write, output
    assert second.cost_usd == pytest.approx(expected)
    assert second.cost_usd < PRICE.input * second.input_tokens / 1e6  # cheaper than uncached input alone

    # Turn 1's reasoning went back on its answer, the details byte for byte.
    answer = two["messages"][2]
    assert answer["reasoning_content"] == "I thought"
    assert b'"reasoning_details":' + DETAILS in completions(server, "c")[1].raw_body

    # A new runtime reloads the session from the store: the details still go back unchanged.
    with StoreReader(store) as reader:
        stored = reader.load_messages("c")
        record = reader.get_session("c")
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1].reasoning_details is not None and stored[1].reasoning_details.encode() == DETAILS
    assert record is not None
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_tokens) == (
        first.input_tokens + second.input_tokens,
        cached,
        first.cache_write_tokens + second.cache_write_tokens,
    )
    kit = claude_kit(store, server)
    try:
        third = turn(kit, "c", "u3")
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    three = completions(server, "c")[2]
    assert count_breakpoints(three.body["messages"]) == 4
    assert b'"reasoning_details":' + DETAILS in three.raw_body
    assert three.raw_body.count(b'"reasoning_details"') == 1  # only the answer that had some
    assert third.cache_read_tokens == count_prompt_tokens({**three.body, "messages": three.body["messages"][:4]})


def test_a_model_that_is_not_claude_gets_no_marks_and_reads_no_cache(tmp_path: Path, server: ModelServer) -> None:
    kit = start_kit(tmp_path / "state.db", server)  # "test-model"
    try:
        done = [turn(kit, "p", f"question {n}") for n in range(2)]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
    bodies = completions(server, "p")
    assert len(bodies) == 2
    assert all(b"cache_control" not in r.raw_body for r in bodies)
    assert all(isinstance(m["content"], str) for r in bodies for m in r.body["messages"])
    assert [d.cache_read_tokens for d in done] == [0, 0]


def test_prompt_caching_forced_on_marks_any_model_and_forced_off_marks_claude_not(tmp_path: Path, server: ModelServer) -> None:
    from actors.agent import PromptCaching

    for name, model, caching, marks in (("on", "test-model", PromptCaching(enabled=True), 4), ("off", CLAUDE, PromptCaching(enabled=False), 0)):
        settings = ModelSettings(model=model, base_url=server.base_url, api_key="k", caching=caching)
        kit = start_kit(tmp_path / f"{name}.db", server, model=settings)
        try:
            turn(kit, name, "one")
            turn(kit, name, "two")
        finally:
            assert kit.runtime.stop(timeout=DEADLINE)
        last = completions(server, name)[-1].body
        assert count_breakpoints(last["messages"]) == marks, json.dumps(last["messages"])
