"""Background review end to end in a runtime: a nudge forks a review session that writes real
memory and skill files, reports one ReviewFinished, and never holds up the user's turns."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from actors.agent import MachineConfig
from actors.agent._nudges import NudgeSettings
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.tools import REGISTRY
from protocols import ReviewFinished, TurnCompleted
from tests.agent.session_kit import AgentKit, Intervals, make_tools, start_kit, until
from tests.conftest import DEADLINE

NUDGES = NudgeSettings(memory_interval=2, min_turns=2, skill_interval=3)
SKILL = "---\nname: tab-setup\ndescription: Set up an editor for tabs.\n---\n# Tab setup\n1. Open the settings.\n2. Choose tabs.\n"


def kit_with(tmp_path: Path, server: ModelServer, nudges: NudgeSettings, name: str) -> AgentKit:
    tools = {**make_tools(Intervals()), **{n: REGISTRY.get(n).spec() for n in ("memory", "skill_manage", "skill_view", "skills_list")}}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, retry_base=0.01, turn_timeout=60.0)
    home = tmp_path / f"home-{name}"
    home.mkdir()
    return start_kit(tmp_path / f"{name}.db", server, tools=tools, config=config, home=home, nudges=nudges)


def call(tool: str, **arguments: Any) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(name=tool, arguments=json.dumps(arguments)),))


def user_turns(server: ModelServer, session: str) -> None:
    """Turn 1: a tool call then an answer (2 iterations); turns 2 and 3: an answer each."""
    server.script([call("read_file", path="a"), TextReply(content="one"), TextReply(content="two"), TextReply(content="three")], session=session)


def test_the_review_writes_memory_and_a_skill_after_the_configured_turns_and_the_user_turns_are_unchanged(tmp_path: Path, model_server: ModelServer) -> None:
    on = kit_with(tmp_path, model_server, NUDGES, "on")
    off = kit_with(tmp_path, model_server, NudgeSettings.OFF, "off")
    try:
        user_turns(model_server, "u")
        user_turns(model_server, "v")
        model_server.script(
            [
                call("memory", action="add", target="user", content="Prefers tabs over spaces."),
                call("skill_manage", action="create", name="tab-setup", content=SKILL),
                TextReply(content="Saved a memory and a skill."),
            ],
            session="u.review-2",
        )
        probe = on.subscribe("u")
        seen: list[Any] = []
        for n in range(3):  # the third turn is sent after the review started and does not wait for it
            on.start_turn("u", f"message {n + 1}")
            seen += until(probe, TurnCompleted)
        review = next((e for e in seen if isinstance(e, ReviewFinished)), None) or until(probe, ReviewFinished)[-1]
        assert review.ok and review.review_session_id == "u.review-2" and review.kind == "combined"
        assert review.saved == ("memory add (user)", "skill create tab-setup")
        assert review.summary == "background review saved: memory add (user); skill create tab-setup"
        completed = [e for e in seen if isinstance(e, TurnCompleted)]
        assert [e.text for e in completed] == ["one", "two", "three"]
        second = seen.index(completed[1])
        assert review.turn_id == completed[1].turn_id and (review not in seen or seen.index(review) > second)
        home = tmp_path / "home-on"
        assert "Prefers tabs over spaces." in (home / "memories" / "USER.md").read_text()
        assert (home / "skills" / "tab-setup" / "SKILL.md").read_text() == SKILL
        # The review saw the conversation, was asked in the combined prompt, and had only the memory and skill tools.
        request = next(r for r in model_server.requests if r.session == "u.review-2")
        sent = request.body["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"][:2] == ["message 1", "message 2"]
        assert "This review has two parts." in sent[-1]["content"]
        assert sorted(t["function"]["name"] for t in request.body["tools"]) == ["memory", "skill_manage", "skill_view", "skills_list"]
        # Review off: the same user turns, the same events, nothing forked, nothing written.
        plain = off.subscribe("v")
        events: list[Any] = []
        for n in range(3):
            off.start_turn("v", f"message {n + 1}")
            events += until(plain, TurnCompleted)
        assert [type(e).__name__ for e in events] == [type(e).__name__ for e in seen if not isinstance(e, ReviewFinished)]
        assert [e.text for e in events if isinstance(e, TurnCompleted)] == ["one", "two", "three"]
        assert not any(r.session and ".review-" in r.session for r in model_server.requests if r.session != "u.review-2")
        assert not (tmp_path / "home-off" / "memories" / "USER.md").exists()
        # The user's own transcript holds none of the review's messages.
        assert all("two parts" not in (m.content or "") for m in on.transcript("u"))
    finally:
        assert on.runtime.stop(timeout=DEADLINE)
        assert off.runtime.stop(timeout=DEADLINE)


def test_a_hung_review_never_holds_up_the_user_and_is_stopped_at_its_own_deadline(tmp_path: Path, model_server: ModelServer) -> None:
    kit = kit_with(tmp_path, model_server, dataclasses.replace(NUDGES, review_timeout=1.0), "hung")
    try:
        user_turns(model_server, "h")
        model_server.script([TextReply(content="never", silent_after_chunks=0)], session="h.review-2")
        probe = kit.subscribe("h")
        seen: list[Any] = []
        for n in range(3):
            kit.start_turn("h", f"message {n + 1}")
            seen += until(probe, TurnCompleted)
        model_server.wait_for_request(lambda r: r.session == "h.review-2", timeout=DEADLINE)
        review = next((e for e in seen if isinstance(e, ReviewFinished)), None) or until(probe, ReviewFinished)[-1]
        assert [e.text for e in seen if isinstance(e, TurnCompleted)] == ["one", "two", "three"]
        assert not review.ok and review.saved == () and "deadline" in review.summary
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
