"""``hermes serve`` with a Claude model and cache prices in config.yaml: the second turn's
request carries four cache marks, its answer's usage shows the tokens the provider read from
its cache, and the store's session totals count them."""

from __future__ import annotations

from pathlib import Path

import httpx

from actors.agent._caching import count_breakpoints
from actors.chaos import ModelServer, TextReply
from actors.store import StoreReader
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

MODEL = "anthropic/claude-sonnet-4"


def test_a_claude_session_through_the_api_reports_cached_tokens_in_usage_and_in_the_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=5, context_window=200_000, model=MODEL) as server:
        server.script([TextReply(content="first"), TextReply(content="second")], session="cached")
        (home / "config.yaml").write_text(
            f'model:\n  default: {MODEL}\n  base_url: "{server.base_url}"\n  api_key: sk-test\n'
            f"pricing:\n  {MODEL}: {{input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}\n"
            "prompt_caching:\n  enabled: auto\n  cache_ttl: 5m\n"
        )
        (home / ".env").write_text("API_SERVER_KEY=sk-hermes-test-key\n")
        usages = []
        with serving(home) as base:
            headers = {"authorization": "Bearer sk-hermes-test-key", "x-hermes-session-id": "cached"}
            for text in ("the first question, " * 20, "the second question"):
                reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]}, headers=headers, timeout=DEADLINE)
                assert reply.status_code == 200, reply.text
                usages.append(reply.json()["usage"])
        sent = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert [count_breakpoints(r.body["messages"]) for r in sent] == [2, 4]
    assert usages[0]["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = usages[1]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < usages[1]["prompt_tokens"]
    assert usages[1]["prompt_tokens"] == sent[1].prompt_tokens  # the server's own count
    with StoreReader(home / "state.db") as reader:
        record = reader.get_session("cached")
    assert record is not None
    assert record.cache_read_tokens == cached
    assert record.input_tokens == usages[0]["prompt_tokens"] + usages[1]["prompt_tokens"]
    assert record.cache_write_tokens == usages[0]["prompt_tokens"] + usages[1]["prompt_tokens"] - cached
