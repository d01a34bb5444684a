"""Real tools inside real sessions: approvals through the event stream, and tools that misbehave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from actors.agent import ApprovalSettings, MachineConfig, ToolContext, ToolOutput, ToolSpec
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.tools import REGISTRY
from protocols import ApprovalRequested, ApprovalResolved, ResolveApproval, ToolFinished, TurnCompleted
from tests.agent.session_kit import AgentKit, start_kit, until
from tests.conftest import DEADLINE


def kit_with(tmp_path: Path, model_server: ModelServer, tools: dict[str, ToolSpec], **options: Any) -> AgentKit:
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()}, **options)
    return start_kit(tmp_path / "state.db", model_server, tools=tools, config=config, workdir=tmp_path, home=tmp_path / "home")


def terminal(command: str) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),))


def test_a_dangerous_terminal_command_waits_for_approval_and_deny_never_runs_it(tmp_path: Path, model_server: ModelServer) -> None:
    (tmp_path / "build").mkdir()
    kit = kit_with(tmp_path, model_server, {"terminal": REGISTRY.get("terminal").spec()})
    try:
        for choice, survives in (("deny", True), ("once", False)):
            session = f"danger-{choice}"
            model_server.script([terminal("rm -rf build"), TextReply(content="ok")], session=session)
            probe = kit.subscribe(session)
            kit.start_turn(session, "clean up")
            request = until(probe, ApprovalRequested)[-1]
            assert "rm -rf build" in request.command and request.reasons
            kit.session(session).tell(ResolveApproval(request_id=request.request_id, choice=choice))
            assert until(probe, ApprovalResolved)[-1].choice == choice
            finished = until(probe, ToolFinished)[-1]
            assert finished.ok is not survives
            until(probe, TurnCompleted)
            assert (tmp_path / "build").exists() is survives
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_hardline_command_never_runs_even_in_yolo_mode(tmp_path: Path, model_server: ModelServer) -> None:
    tools = {"terminal": REGISTRY.get("terminal").spec()}
    config = MachineConfig(traits={n: t.traits for n, t in tools.items()})
    kit = start_kit(
        tmp_path / "state.db", model_server, tools=tools, config=config, workdir=tmp_path, home=tmp_path / "home", approvals=ApprovalSettings(mode="off")
    )
    try:
        model_server.script([terminal("rm -rf / --no-preserve-root"), TextReply(content="refused")], session="hard")
        probe = kit.subscribe("hard")
        kit.start_turn("hard", "wipe it")
        events = until(probe, TurnCompleted)
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert not finished.ok and not any(isinstance(e, ApprovalRequested) for e in events)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_a_tool_that_hangs_past_its_timeout_or_floods_output_leaves_the_session_working(tmp_path: Path, model_server: ModelServer) -> None:
    async def hang(args: dict[str, Any], call: ToolContext) -> ToolOutput:
        await trio.sleep(3600)
        return ToolOutput(content="never")

    tools = {
        "hang": ToolSpec("hang", "Hangs.", {"type": "object"}, hang),
        "read_file": REGISTRY.get("read_file").spec(),
    }
    (tmp_path / "big.txt").write_text("x" * 5_000_000)
    kit = kit_with(tmp_path, model_server, tools, tool_timeout=0.2)
    try:
        calls = (ScriptedCall(name="hang", arguments="{}"), ScriptedCall(name="read_file", arguments='{"path": "big.txt"}'))
        model_server.script([ToolCallsReply(calls=calls), TextReply(content="still here")], session="rough")
        probe = kit.subscribe("rough")
        kit.start_turn("rough", "try both")
        events = until(probe, TurnCompleted)
        finished = {e.name: e for e in events if isinstance(e, ToolFinished)}
        assert not finished["hang"].ok and "did not finish in time" in finished["hang"].preview
        assert events[-1].text == "still here"
        sent = model_server.requests[-1].body["messages"]
        assert all(len(m.get("content") or "") <= 100_000 for m in sent)
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)


def test_tool_arguments_nested_100_000_deep_get_an_error_result_and_the_turn_goes_on(tmp_path: Path, model_server: ModelServer) -> None:
    """A careless or hostile model's arguments: ``json.loads`` raises RecursionError on them (no
    ValueError), which used to escape the machine's step and crash the session."""
    (tmp_path / "notes.txt").write_text("kept")
    tools = {"read_file": REGISTRY.get("read_file").spec()}
    kit = kit_with(tmp_path, model_server, tools)
    try:
        calls = (ScriptedCall(name="read_file", arguments="[" * 100_000 + "]" * 100_000), ScriptedCall(name="read_file", arguments='{"path": "notes.txt"}'))
        model_server.script([ToolCallsReply(calls=calls), TextReply(content="read what I could")], session="deep")
        probe = kit.subscribe("deep")
        kit.start_turn("deep", "read it")
        events = until(probe, TurnCompleted)
        finished = [e for e in events if isinstance(e, ToolFinished)]
        assert [e.ok for e in finished] == [False, True] and "nested too deeply" in finished[0].preview and "kept" in finished[1].preview
        assert events[-1].text == "read what I could"
        assert not [e for e in events if type(e).__name__ in ("SessionRecovered", "TurnFailed")]
        results = [m for m in model_server.requests[-1].body["messages"] if m["role"] == "tool"]
        assert len(results) == 2 and "nested too deeply" in results[0]["content"]
    finally:
        assert kit.runtime.stop(timeout=DEADLINE)
