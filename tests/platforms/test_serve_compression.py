"""``hermes serve`` against a model server that holds 4,096 tokens: a long conversation runs on
because the session compresses itself (issue 15), and the store keeps every original message."""

from __future__ import annotations

from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from actors.store import StoreReader
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

WINDOW = 12_000  # the tool schemas alone take about 4,000 of it
TURNS = 30


def test_thirty_long_turns_in_a_12k_window_all_complete_through_compression_with_every_message_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=3, context_window=WINDOW) as server:
        server.script([TextReply(content=f"noted {i}") for i in range(4 * TURNS)], session="long")
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n  context_length: {WINDOW}\ncompression:\n  threshold: 0.5\n'
        )
        (home / ".env").write_text("API_SERVER_KEY=sk-hermes-test-key\n")
        with serving(home) as base:
            headers = {"authorization": "Bearer sk-hermes-test-key", "x-hermes-session-id": "long"}
            for i in range(TURNS):
                text = f"turn {i}: " + f"the tide table for day {i} reads high water at six and low water at noon; " * 28
                reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]}, headers=headers, timeout=DEADLINE)
                assert reply.status_code == 200, f"turn {i}: {reply.text}"
        sent = [r.prompt_tokens for r in server.requests if r.path == "/v1/chat/completions"]
    assert sent and max(t or 0 for t in sent) <= WINDOW, "no request passed the window"
    with StoreReader(home / "state.db") as reader:
        segments = reader.load_segments("long")
        live = reader.load_messages("long")
        everything = reader.load_messages("long", every_segment=True)
    assert len(segments) >= 3, "a long conversation is compressed again and again"
    assert all(s.reason == "compression" and s.tokens_after < s.tokens_before for s in segments)
    users = [m.content for m in everything if m.role == "user" and (m.content or "").startswith("turn ")]
    assert {u.split(":")[0] for u in users if u} == {f"turn {i}" for i in range(TURNS)}, "every original user message is kept"
    assert live[-1].role == "assistant" and (live[-2].content or "").startswith(f"turn {TURNS - 1}:")
