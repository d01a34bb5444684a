"""Tool progress in chat-completion streams: off by default, SSE comments when asked for."""

from __future__ import annotations

from pathlib import Path

import msgspec

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.platforms.server_kit import ServerKit, start_server

READ = ScriptedCall(name="read_file", arguments='{"path": "a", "seconds": 0.01}')
PREFIX = ": hermes.tool.progress "


def _raw_stream(kit: ServerKit, session: str, headers: dict[str, str] | None = None) -> list[str]:
    kit.model.script([ToolCallsReply(calls=(READ,)), TextReply(content="It says hi.")], session=session)
    body = {"model": "hermes-test", "stream": True, "messages": [{"role": "user", "content": "What does a say?"}]}
    with kit.http() as http, http.stream("POST", "/v1/chat/completions", json=body, headers={"X-Hermes-Session-Id": session, **(headers or {})}) as response:
        assert response.status_code == 200
        return list(response.iter_lines())


def _progress(lines: list[str]) -> list[dict[str, object]]:
    return [msgspec.json.decode(line[len(PREFIX) :]) for line in lines if line.startswith(PREFIX)]


def test_a_tool_turn_streams_only_chunks_by_default_so_the_sdk_loop_reads_every_delta(api: ServerKit) -> None:
    api.model.script([ToolCallsReply(calls=(READ,)), TextReply(content="It says hi.")], session="quiet")
    stream = api.client().chat.completions.create(
        model="hermes-test", messages=[{"role": "user", "content": "What does a say?"}], stream=True, extra_headers={"X-Hermes-Session-Id": "quiet"}
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)  # the documented loop: no choices=None chunk
    assert text == "It says hi."
    lines = _raw_stream(api, "quiet-raw")
    assert not any("hermes.tool.progress" in line or line.startswith("event:") for line in lines)


def test_the_progress_header_adds_tool_progress_as_comments_that_the_sdk_skips(api: ServerKit) -> None:
    lines = _raw_stream(api, "loud", {"X-Hermes-Tool-Progress": "true"})
    progress = _progress(lines)
    assert [(p["tool"], p["status"]) for p in progress] == [("read_file", "started"), ("read_file", "completed")]
    assert progress[0]["arguments"] == READ.arguments and progress[1]["ok"] is True and progress[1]["preview"] == "contents of a"
    assert progress[0]["call_id"] == progress[1]["call_id"]
    assert not any(line.startswith("event:") for line in lines)
    api.model.script([ToolCallsReply(calls=(READ,)), TextReply(content="It says hi.")], session="loud-sdk")
    stream = api.client().chat.completions.create(
        model="hermes-test",
        messages=[{"role": "user", "content": "What does a say?"}],
        stream=True,
        extra_headers={"X-Hermes-Session-Id": "loud-sdk", "X-Hermes-Tool-Progress": "true"},
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == "It says hi."


def test_the_server_setting_turns_progress_on_and_a_request_can_turn_it_off(tmp_path: Path, model_server: ModelServer) -> None:
    kit = start_server(tmp_path, model_server, tool_progress=True)
    try:
        assert [p["status"] for p in _progress(_raw_stream(kit, "on"))] == ["started", "completed"]
        assert _progress(_raw_stream(kit, "off", {"X-Hermes-Tool-Progress": "false"})) == []
    finally:
        assert kit.stop()
