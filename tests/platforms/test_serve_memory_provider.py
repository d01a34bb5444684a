"""``memory.provider: store`` through a real ``hermes serve``: the fact_store tool saves a fact, the
next turn's request recalls it, a compression's summariser is asked to keep it, and
``/health/detailed`` shows each memory provider's state (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

WINDOW = 12_000
HEADERS = {"authorization": "Bearer sk-hermes-test-key", "x-hermes-session-id": "m"}


def chat(base: str, text: str) -> str:
    reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]}, headers=HEADERS, timeout=DEADLINE)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


def test_the_store_provider_in_a_served_runtime_recalls_keeps_through_compression_and_reports_health(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=3, context_window=WINDOW) as server:
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n  context_length: {WINDOW}\n'
            "compression:\n  threshold: 0.9\nmemory:\n  provider: store\n  prefetch_timeout: 5\n"
        )
        (home / ".env").write_text("API_SERVER_KEY=sk-hermes-test-key\n")
        save = ScriptedCall(name="fact_store", arguments=json.dumps({"action": "add", "content": "The user's boat is named Kestrel."}))
        server.script([ToolCallsReply(calls=(save,)), TextReply(content="Saved."), *(TextReply(content=f"noted {i}") for i in range(30))], session="m")
        with serving(home) as base:
            root = base.removesuffix("/v1")
            assert chat(base, "My boat is named Kestrel; remember it.") == "Saved."
            assert chat(base, "What is the name of my boat?") == "noted 0"
            sent = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"][-1]
            assert sent.startswith("What is the name of my boat?\n\n<memory-context>") and "- The user's boat is named Kestrel. (fact 1)" in sent
            system = server.requests[0].body["messages"][0]["content"]
            assert "## Fact store" in system  # the provider's system-prompt block
            for i in range(16):
                chat(base, f"day {i}: " + f"the tide table for day {i} reads high water at six and low water at noon; " * 14)
            answer = httpx.post(f"{root}/v1/sessions/m/compress", json={}, headers=HEADERS, timeout=DEADLINE)
            assert answer.status_code == 200 and answer.json()["compressed"] is True, answer.text
            summary = next(r for r in server.requests if r.body and "tools" not in r.body and r.session == "m")
            kept = summary.body["messages"][-1]["content"]
            assert kept.endswith("Memory providers ask that the notes keep the following:\n[store] - The user's boat is named Kestrel.")
            health = httpx.get(f"{root}/health/detailed", headers=HEADERS, timeout=DEADLINE).json()
            memory = health["memory"]
            assert memory["store"]["state"] == "running" and memory["store"]["prefetches"] >= 8 and memory["store"]["skipped"] == 0
            assert memory["builtin"]["state"] == "running" and memory["builtin"]["crashes"] == 0
