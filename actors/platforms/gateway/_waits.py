"""The gateway's waits (run in the reactor): following one turn (or re-attaching to it after a
restart, with the store's word on a turn that already ended).

Each returns to the adapter actor as a ``WaitFinished``; the actor decides what follows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from actors import Reactor, Registry
from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from actors.agent._reader import TrioSubscriber
from protocols import ApprovalRequested, CancelTurn, StartTurn, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

TERMINAL = (TurnCompleted, TurnFailed, TurnCancelled, TurnRejected)


async def follow_turn(
    registry: Registry,
    reactor: Reactor,
    hubs: HubRegistry,
    session_id: str,
    start: StartTurn,
    notify: Callable[[Any], None],
    deadline: float,
    store: Path | None = None,
) -> Any:
    """Start ``start`` in its session and return the turn's end (``TurnCompleted`` / ``Failed`` /
    ``Cancelled`` / ``Rejected``; a ``TurnFailed`` of kind ``deadline`` after ``deadline`` seconds,
    the turn cancelled); an approval request is handed to ``notify`` on the way. A cancelled wait
    (the adapter stopped or crashed) leaves the turn running in its session.

    With ``store`` (a restarted adapter re-attaching to a turn its last incarnation followed):
    the hub's kept events are replayed, ``start`` is told again (the session runs a turn id at
    most once, so this only starts a turn that never reached it), and a turn the store already
    knows as ended returns from the store (the hub no longer keeps it, the process restarted)."""
    subscriber = TrioSubscriber(reactor, turn_id=start.turn_id)
    hub = hubs.get(session_id)
    hub.subscribe(subscriber, after_seq=0 if store is not None else hub.last_seq)
    try:
        tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, start)
        if store is not None:
            ended = await trio.to_thread.run_sync(stored_end, store, session_id, start.turn_id)
            if ended is not None:
                return ended
        with trio.move_on_after(deadline):
            while True:
                event = await subscriber.get()
                if isinstance(event, ApprovalRequested):
                    notify(event)
                elif isinstance(event, TERMINAL):
                    return event
        tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, CancelTurn(turn_id=start.turn_id, reason="no end within the gateway's deadline"))
        return TurnFailed(session_id=session_id, turn_id=start.turn_id, error=f"no answer within {deadline:g} s", kind="deadline")
    finally:
        hub.unsubscribe(subscriber)


def stored_end(store: Path, session_id: str, turn_id: str) -> Any:
    """The end of ``turn_id`` as the store knows it, or None (not ended, or no store). A completed
    turn's answer is the session's last assistant text when it is the session's last turn."""
    from actors.store import StoreReader

    if not store.exists():
        return None
    try:
        with StoreReader(store) as reader:
            turns = reader.load_turns(session_id)
            record = next((t for t in turns if t.turn_id == turn_id), None)
            if record is None or record.status == "running":
                return None
            if record.status == "completed":
                text = "(the answer was not kept)"
                if turns[-1].turn_id == turn_id:
                    said = [m.content for m in reader.load_messages(session_id) if m.role == "assistant" and isinstance(m.content, str) and m.content]
                    text = said[-1] if said else text
                return TurnCompleted(session_id=session_id, turn_id=turn_id, text=text)
            if record.status == "cancelled":
                return TurnCancelled(session_id=session_id, turn_id=turn_id, reason=record.reason or "cancelled")
            why = "the server restarted while it ran; ask again" if record.reason == "interrupted" else record.reason or "failed"
            return TurnFailed(session_id=session_id, turn_id=turn_id, error=why)
    except Exception:  # a store being created or migrated: follow the hub alone
        return None
