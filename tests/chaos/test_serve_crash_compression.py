"""A crash mid-compression of the real server (issue 15): ``hermes serve`` is killed with SIGKILL
while the summary call is in flight, or after the new segment's commit but before the reply, and
started again on the same HERMES_HOME. The session resumes on the old segment or on the new one,
whole, never half of each, and the interrupted turn is failed ``interrupted`` by the settle at start.

Barriers, no sleeps: the model server holds the call the test kills in (a reply scripted to send
nothing), and ``wait_for_request`` returns once it has arrived.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx

from actors.agent._compress import SUMMARY_PREFIX
from actors.chaos import ModelServer, RecordedRequest, TextReply
from actors.store import StoreReader
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched

WINDOW = 8_192
"""With the tool schemas (3,908 of the server's tokens) and the system prompt, six turns of
about 380 tokens stay under the 0.85 threshold, and a seventh of 1,000 passes it."""
SUMMARY_MODEL = "summarizer"
KEY = "hk-crash-compress-key-0123456789"
SESSION = "tides"
HELD = TextReply(content="never sent", silent_after_chunks=0)
"""A reply that sends its headers and then nothing: the call stays in flight until the kill."""


def home_for(tmp_path: Path, server: ModelServer) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n  context_length: {WINDOW}\n'
        f"compression:\n  threshold: 0.85\n  summary_model: {SUMMARY_MODEL}\n"
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    return home


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)


def text(i: int, repeat: int) -> str:
    return f"turn {i}: " + f"the tide table for day {i} reads high water at six and low water at noon; " * repeat


def six_turns_then_a_long_one(http: httpx.Client, server: ModelServer) -> str:
    """Six turns under the threshold, then a turn over it started as a run; returns its run id."""
    for i in range(6):
        reply = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": text(i, 20)}]}, headers={"x-hermes-session-id": SESSION})
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == f"noted {i}", reply.text
    assert not [r for r in server.requests if is_summary(r)], "no compression before the long turn"
    run = http.post("/v1/runs", json={"input": text(6, 53), "session_id": SESSION})
    assert run.status_code == 202, run.text
    run_id: str = run.json()["run_id"]
    return run_id


def is_summary(request: RecordedRequest) -> bool:
    return isinstance(request.body, dict) and request.body.get("model") == SUMMARY_MODEL


def is_call_on_new_segment(request: RecordedRequest) -> bool:
    body = request.body
    return (
        isinstance(body, dict) and body.get("model") == "test-model" and any(str(m.get("content") or "").startswith(SUMMARY_PREFIX) for m in body["messages"])
    )


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL the whole group (no cleanup at all) and reap it."""
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=DEADLINE)
    assert process.returncode == -signal.SIGKILL


def assert_failed_interrupted(http: httpx.Client, run_id: str) -> None:
    status = http.get(f"/v1/runs/{run_id}").json()
    assert status["status"] == "failed" and "interrupted" in (status["error"] or ""), status


def test_kill_9_while_the_summary_call_is_in_flight_leaves_the_old_segment_whole_and_fails_the_turn_interrupted(tmp_path: Path) -> None:
    with ModelServer(seed=11, context_window=WINDOW) as server:
        server.script([TextReply(content=f"noted {i}") for i in range(6)], session=SESSION)
        server.script([HELD], model=SUMMARY_MODEL)
        home = home_for(tmp_path, server)
        with launched(home) as (first, url), client(url) as http:
            run_id = six_turns_then_a_long_one(http, server)
            held = server.wait_for_request(is_summary, timeout=DEADLINE)
            assert "turn 2:" in held.body["messages"][-1]["content"], "the summary request reads the middle"
            before = http.get(f"/v1/sessions/{SESSION}/messages").json()["data"]
            kill(first)
        assert [m["role"] for m in before] == ["user", "assistant"] * 6 + ["user"]
        assert before[-1]["content"] == text(6, 53), "the long turn's message was saved before the summary call"

        server.script([TextReply(content="## Goal\nTides.\n## Progress\nafter the crash")], model=SUMMARY_MODEL)
        server.script([TextReply(content="back again")], session=SESSION)
        with launched(home) as (second, url), client(url) as http:
            after = http.get(f"/v1/sessions/{SESSION}/messages").json()["data"]
            assert after == before, "the old segment, every message as it was"
            assert_failed_interrupted(http, run_id)
            with StoreReader(home / "state.db") as reader:
                assert reader.load_segments(SESSION) == [], "no half-written segment"
            # The session goes on from the old segment: the next turn compresses it and is answered.
            reply = http.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "still there?"}]}, headers={"x-hermes-session-id": SESSION}
            )
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "back again", reply.text
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=DEADLINE)
        assert second.returncode == 0
    with StoreReader(home / "state.db") as reader:
        assert len(reader.load_segments(SESSION)) == 1
        everything = reader.load_messages(SESSION, every_segment=True)
    assert [m.content for m in everything[: len(before)]] == [m["content"] for m in before], "every original message is kept"
    assert server.internal_errors == []


def test_kill_9_after_the_segment_commit_before_the_reply_resumes_on_the_whole_new_segment(tmp_path: Path) -> None:
    summary = "## Goal\nTides.\n## Progress\nsix days read"
    with ModelServer(seed=12, context_window=WINDOW) as server:
        server.script([*(TextReply(content=f"noted {i}") for i in range(6)), HELD], session=SESSION)
        server.script([TextReply(content=summary)], model=SUMMARY_MODEL)
        home = home_for(tmp_path, server)
        with launched(home) as (first, url), client(url) as http:
            run_id = six_turns_then_a_long_one(http, server)
            held = server.wait_for_request(is_call_on_new_segment, timeout=DEADLINE)  # made only after the commit
            kill(first)
        sent = [(m["role"], m.get("content")) for m in held.body["messages"][1:]]  # the new segment, as the model was sent it

        server.script([TextReply(content="back again")], session=SESSION)
        with launched(home) as (second, url), client(url) as http:
            after = http.get(f"/v1/sessions/{SESSION}/messages").json()["data"]
            assert [(m["role"], m.get("content")) for m in after] == sent, "head + summary + tail, whole"
            assert_failed_interrupted(http, run_id)
            reply = http.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "still there?"}]}, headers={"x-hermes-session-id": SESSION}
            )
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "back again", reply.text
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=DEADLINE)
        assert second.returncode == 0
    summaries = [m for m in after if (m.get("content") or "").startswith(SUMMARY_PREFIX)]
    assert len(summaries) == 1 and summaries[0]["content"].endswith(summary)
    assert after[0]["content"] == text(0, 20) and after[-1]["content"] == text(6, 53), "the head and the tail with the last user message"
    assert len(after) < 13, "the middle was summarised"
    resumed = [r for r in server.requests if r.body and r.body.get("model") == "test-model"][-1].body["messages"]
    assert [(m["role"], m.get("content")) for m in resumed[1:-1]] == sent, "the next turn was sent the new segment"
    with StoreReader(home / "state.db") as reader:
        [segment] = reader.load_segments(SESSION)
        everything = reader.load_messages(SESSION, every_segment=True)
    assert segment.summary == summary and segment.summarised == 13 - len(after) + 1
    assert {*(text(i, 20) for i in range(6)), text(6, 53)} <= {m.content for m in everything}, "every original message is kept"
    assert server.internal_errors == []
