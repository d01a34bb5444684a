"""A session's event stream: one gap-free sequence, a bounded replay buffer, many subscribers.

The hub is the data plane of a session: the session actor publishes control events
(turn started, tool finished, turn completed...) and the reactor publishes coalesced token
deltas straight from the model stream, both into the same sequence. It outlives session
actor incarnations (it lives in the :class:`HubRegistry`), so subscribers keep their
subscription and the numbering goes on across a crash and restart.

Invariant: every published event gets the next sequence number, and every subscriber
receives events in sequence order with no gaps (a slow or dead subscriber is dropped,
never skipped over).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Protocol

import msgspec

from protocols._session import SessionEvent

from ._recovery import OpenTurns

log = logging.getLogger(__name__)

DEFAULT_REPLAY = 2048
"""Events kept for subscribers that reconnect."""


class Subscriber(Protocol):
    def tell(self, message: Any) -> None: ...


class SessionHub:
    """The event stream of one session (thread-safe)."""

    def __init__(self, session_id: str, *, replay: int = DEFAULT_REPLAY) -> None:
        self.session_id = session_id
        self._lock = threading.Lock()
        self._seq = 0
        self._buffer: collections.deque[SessionEvent] = collections.deque(maxlen=replay)
        self._subscribers: list[Subscriber] = []
        self.open_turns = OpenTurns()
        """Turns announced here that have not ended (recovery uses it)."""
        self._observers: set[int] = set()
        """ids of subscribers that only watch (they do not count as someone attached)."""

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def subscribers(self) -> int:
        """How many subscribers are attached (a person, an API request, a TUI...)."""
        return sum(1 for s in self._subscribers if id(s) not in self._observers)

    def publish(self, event: SessionEvent) -> SessionEvent:
        """Number the event, keep it for replay, and tell every subscriber."""
        with self._lock:
            self._seq += 1
            numbered = msgspec.structs.replace(event, seq=self._seq, session_id=self.session_id)
            self._buffer.append(numbered)
            self.open_turns.note(numbered)
            dead = []
            for subscriber in self._subscribers:
                try:
                    subscriber.tell(numbered)
                except Exception as exc:
                    log.warning("dropping a subscriber of session %s: %s", self.session_id, exc)
                    dead.append(subscriber)
            for subscriber in dead:
                self._subscribers.remove(subscriber)
                self._observers.discard(id(subscriber))
        return numbered

    def subscribe(self, subscriber: Subscriber, *, after_seq: int = 0, observer: bool = False) -> int:
        """Replay the kept events after ``after_seq``, then stream; returns how many were missed.

        Missed events are those older than the replay buffer: the subscriber should reload
        the transcript from the store when the number is not 0.
        """
        with self._lock:
            oldest = self._buffer[0].seq if self._buffer else self._seq + 1
            missed = max(0, oldest - after_seq - 1)
            for event in self._buffer:
                if event.seq > after_seq:
                    subscriber.tell(event)
            if subscriber not in self._subscribers:
                self._subscribers.append(subscriber)
            if observer:
                self._observers.add(id(subscriber))
            return missed

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)
            self._observers.discard(id(subscriber))

    def release(self) -> int:
        """Drop the replay buffer if nobody follows and no turn is open; returns how many events went.

        Called when the session's actor stops (passivation): an idle session then costs its
        hub object, not its last 2,048 events. A subscriber that comes back later learns
        what it missed (``subscribe`` returns it) and reloads the transcript from the store.
        """
        with self._lock:
            if self._subscribers or self.open_turns.snapshot():
                return 0
            dropped = len(self._buffer)
            self._buffer.clear()
            return dropped

    def events_after(self, after_seq: int) -> list[SessionEvent]:
        with self._lock:
            return [e for e in self._buffer if e.seq > after_seq]


class HubRegistry:
    """All session hubs of a runtime, by session id."""

    def __init__(self, *, replay: int = DEFAULT_REPLAY) -> None:
        self._lock = threading.Lock()
        self._hubs: dict[str, SessionHub] = {}
        self._replay = replay

    def get(self, session_id: str) -> SessionHub:
        with self._lock:
            hub = self._hubs.get(session_id)
            if hub is None:
                hub = self._hubs[session_id] = SessionHub(session_id, replay=self._replay)
            return hub
