"""The gateway's waits (run in the reactor): following one turn, and saving the seen log.

Each returns to the adapter actor as a ``WaitFinished``; the actor decides what follows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from actors import Reactor, Registry
from actors._atomic import write_atomic
from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from actors.agent._reader import TrioSubscriber
from protocols import ApprovalRequested, CancelTurn, StartTurn, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

from ._dedup import SeenLog

TERMINAL = (TurnCompleted, TurnFailed, TurnCancelled, TurnRejected)


async def follow_turn(
    registry: Registry,
    reactor: Reactor,
    hubs: HubRegistry,
    session_id: str,
    start: StartTurn,
    notify: Callable[[Any], None],
    deadline: float,
) -> Any:
    """Start ``start`` in its session and return the turn's end (``TurnCompleted`` / ``Failed`` /
    ``Cancelled`` / ``Rejected``; a ``TurnFailed`` of kind ``deadline`` after ``deadline`` seconds,
    the turn cancelled); an approval request is handed to ``notify`` on the way. A cancelled wait
    (the adapter stopped or crashed) leaves the turn running in its session: its answer is not
    sent by the next incarnation (known gap, see ARCHITECTURE.md)."""
    subscriber = TrioSubscriber(reactor, turn_id=start.turn_id)
    hub = hubs.get(session_id)
    hub.subscribe(subscriber, after_seq=hub.last_seq)
    try:
        tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, start)
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


class SeenFile:
    """The seen log's file (``HERMES_HOME/gateway/<platform>.json``); writes are serialised and
    an older version never replaces a newer one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = trio.Lock()
        self._written = -1

    def load(self) -> SeenLog:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return SeenLog()
        except (OSError, ValueError) as exc:
            msg = f"{self.path} cannot be read ({exc}); move it away (messages seen before may then be answered again)"
            raise RuntimeError(msg) from None
        return SeenLog(ids=tuple(str(i) for i in data.get("seen", ())), offset=int(data.get("offset", 0)))

    async def save(self, log: SeenLog) -> SeenLog:
        async with self._lock:
            if log.version > self._written:
                text = json.dumps({"offset": log.offset, "seen": list(log.ids)})
                await trio.to_thread.run_sync(write_atomic, self.path, text.encode())
                self._written = log.version
        return log
