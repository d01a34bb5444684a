"""What a session's events and commands call for beside its stream, as pure decisions.

A session publishes its events to its hub; some also call for work elsewhere: a completed turn
is priced, plugin hooks observe turns and commands (their answers ignored), and memory providers
hear of a turn's start and of each answered turn. Which hooks and notices, with what payloads,
is decided here; ``_session_events.SessionEvents`` sends them. The nudges' part of the same
events is decided in ``_nudges``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from protocols import ChatMessage
from protocols._memory import ProviderNotice
from protocols._session import CompressContext, SessionEvent, SwitchModel, TurnCancelled, TurnCompleted, TurnFailed, TurnStarted, UndoTurn

from ._model import ModelSettings

HookCall = tuple[str, dict[str, Any]]
"""A hook point and the keyword arguments its callbacks get."""

TURN_HOOK_EVENTS = (TurnStarted, TurnCompleted, TurnFailed, TurnCancelled)
"""The events plugin hooks observe (``turn_hook_calls``)."""

HOOKED_COMMANDS = (SwitchModel, UndoTurn, CompressContext)
"""The commands plugin hooks observe (``command_hook_call``)."""


def priced(event: SessionEvent, model: ModelSettings) -> SessionEvent:
    """A completed turn carries its cost when the session's model has prices; any other event is as it is."""
    if type(event) is TurnCompleted and model.prices:
        cost = model.cost(event.input_tokens, event.output_tokens, event.cache_read_tokens, event.cache_write_tokens)
        return msgspec.structs.replace(event, cost_usd=cost)
    return event


def last_user_text(transcript: Sequence[ChatMessage]) -> str:
    """The text of the transcript's last user message ("" when there is none)."""
    return next((m.content or "" for m in reversed(transcript) if m.role == "user"), "")


def turn_hook_calls(
    event: SessionEvent, transcript: Sequence[ChatMessage], *, session_id: str, platform: str, model: str, with_history: bool
) -> list[HookCall]:
    """The hooks a turn's start or end calls: ``agent:start``; at any end ``on_session_end``, and
    for an answer ``post_llm_call`` (the conversation only when ``with_history``) and ``agent:end``."""
    if isinstance(event, TurnStarted):
        return [("agent:start", {"platform": platform, "user_id": "", "session_id": session_id, "message": event.text})]
    completed = isinstance(event, TurnCompleted)
    ended = {"session_id": session_id, "completed": completed, "interrupted": isinstance(event, TurnCancelled), "model": model, "platform": platform}
    calls: list[HookCall] = [("on_session_end", ended)]
    if isinstance(event, TurnCompleted) and event.text:
        user = last_user_text(transcript)
        answered = {
            "session_id": session_id,
            "user_message": user,
            "assistant_response": event.text,
            "conversation_history": [m.to_openai() for m in transcript] if with_history else [],
            "model": model,
            "platform": platform,
        }
        calls.append(("post_llm_call", answered))
        calls.append(("agent:end", {"platform": platform, "user_id": "", "session_id": session_id, "message": user, "response": event.text}))
    return calls


def command_hook_call(message: SwitchModel | UndoTurn | CompressContext, *, session_id: str, platform: str) -> HookCall:
    """The ``command:<name>`` hook a session command calls, with its argument (model, focus)."""
    name, args = {
        SwitchModel: ("model", getattr(message, "model", "")),
        UndoTurn: ("undo", ""),
        CompressContext: ("compress", getattr(message, "focus", "")),
    }[type(message)]
    return f"command:{name}", {"platform": platform, "user_id": "", "session_id": session_id, "command": name, "args": args}


def provider_notices(
    event: SessionEvent, transcript: Sequence[ChatMessage] | None, *, session_id: str, model: str, platform: str, tool_count: int
) -> list[ProviderNotice]:
    """What memory providers hear of an event: a turn's start, and each answered turn with its
    question (once the session has loaded: ``transcript`` None before)."""
    if type(event) is TurnStarted:
        started = {"session_id": session_id, "model": model, "platform": platform, "tool_count": tool_count}
        return [ProviderNotice(op="turn_start", arguments=started)]
    if type(event) is TurnCompleted and event.text and transcript is not None:
        user = last_user_text(transcript)
        return [ProviderNotice(op="sync_turn", arguments={"session_id": session_id, "user": user, "answer": event.text})]
    return []
