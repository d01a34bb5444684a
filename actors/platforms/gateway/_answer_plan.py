"""A turn's answer decided when the adapter starts following the turn, sent by the wait that sees
the turn complete: the outbound fast path (one thread hop from the session's ``TurnCompleted``
to the platform call, not three: session → reactor → adapter actor → reactor).

What is decided up front (pure, :meth:`Chats.answer_to`): the message a completed end answers.
In the ``queue`` and ``steer`` modes only the turn's own end changes a chat's running turn, so
the decision holds until then; ``interrupt`` mode decides nothing up front (a new message
supersedes the turn). The text is the end's own (:func:`answer_text`, as the actor's decision).

The plan is either *fired* (by the reactor: the turn completed, the reply is being sent) or
*revoked* (by the actor: its graceful stop), exactly once, under a lock. A fired plan is told to
the actor at once (:class:`Answering`), which decides the chat's end as for any end (the reply
goes into the outbox, the chat's next turn starts after the save) and hands the state it decided
back (:meth:`AnswerPlan.decide`); the send marks the reply sent with that state, so once the
platform confirmed the reply its chat's end is on disk (``_effects.py``, ``mark_sent``). A crash
before that write is the window every final reply has (sent again at most once).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Literal

import trio

from protocols import PlatformMessage, TurnCompleted

DECIDE_DEADLINE = 3.0
"""Seconds a sent reply waits for the actor's decision of its chat's end (the actor is alive:
it comes within a hop; a crashed one never sends it, and the reply is then not marked sent)."""


def answer_text(text: str) -> str:
    """A completed turn's reply text."""
    return text or "(no answer)"


@dataclasses.dataclass(frozen=True)
class Answering:
    """Told to the adapter by the wait that fired ``plan``: the turn completed with ``end`` and its
    reply is being sent."""

    end: TurnCompleted


class AnswerPlan:
    """One followed turn's pre-decided reply (shared by the actor and the reactor: a lock)."""

    __slots__ = ("_decided", "_lock", "absorbed", "end", "message", "newest", "state", "turn_id")

    def __init__(self, turn_id: str, message: PlatformMessage) -> None:
        self.turn_id = turn_id
        self.message = message
        """The message the reply answers."""
        self._lock = threading.Lock()
        self.state: Literal["armed", "fired", "revoked"] = "armed"
        self.end: TurnCompleted | None = None
        self.absorbed = False
        """The actor decided the chat's end of this fired plan (actor thread only)."""
        self.newest: Any = None
        self._decided = trio.Event()

    def fire(self, end: TurnCompleted) -> bool:
        """In the reactor: the turn completed; True if the reply is to be sent now."""
        with self._lock:
            if self.state != "armed":
                return False
            self.state, self.end = "fired", end
            return True

    def revoke(self) -> bool:
        """In the actor: nothing is sent up front any more; False if it was fired already."""
        with self._lock:
            if self.state == "armed":
                self.state = "revoked"
            return self.state == "revoked"

    def decide(self, newest: Any, call_soon: Any) -> None:
        """In the actor: the chat's end is decided, ``newest`` the state that holds it."""
        self.newest = newest
        call_soon(self._decided.set)

    async def decided(self) -> tuple[bool, Any]:
        """In the reactor: ``(whether the actor decided, the state it decided)``, bounded."""
        with trio.move_on_after(DECIDE_DEADLINE):
            await self._decided.wait()
        return self._decided.is_set(), self.newest
