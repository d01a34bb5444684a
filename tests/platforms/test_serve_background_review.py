"""Background review through a real ``hermes serve`` (issue 21): config.yaml's nudge intervals
fork a review after the configured turns; it writes a real MEMORY.md entry and a real SKILL.md,
and its line reaches the session's event stream after the user's turn completed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from protocols import AnySessionEvent, ReviewFinished, TurnCompleted, from_json
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving

HEADERS = {"authorization": "Bearer sk-hermes-test-key"}
SKILL = "---\nname: release-notes\ndescription: Write release notes from a changelog.\n---\n# Release notes\n1. Read the changelog.\n2. Group by kind.\n"


def call(tool: str, **arguments: Any) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(name=tool, arguments=json.dumps(arguments)),))


def test_serve_forks_a_review_that_writes_memory_and_a_skill_after_the_configured_turns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=21) as server:
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n'
            "memory:\n  nudge_interval: 2\n  flush_min_turns: 2\nskills:\n  creation_nudge_interval: 3\n"
        )
        (home / ".env").write_text("API_SERVER_KEY=sk-hermes-test-key\n")
        server.script([call("skills_list"), TextReply(content="listed"), TextReply(content="noted")], session="s21")
        server.script(
            [
                call("memory", action="add", target="memory", content="The team ships releases on Fridays."),
                call("skill_manage", action="create", name="release-notes", content=SKILL),
                TextReply(content="Saved."),
            ],
            session="s21.review-2",
        )
        with serving(home) as base:
            for text in ("what skills are there?", "we ship on Fridays"):
                reply = httpx.post(
                    f"{base}/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": text}]},
                    headers={**HEADERS, "x-hermes-session-id": "s21"},
                    timeout=DEADLINE,
                )
                assert reply.status_code == 200, reply.text
            events: list[Any] = []
            with httpx.stream("GET", f"{base}/v1/sessions/s21/events?after=0", headers=HEADERS, timeout=DEADLINE) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        event = from_json(line[6:], AnySessionEvent)
                        events.append(event)
                        if isinstance(event, ReviewFinished):
                            break
        review = events[-1]
        completed = [e for e in events if isinstance(e, TurnCompleted)]
        assert [e.text for e in completed] == ["listed", "noted"]
        assert review.ok and review.kind == "combined" and review.turn_id == completed[1].turn_id
        assert review.saved == ("memory add (memory)", "skill create release-notes")
        assert "The team ships releases on Fridays." in (home / "memories" / "MEMORY.md").read_text()
        assert (home / "skills" / "release-notes" / "SKILL.md").read_text() == SKILL
