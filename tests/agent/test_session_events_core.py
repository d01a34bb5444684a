"""What a session's events and commands call for beside the stream (pure): price, plugin hooks, memory notices."""

from __future__ import annotations

from typing import Any

from actors.agent._model import ModelSettings
from actors.agent._pricing import Price
from actors.agent._session_events_core import command_hook_call, last_user_text, priced, provider_notices, turn_hook_calls
from protocols import ChatMessage
from protocols._session import CompressContext, SwitchModel, ToolStarted, TurnCancelled, TurnCompleted, TurnFailed, TurnStarted, UndoTurn

TRANSCRIPT = (ChatMessage(role="user", content="first"), ChatMessage(role="assistant", content="one"), ChatMessage(role="user", content="second"))
WHERE = {"session_id": "s1", "platform": "api", "model": "m1"}


def test_a_completed_turn_is_priced_only_when_its_model_has_prices() -> None:
    done = TurnCompleted(turn_id="t1", text="hi", input_tokens=1_000_000, output_tokens=1_000_000)
    model = ModelSettings(model="m1", base_url="http://127.0.0.1", api_key="k", prices={"m1": Price(input=1.0, output=2.0)})
    assert priced(done, model).cost_usd == 3.0  # type: ignore[attr-defined]
    unpriced = ModelSettings(model="m1", base_url="http://127.0.0.1", api_key="k")
    assert priced(done, unpriced) is done
    started = TurnStarted(turn_id="t1", text="hi")
    assert priced(started, model) is started


def test_the_last_user_text_is_the_newest_user_message_or_nothing() -> None:
    assert last_user_text(TRANSCRIPT) == "second"
    assert last_user_text(()) == "" and last_user_text(TRANSCRIPT[1:2]) == ""


def test_a_turn_start_calls_agent_start_and_an_answer_calls_session_end_post_llm_call_and_agent_end() -> None:
    [(name, kwargs)] = turn_hook_calls(TurnStarted(turn_id="t1", text="hello"), TRANSCRIPT, **WHERE, with_history=False)
    assert name == "agent:start" and kwargs["message"] == "hello" and kwargs["session_id"] == "s1"
    calls = turn_hook_calls(TurnCompleted(turn_id="t1", text="answer"), TRANSCRIPT, **WHERE, with_history=True)
    assert [n for n, _ in calls] == ["on_session_end", "post_llm_call", "agent:end"]
    assert calls[0][1]["completed"] is True and calls[0][1]["interrupted"] is False
    assert calls[1][1]["user_message"] == "second" and len(calls[1][1]["conversation_history"]) == 3
    assert calls[2][1]["response"] == "answer"
    assert turn_hook_calls(TurnCompleted(turn_id="t1", text="answer"), TRANSCRIPT, **WHERE, with_history=False)[1][1]["conversation_history"] == []


def test_a_failed_cancelled_or_silent_turn_calls_only_session_end() -> None:
    for ended in (TurnFailed(turn_id="t1", error="x"), TurnCancelled(turn_id="t1", reason="stop"), TurnCompleted(turn_id="t1", text="")):
        calls = turn_hook_calls(ended, TRANSCRIPT, **WHERE, with_history=True)
        assert [n for n, _ in calls] == ["on_session_end"]
        assert calls[0][1]["interrupted"] is isinstance(ended, TurnCancelled)


def test_each_hooked_command_calls_its_command_hook_with_its_argument() -> None:
    assert command_hook_call(SwitchModel(model="m2"), session_id="s1", platform="cli") == (
        "command:model",
        {"platform": "cli", "user_id": "", "session_id": "s1", "command": "model", "args": "m2"},
    )
    assert command_hook_call(UndoTurn(), session_id="s1", platform="cli")[1]["args"] == ""
    assert command_hook_call(CompressContext(focus="tests"), session_id="s1", platform="cli")[0] == "command:compress"


def test_memory_providers_hear_a_turn_start_and_an_answered_turn_once_loaded() -> None:
    where: dict[str, Any] = {"session_id": "s1", "model": "m1", "platform": "api", "tool_count": 4}
    [start] = provider_notices(TurnStarted(turn_id="t1", text="hi"), None, **where)
    assert start.op == "turn_start" and start.arguments["tool_count"] == 4
    [sync] = provider_notices(TurnCompleted(turn_id="t1", text="answer"), TRANSCRIPT, **where)
    assert sync.op == "sync_turn" and sync.arguments == {"session_id": "s1", "user": "second", "answer": "answer"}
    assert provider_notices(TurnCompleted(turn_id="t1", text="answer"), None, **where) == []
    assert provider_notices(TurnCompleted(turn_id="t1", text=""), TRANSCRIPT, **where) == []
    assert provider_notices(ToolStarted(turn_id="t1", call_id="c", name="x", arguments="{}"), TRANSCRIPT, **where) == []
