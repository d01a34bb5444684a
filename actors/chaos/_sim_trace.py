"""One-line descriptions of what the simulator's trace records: messages, effects, events."""

from __future__ import annotations

from typing import Any

from protocols._session import CancelTurn, SessionEvent, StartTurn, TurnFailed
from protocols._store import MessagesPersisted, StoreFailed

from ..agent._machine import CallModel, CancelModel, CancelTimer, CancelTool, Persist, RunTool, StartTimer
from ._sim_world import Loaded, Outcome, TimerMessage


def show(item: Any) -> str:
    """A one-line description of a message, effect or event for the trace."""
    match item:
        case StartTurn(turn_id=turn_id, policy=policy):
            return f"StartTurn {turn_id} (policy {policy or 'default'})"
        case CancelTurn(turn_id=turn_id):
            return f"CancelTurn {turn_id or '(running turn)'}"
        case Outcome(status=status, value=value, error=error):
            what = type(value).__name__ if value is not None and not isinstance(value, tuple) else "tool output"
            return f"wait outcome {status}: {error or what}"
        case TimerMessage(token=token):
            return f"timer {token}"
        case Loaded(prompt=prompt, messages=messages):
            return f"loaded ({'new session' if prompt is None else f'{len(messages)} stored messages'})"
        case MessagesPersisted(token=token) | StoreFailed(token=token):
            return f"{type(item).__name__} {token}"
        case Persist(token=token, messages=messages):
            return f"Persist {token} ({len(messages)} message(s))"
        case CallModel(token=token, messages=messages):
            return f"CallModel {token} ({len(messages)} messages)"
        case RunTool(call_id=call_id, name=name):
            return f"RunTool {call_id} {name}"
        case CancelModel(token=key) | CancelTool(call_id=key) | CancelTimer(token=key) | StartTimer(token=key):
            return f"{type(item).__name__} {key}"
        case SessionEvent(turn_id=turn_id, seq=seq):
            extra = ""
            if isinstance(item, TurnFailed):
                extra = f" ({item.kind})"
            return f"#{seq} {type(item).__name__} {turn_id}{extra}"
    return type(item).__name__
