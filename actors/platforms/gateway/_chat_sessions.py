"""The adapter's chat sessions, executed (the decisions are pure: ``_burst``, ``_resets``,
``_chat_commands``): a chat's held burst and its timer, the reset of a stale session before a
message is dispatched, ``/new`` and its hooks, and the questions a command asks the session or
the store (``/undo``, ``/retry``, ``/model``, ``/usage``, ``/compress``) as waits.

A mixin of :class:`GatewayAdapter`: it uses the adapter's state and effects, declared below.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from actors.agent import HubRegistry
from actors.agent._address import SESSIONS_PATH, tell_session
from protocols import (
    AdapterTimer,
    ApprovalRequested,
    CompressContext,
    ContextCompressed,
    PlatformMessage,
    SwitchModel,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
    TurnUndone,
    UndoTurn,
)

from . import _burst
from ._chat_commands import answer_text
from ._chats import Action, Chats, Reply, Start
from ._effects import Early, Effect
from ._inbound_lane import Laned
from ._resets import ChatSession, ResetPolicy, session_id_of, stale_reason
from ._session_key import key_of, turn_id_of

log = logging.getLogger("actors.platforms.gateway._adapter")


COMPRESS_DEADLINE = 600.0
"""Seconds ``/compress`` is followed (its summary is a model call; it goes on past this)."""


class ChatSessions:
    """Bursts, resets and commands' questions of :class:`GatewayAdapter` (a mixin)."""

    platform: str
    home: Path
    hubs: HubRegistry
    hooks: Any
    chats: Chats
    sessions: dict[str, ChatSession]
    bursts: dict[str, _burst.Burst]
    burst_window: float
    reset_policy: ResetPolicy
    tz: dt.tzinfo | None
    clock: Callable[[], float]
    approvals: dict[str, ApprovalRequested]
    laned: dict[str, Laned]
    retrying: set[str]
    told_by_lane: set[str]
    reactor: Any
    start_wait: Callable[..., Any]
    send_after: Callable[..., Any]
    _context: Callable[[], Any]
    commit: Callable[..., None]
    execute: Callable[[list[Action]], None]

    def hold(self, message: PlatformMessage) -> list[Effect]:
        """Hold ``message`` in its chat's burst (saved with the seen log); a timer sends the burst."""
        now = self.clock()
        self.bursts = _burst.add(self.bursts, key_of(message), message, now, self.burst_window)
        delay = max(0.0, self.bursts[key_of(message)].due - now)
        return [lambda: self.arm_burst(delay)]

    def arm_burst(self, delay: float) -> None:
        self.send_after(delay, AdapterTimer(what="burst"))

    def release(self, key: str) -> list[Effect]:
        """Send ``key``'s held burst now (a command of the chat comes after it)."""
        self.bursts, message = _burst.take(self.bursts, key)
        return self.dispatch(message) if message is not None else []

    def burst_due(self) -> None:
        now = self.clock()
        self.bursts, ready = _burst.take_due(self.bursts, now)
        due = _burst.next_due(self.bursts)
        if due is not None:  # a burst that grew since this timer was set: its own timer may have fired early
            self.arm_burst(max(0.01, due - now))
        if ready:
            self.commit([effect for _, message in ready for effect in self.dispatch(message)])

    def current_session(self, key: str) -> str:
        return session_id_of(key, self.sessions.get(key, ChatSession()).generation)

    def dispatch(self, message: PlatformMessage) -> list[Effect]:
        """A message for the agent: a fresh session first if the chat's is stale (the reset
        policy), then the busy policy."""
        key, now = key_of(message), self.clock()
        effects: list[Effect] = []
        current = self.sessions.get(key)
        lane = self.laned.pop(turn_id_of(message), None)
        if lane is not None:  # the poll's wait told its StartTurn already: that decision holds (``_inbound_lane``)
            current = ChatSession(generation=lane.generation, last_at=now)
            self.told_by_lane.add(lane.start.turn_id)
        elif current is not None and key not in self.chats.chats:
            why = stale_reason(self.reset_policy, current.last_at, now, self.tz)
            if why is not None:
                log.info("gateway %s: %s gets a new session (%s)", self.platform, key, why)
                effects += self.new_session(message, why)
                current = self.sessions[key]
                if self.reset_policy.notify:
                    notice = Reply(message, f"A new session started ({why}); earlier messages are not in its context.", final=False)
                    effects.append(lambda: self.execute([notice]))
        generation = current.generation if current is not None else 1
        session_id = session_id_of(key, generation)  # its first turn fires session:start (the session core does)
        self.sessions[key] = ChatSession(generation=generation, last_at=now)
        self.chats, actions = self.chats.on_message(message, session_id)
        run = lambda: self.execute(actions)  # noqa: E731
        effects.append(Early(run) if all(isinstance(a, Start) for a in actions) else run)
        return effects

    def new_session(self, message: PlatformMessage, why: str) -> list[Effect]:
        """The chat's next session (its generation + 1); the hooks hear of it as of ``/new`` in the TUI."""
        key = key_of(message)
        current = self.sessions.get(key, ChatSession())
        old, new = session_id_of(key, current.generation), session_id_of(key, current.generation + 1)
        self.sessions[key] = ChatSession(generation=current.generation + 1)
        self.approvals.pop(old, None)
        where = {"platform": self.platform, "user_id": message.user_id, "session_key": key}
        calls = [
            ("on_session_finalize", {"session_id": old, "platform": self.platform}, self.where(old)),
            ("session:end", {**where, "session_id": old, "reason": why}, self.where(old)),
            ("on_session_reset", {"session_id": new, "platform": self.platform}, self.where(new)),
            ("session:reset", {**where, "session_id": new}, self.where(new)),
        ]
        return [lambda: self.fire(calls)]

    def where(self, session_id: str) -> dict[str, Any]:
        return {"session_id": session_id, "publish": self.hubs.get(session_id).publish}

    def fire(self, calls: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        if self.hooks is not None:
            self.hooks.fire_soon_in_order(calls)

    def ask(self, message: PlatformMessage, what: str, argument: str) -> None:
        """Ask the chat's session (``/undo``, ``/retry``, ``/model <name>``) or the store (``/usage``, ``/model``), as a wait."""
        session_id = self.current_session(key_of(message))
        registry = self._context().registry
        if what == "retry":  # its answer starts a turn outside a batch: no poll's lane starts one in this chat meanwhile
            self.retrying.add(key_of(message))
        self.start_wait(self._ask, registry, message, what, argument, session_id, tag="ask", timeout=COMPRESS_DEADLINE + 30.0)

    async def _ask(self, registry: Any, message: PlatformMessage, what: str, argument: str, session_id: str) -> tuple[PlatformMessage, str, str, str, Any]:
        import trio

        from actors.agent._reader import TrioSubscriber

        try:
            if what == "usage" or (what == "model" and not argument):
                answer: Any = await trio.to_thread.run_sync(_stored_session, self.home / "state.db", session_id)
            elif what == "compress":
                answer = await self._compress(registry, session_id, argument, f"gw-compress-{message.platform}-{message.chat_id}-{message.message_id}")
            else:
                reply_to = TrioSubscriber(self.reactor)
                command = SwitchModel(model=argument, reply_to=reply_to) if what == "model" else UndoTurn(reply_to=reply_to)
                tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, command)
                answer = "the session did not answer within 20 s; try again"
                with trio.move_on_after(20.0):
                    answer = await reply_to.get()
        except Exception as exc:
            answer = str(exc) or type(exc).__name__
        return message, what, argument, session_id, answer

    async def _compress(self, registry: Any, session_id: str, focus: str, turn_id: str) -> tuple[Any, Any]:
        """``/compress``: the compression's turn, told and followed to its end (``(compressed, end)``)."""
        import trio

        from actors.agent._reader import TrioSubscriber

        subscriber = TrioSubscriber(self.reactor, turn_id=turn_id)
        hub = self.hubs.get(session_id)
        hub.subscribe(subscriber, after_seq=hub.last_seq)
        compressed, end = None, None
        try:
            tell_session(registry, registry.lookup(SESSIONS_PATH), session_id, CompressContext(focus=focus, turn_id=turn_id))
            with trio.move_on_after(COMPRESS_DEADLINE):
                while end is None:
                    event = await subscriber.get()
                    if isinstance(event, ContextCompressed):
                        compressed = event
                    elif isinstance(event, (TurnCompleted, TurnFailed, TurnCancelled, TurnRejected)):
                        end = event
        finally:
            hub.unsubscribe(subscriber)
        return compressed, end

    def asked(self, status: str, value: Any, error: str) -> None:
        if status != "ok":  # _ask answers every failure itself but its wait's own deadline
            log.warning("gateway %s: a command's question got no answer (%s: %s)", self.platform, status, error)
            return
        message, what, argument, session_id, answer = value
        if what == "retry":
            self.retrying.discard(key_of(message))
        if what == "retry" and isinstance(answer, TurnUndone) and not answer.error and answer.text:
            self.commit(self.dispatch(msgspec.structs.replace(message, text=answer.text)))  # the /retry message's id: a turn of its own
            return
        self.execute([Reply(message, answer_text(what, argument, answer, session_id), final=False)])


def _stored_session(store: Path, session_id: str) -> Any:
    """The session's row in the store (None: not there, or no store yet)."""
    if not store.exists():
        return None
    from actors.store import StoreError, StoreReader

    try:
        with StoreReader(store) as reader:
            return reader.get_session(session_id)
    except StoreError:
        return None
