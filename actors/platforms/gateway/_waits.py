"""The gateway's waits (run in the reactor): following one turn (or re-attaching to it after a
restart, with the store's word on a turn that already ended).

Each returns to the adapter actor as a ``WaitFinished``; the actor decides what follows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import trio

from actors import Reactor, Registry
from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from actors.agent._reader import TrioSubscriber
from protocols import ApprovalRequested, CancelTurn, EnsureSession, SessionReady, StartTurn, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

log = logging.getLogger(__name__)

TERMINAL = (TurnCompleted, TurnFailed, TurnCancelled, TurnRejected)


class Stream(Protocol):
    """Shows a turn's events in the chat while it runs (``_telegram_stream.py``)."""

    def feed(self, event: Any) -> None:
        """A session event of the turn (deltas, tool starts; the rest is ignored)."""

    def close(self) -> None:
        """The turn ended: ``run`` returns once a call in flight is answered."""

    async def run(self) -> None:
        """Make the calls the events call for until closed."""


Prepare = Callable[[StartTurn], Awaitable[StartTurn]]
"""What a message's files add to its ``StartTurn`` (downloads run here, in the turn's wait)."""


async def follow_turn(
    registry: Registry,
    reactor: Reactor,
    hubs: HubRegistry,
    session_id: str,
    start: StartTurn,
    notify: Callable[[Any], None],
    deadline: float,
    store: Path | None = None,
    stream: Stream | None = None,
    prepare: Prepare | None = None,
    told: bool = False,
) -> Any:
    """Start ``start`` in its session and return the turn's end (``TurnCompleted`` / ``Failed`` /
    ``Cancelled`` / ``Rejected``; a ``TurnFailed`` of kind ``deadline`` after ``deadline`` seconds,
    the turn cancelled); an approval request is handed to ``notify`` on the way. A cancelled wait
    (the adapter stopped or crashed) leaves the turn running in its session.

    With ``store`` (a restarted adapter re-attaching to a turn its last incarnation followed):
    the hub's kept events are replayed, ``start`` is told again (the session runs a turn id at
    most once, so this only starts a turn that never reached it), and a turn the store already
    knows as ended returns from the store (the hub no longer keeps it, the process restarted).

    ``told`` (with ``store``): the adapter told ``start`` itself already (from its own thread,
    the fast path; not with ``prepare``). The wait replays the hub's kept events (none of the
    turn's is missed) and tells the session ``EnsureSession``, whose ``SessionReady`` comes after
    the session handled ``start``: a turn it took has announced itself by then (``TurnStarted``,
    ``TurnQueued``, ``TurnRejected``); if none did, the session had run that turn id before (an
    earlier incarnation told it and crashed before its save, ``_effects.py``), and the store's
    word on its end is read then, only then.

    ``prepare`` completes ``start`` first (the message's files downloaded); ``stream`` sees every
    event of the turn and is closed before the end is returned, so no edit of a streamed message
    can land after the final reply's."""
    if prepare is not None:
        try:
            start = await prepare(start)
        except Exception as exc:  # a bug in a file's handling must not lose the message (nor crash-loop the adapter)
            log.warning("gateway: the files of turn %s could not be prepared (%s); the text goes alone", start.turn_id, exc)
    if stream is None:
        return await _follow(registry, reactor, hubs, session_id, start, notify, deadline, store, None, told)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.run)
        try:
            return await _follow(registry, reactor, hubs, session_id, start, notify, deadline, store, stream, told)
        finally:
            stream.close()


async def _follow(
    registry: Registry,
    reactor: Reactor,
    hubs: HubRegistry,
    session_id: str,
    start: StartTurn,
    notify: Callable[[Any], None],
    deadline: float,
    store: Path | None,
    stream: Stream | None,
    told: bool,
) -> Any:
    subscriber = TrioSubscriber(reactor, turn_id=start.turn_id)
    hub = hubs.get(session_id)
    hub.subscribe(subscriber, after_seq=0 if store is not None else hub.last_seq)
    try:
        if told:  # the barrier: the session answers it after it took (or dropped) ``start``
            tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, EnsureSession(reply_to=subscriber))
        else:
            tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, start)
        if store is not None and not told:
            ended = await trio.to_thread.run_sync(stored_end, store, session_id, start.turn_id)
            if ended is not None:
                return ended
        took = False
        """Whether an event of the turn came (a turn the session takes announces itself at once)."""
        with trio.move_on_after(deadline):
            while True:
                event = await subscriber.get()
                if isinstance(event, SessionReady):
                    if not took and store is not None:  # dropped: the session ran this turn id before (``_effects.py``)
                        ended = await trio.to_thread.run_sync(stored_end, store, session_id, start.turn_id)
                        if ended is not None:
                            return ended
                    continue
                took = took or getattr(event, "turn_id", "") == start.turn_id
                if isinstance(event, ApprovalRequested):
                    notify(event)
                elif isinstance(event, TERMINAL):
                    return event
                elif stream is not None:
                    stream.feed(event)
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
