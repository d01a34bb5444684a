"""The full-screen chat against the embedded runtime and the test model server (Textual pilot)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Collapsible
from textual.widgets._collapsible import CollapsibleTitle

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.platforms.tui import ChatApp, LocalSession
from actors.platforms.tui._modals import ApprovalScreen, ClarifyScreen
from actors.platforms.tui._widgets import AssistantBlock, ToolHeader, ToolLine
from protocols import ApprovalRequested, ApprovalResolved, ClarificationRequested, ToolFinished, ToolStarted, TurnCancelled, TurnCompleted
from tests.tui.tui_kit import drive, kind, make_app, texts, type_text


def test_a_turn_with_tool_calls_renders_text_tool_lines_and_the_answer(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script(
        [
            ToolCallsReply(content="Let me look.", calls=(ScriptedCall(name="read_file", arguments='{"path": "notes.txt", "seconds": 0.05}'),)),
            TextReply(content="The file says **hello**.", reasoning="I read it."),
        ]
    )

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "what is in notes.txt")
        await app.wait_for_event(kind(TurnCompleted))
        await pilot.pause()
        tools = list(app.query(ToolLine))
        assert [(t.tool_name, t.state, t.preview) for t in tools] == [("read_file", "ok", "notes.txt")]
        assert tools[0].output == "contents of notes.txt"
        blocks = list(app.query(AssistantBlock))
        assert [b.text for b in blocks] == ["Let me look.", "The file says **hello**."]
        assert blocks[1].reasoning == "I read it."
        assert texts(app, ".user") == ["what is in notes.txt"]
        assert app.state == "idle"
        assert app.last_usage is not None

    drive(make_app(local), scenario)


def test_escape_cancels_a_long_tool_and_the_ui_says_so_at_once(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "big", "seconds": 30}'),))])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "read the big file")
        await app.wait_for_event(kind(ToolStarted))
        await pilot.press("escape")
        assert app.state in ("cancelling...", "idle")
        assert any(t.startswith("■ cancel") for t in texts(app, ".notice"))
        cancelled = await app.wait_for_event(kind(TurnCancelled))
        await pilot.pause()
        assert [t.state for t in app.query(ToolLine)] == ["cancelled"]
        assert f"■ cancelled: {cancelled.reason}" in texts(app, ".notice")  # type: ignore[union-attr]
        assert app.state == "idle"

    drive(make_app(local), scenario)


def test_ctrl_c_cancels_a_running_turn_and_twice_at_an_idle_prompt_quits(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "big", "seconds": 30}'),))])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> int | None:
        await type_text(pilot, "read the big file")
        await app.wait_for_event(kind(ToolStarted))
        await pilot.press("ctrl+c")
        await app.wait_for_event(kind(TurnCancelled))
        assert app.is_running
        await pilot.press("ctrl+c")
        assert app.is_running, "one Ctrl+C at an idle prompt only warns"
        await pilot.press("ctrl+c")
        return app.return_value

    assert drive(make_app(local), scenario) == 0


def test_an_approval_request_opens_a_modal_and_allow_once_lets_the_tool_run(local: LocalSession, model_server: ModelServer, tmp_path: Path) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="done")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "do the dangerous thing")
        await app.wait_for_event(kind(ApprovalRequested))
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ApprovalScreen)
        assert screen.request.command == "touch marker"
        assert [str(s.render()) for s in screen.query(".reason")] == ["• test danger"]
        await pilot.press("o")
        resolved = await app.wait_for_event(kind(ApprovalResolved))
        assert resolved.choice == "once"  # type: ignore[union-attr]
        await app.wait_for_event(kind(TurnCompleted))
        assert not isinstance(app.screen, ApprovalScreen)
        assert [t.state for t in app.query(ToolLine)] == ["ok"]

    drive(make_app(local), scenario)
    assert (tmp_path / "marker").read_text() == "ran"


def test_escape_in_the_approval_modal_denies_and_nothing_runs(local: LocalSession, model_server: ModelServer, tmp_path: Path) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments="{}"),)), TextReply(content="ok, I did not")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "do the dangerous thing")
        await app.wait_for_event(kind(ApprovalRequested))
        await pilot.pause()
        await pilot.press("escape")
        resolved = await app.wait_for_event(kind(ApprovalResolved))
        assert resolved.choice == "deny"  # type: ignore[union-attr]
        await app.wait_for_event(kind(TurnCompleted))
        assert [t.state for t in app.query(ToolLine)] == ["error"]

    drive(make_app(local), scenario)
    assert not (tmp_path / "marker").exists()


def test_an_approval_that_times_out_closes_its_modal(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script([ToolCallsReply(calls=(ScriptedCall(name="guarded", arguments='{"timeout": 0.2}'),)), TextReply(content="it timed out")])

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "do the dangerous thing")
        await app.wait_for_event(kind(ApprovalRequested))
        resolved = await app.wait_for_event(kind(ApprovalResolved))
        assert resolved.choice == "timeout"  # type: ignore[union-attr]
        await app.wait_for_event(kind(TurnCompleted))
        await pilot.pause()
        assert not isinstance(app.screen, ApprovalScreen)

    drive(make_app(local), scenario)


def test_a_clarifying_question_is_answered_by_picking_one_of_its_choices(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script(
        [
            ToolCallsReply(calls=(ScriptedCall(name="clarify", arguments='{"question": "Which colour?", "choices": ["red", "blue"]}'),)),
            TextReply(content="blue it is"),
        ]
    )

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "paint it")
        await app.wait_for_event(kind(ClarificationRequested))
        await pilot.pause()
        assert isinstance(app.screen, ClarifyScreen)
        await pilot.press("2", "enter")
        finished = await app.wait_for_event(kind(ToolFinished))
        assert finished.preview == "blue"  # type: ignore[union-attr]
        await app.wait_for_event(kind(TurnCompleted))

    drive(make_app(local), scenario)
    answered = model_server.requests[-1].body["messages"][-1]
    assert answered["role"] == "tool" and answered["content"] == "blue"


def test_a_tool_line_expands_to_its_output_and_reasoning_folds_away_when_the_answer_starts(local: LocalSession, model_server: ModelServer) -> None:
    model_server.script(
        [
            ToolCallsReply(calls=(ScriptedCall(name="read_file", arguments='{"path": "x.md", "seconds": 0}'),)),
            TextReply(content="Here it is.", reasoning="The user wants x.md."),
        ]
    )

    async def scenario(pilot: Pilot[int], app: ChatApp) -> None:
        await type_text(pilot, "show x.md")
        await app.wait_for_event(kind(TurnCompleted))
        await pilot.pause()
        line = app.query_one(ToolLine)
        assert not line.expanded
        await pilot.click(ToolHeader)
        assert line.expanded
        assert "contents of x.md" in str(line.query_one(".tool-output").render())
        line.query_one(ToolHeader).focus()
        await pilot.press("enter")
        assert not line.expanded
        reasoning = app.query_one(".reasoning", Collapsible)
        assert reasoning.collapsed
        await pilot.click(CollapsibleTitle)
        assert not reasoning.collapsed

    drive(make_app(local), scenario)
