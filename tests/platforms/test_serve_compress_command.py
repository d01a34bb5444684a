"""``POST /v1/sessions/{id}/compress`` and compressions in runs, through a real ``hermes serve``
against the test model server holding a 12,000-token window (issue 15: ``/compress`` with a
focus topic; ``ContextCompressed`` visible in runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from actors.agent._compress import SUMMARY_PREFIX
from actors.chaos import ModelServer, TextReply
from actors.store import StoreReader
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

WINDOW = 12_000
HEADERS = {"authorization": "Bearer sk-hermes-test-key"}


def configure(home: Path, server: ModelServer) -> None:
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n  context_length: {WINDOW}\ncompression:\n  threshold: 0.9\n'
    )
    (home / ".env").write_text("API_SERVER_KEY=sk-hermes-test-key\n")


def chat(base: str, session: str, text: str) -> None:
    reply = httpx.post(
        f"{base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": text}]},
        headers={**HEADERS, "x-hermes-session-id": session},
        timeout=DEADLINE,
    )
    assert reply.status_code == 200, reply.text


def day(i: int, repeat: int) -> str:
    return f"day {i}: " + f"the tide table for day {i} reads high water at six and low water at noon; " * repeat


def test_compress_with_a_focus_topic_summarises_the_middle_into_a_new_segment_and_the_next_turn_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ModelServer(seed=5, context_window=WINDOW) as server:
        server.script([TextReply(content=f"noted {i}") for i in range(30)], session="manual")
        configure(home, server)
        with serving(home) as base:
            for i in range(16):
                chat(base, "manual", day(i, 14))
            with StoreReader(home / "state.db") as reader:
                before = reader.load_messages("manual")
            assert not any(SUMMARY_PREFIX in (m.content or "") for m in before), "under the threshold: nothing compressed on its own"

            answer = httpx.post(f"{base}/v1/sessions/manual/compress", json={"focus": "the tides of day 3"}, headers=HEADERS, timeout=DEADLINE)
            assert answer.status_code == 200, answer.text
            result = answer.json()
            assert result["compressed"] is True and result["summarised"] > 0
            assert result["tokens_after"] < result["tokens_before"]
            summary_requests = [r for r in server.requests if r.body and "tools" not in r.body and r.session == "manual"]
            [summary_request] = summary_requests
            assert "the tides of day 3" in summary_request.body["messages"][0]["content"], "the topic reaches the summariser"

            messages = httpx.get(f"{base}/v1/sessions/manual/messages", headers=HEADERS, timeout=DEADLINE).json()
            contents = [m.get("content") or "" for m in _items(messages)]
            assert any(SUMMARY_PREFIX in c for c in contents), "the session's live transcript holds the summary"
            chat(base, "manual", "and day 16?")
            last_call = [r for r in server.requests if r.session == "manual"][-1]
            sent = [m.get("content") or "" for m in last_call.body["messages"]]
            assert any(SUMMARY_PREFIX in c for c in sent) and len(sent) < len(before) + 2, "the next turn is sent the compressed conversation"

            short = httpx.post(f"{base}/v1/sessions/short/compress", json={}, headers=HEADERS, timeout=DEADLINE)
            assert short.status_code == 404 and "no session 'short'" in short.json()["error"]["message"]
            chat(base, "short", "hello")
            nothing = httpx.post(f"{base}/v1/sessions/short/compress", json={}, headers=HEADERS, timeout=DEADLINE)
            assert nothing.status_code == 200 and nothing.json()["compressed"] is False
            assert nothing.json()["message"].startswith("Nothing to compress")
            for bad in ({"focus": 7}, {"focus": "x" * 2_001}, {"wait": "soon"}, {"policy": "later"}):
                refused = httpx.post(f"{base}/v1/sessions/manual/compress", json=bad, headers=HEADERS, timeout=DEADLINE)
                assert refused.status_code == 400, (bad, refused.text)
            later = httpx.post(f"{base}/v1/sessions/manual/compress", json={"wait": False}, headers=HEADERS, timeout=DEADLINE)
            assert later.status_code == 202 and later.json()["turn_id"].startswith("turn_")
    with StoreReader(home / "state.db") as reader:
        segments = reader.load_segments("manual")
        everything = reader.load_messages("manual", every_segment=True)
    assert segments and segments[0].reason == "compression"
    days = {(m.content or "").split(":")[0] for m in everything if m.role == "user"}
    assert {f"day {i}" for i in range(16)} <= days, "every original message is kept"


def test_a_run_that_compresses_reports_it_in_its_record_and_its_event_stream(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ModelServer(seed=6, context_window=WINDOW) as server:
        server.script([TextReply(content=f"noted {i}") for i in range(40)], session="runs")
        configure(home, server)
        with serving(home) as base:
            records: list[dict[str, Any]] = []
            streamed: list[str] = []
            for i in range(12):
                started = httpx.post(f"{base}/v1/runs", json={"input": day(i, 40), "session_id": "runs"}, headers=HEADERS, timeout=DEADLINE)
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]
                with httpx.stream("GET", f"{base}/v1/runs/{run_id}/events", headers=HEADERS, timeout=DEADLINE) as events:
                    names = [line[len("event: ") :] for line in events.iter_lines() if line.startswith("event: ")]
                assert names[-1] == "run.completed", names
                streamed += names
                records.append(httpx.get(f"{base}/v1/runs/{run_id}", headers=HEADERS, timeout=DEADLINE).json())
    compressed = [c for r in records for c in r["compressions"]]
    assert compressed, json.dumps(records)[:2_000]
    assert all(c["tokens_after"] < c["tokens_before"] and c["summarised"] > 0 for c in compressed)
    assert streamed.count("context.compressed") == len(compressed)


def _items(payload: Any) -> list[dict[str, Any]]:
    return list(payload["data"] if isinstance(payload, dict) else payload)
