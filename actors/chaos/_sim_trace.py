"""One-line descriptions of what the simulator's trace records: messages, effects, events."""

from __future__ import annotations

from typing import Any

from protocols import WaitFinished
from protocols._session import CancelTurn, SessionEvent, StartTurn, TurnFailed
from protocols._store import AppendMessages, CreateSession, MessagesPersisted, StoreFailed

from ..agent._machine import CallModel, CancelModel, CancelTimer, CancelTool, Persist, RunTool, StartTimer
from ..agent._session_core import Loaded
from ..agent._session_timers import AckCheck, IdleTimer, TurnTimer


def show(item: Any) -> str:
    """A one-line description of a message, effect or event for the trace."""
    match item:
        case StartTurn(turn_id=turn_id, policy=policy):
            return f"StartTurn {turn_id} (policy {policy or 'default'})"
        case CancelTurn(turn_id=turn_id):
            return f"CancelTurn {turn_id or '(running turn)'}"
        case WaitFinished(status=status, value=value, error=error):
            return f"wait outcome {status}: {error or type(value).__name__}"
        case TurnTimer(token=token):
            return f"timer {token}"
        case IdleTimer(generation=generation):
            return f"idle timer {generation}"
        case AckCheck():
            return "store-ack-check"
        case Loaded(exists=exists, messages=messages, known_turns=known):
            return f"loaded ({f'{len(messages)} stored messages, {len(known)} known turns' if exists else 'new session'})"
        case MessagesPersisted(token=token) | StoreFailed(token=token):
            return f"{type(item).__name__} {token}"
        case Persist(token=token, messages=messages) | AppendMessages(token=token, messages=messages):
            mark = f", turn {item.turn.turn_id} {item.turn.event}" if item.turn is not None else ""
            return f"Persist {token} ({len(messages)} message(s){mark})"
        case CreateSession(token=token):
            return f"CreateSession {token}"
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
