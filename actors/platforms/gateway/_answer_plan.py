"""A turn's answer decided when the adapter starts following the turn, sent by the wait that sees
the turn complete: the outbound fast path (one thread hop from the session's ``TurnCompleted``
to the platform call, not three: session → reactor → adapter actor → reactor).

What is decided up front (pure, :meth:`Chats.answer_to`): the message a completed end answers
(:class:`AnswerPlan`, frozen: the actor keeps it, the wait gets a copy). In the ``queue`` and
``steer`` modes only the turn's own end changes a chat's running turn, so the decision holds
until then; ``interrupt`` mode decides nothing up front (a new message supersedes the turn). The
text is the end's own (:func:`answer_text`, as the actor's decision).

Who settles the race between the wait's *fire* (the turn completed: the reply goes now) and the
actor's *revoke* (its graceful stop: nothing goes up front any more): the reactor thread alone,
in :class:`AnswerDesk`, which only the reactor touches. The wait fires there; the actor's stop
is a call into the reactor (:meth:`AnswerDesk.close`) whose answer lists the ends fired already.
The actor learns a fired end by the :class:`Answering` message the wait tells it (or from that
answer at its stop), decides the chat's end as for any end (the reply goes into the outbox, the
chat's next turn starts after the save), and hands the state it decided back by a reactor call
(:meth:`AnswerDesk.decide`, which sets the fired reply's ``trio.Event``). The send marks the
reply sent with that state, so once the platform confirmed the reply its chat's end is on disk
(``_effects.py``, ``mark_sent``).

The wait for that decision has no short deadline: the actor may be busy for long (a slow
handler, a loaded machine), and a reply not marked sent stays in the outbox and goes again
after a restart. It ends when the decision comes, or when the wait is cancelled (the adapter's
stop or crash: ``reactor.cancel_owner``), or after :data:`DECIDE_SAFETY` (logged as an error);
in the last two cases the reply is still marked sent, with the newest state the file knows. A
crash before the decision is the window every final reply has: the chat's turn is still running
on disk, and the restarted adapter answers it from the store once more.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import trio

from protocols import PlatformMessage, TurnCompleted

log = logging.getLogger(__name__)

DECIDE_SAFETY = 900.0
"""Seconds a sent reply waits for the actor's decision of its chat's end before it is marked
sent without it (loudly): a safety net for an actor stuck that long, not a timing assumption."""


def answer_text(text: str) -> str:
    """A completed turn's reply text."""
    return text or "(no answer)"


@dataclasses.dataclass(frozen=True)
class AnswerPlan:
    """One followed turn's pre-decided reply: the message it answers."""

    turn_id: str
    message: PlatformMessage


@dataclasses.dataclass(frozen=True)
class Answering:
    """Told to the adapter by the wait that fired a plan: the turn completed with ``end`` and its
    reply is being sent."""

    end: TurnCompleted


class Fired:
    """A fired plan's reply waiting for the actor's decision (reactor thread only)."""

    __slots__ = ("decided", "end", "newest")

    def __init__(self, end: TurnCompleted) -> None:
        self.end = end
        self.decided = trio.Event()
        self.newest: Any = None
        """The state the actor decided the chat's end in (set with ``decided``)."""


class AnswerDesk:
    """The fired plans of one adapter incarnation. Touched only in the reactor thread: the waits
    call it directly, the actor only by ``reactor.call_soon``."""

    def __init__(self) -> None:
        self._fired: dict[str, Fired] = {}
        self._closed = False

    def fire(self, turn_id: str, end: TurnCompleted) -> Fired | None:
        """The wait saw ``turn_id`` complete: its reply goes now, unless the actor's stop closed the desk."""
        if self._closed:
            return None
        fired = self._fired[turn_id] = Fired(end)
        return fired

    def done(self, turn_id: str) -> None:
        """The fired reply's wait ended."""
        self._fired.pop(turn_id, None)

    def decide(self, turn_id: str, newest: Any) -> None:
        """The actor decided the chat's end of a fired plan, ``newest`` the state that holds it."""
        fired = self._fired.get(turn_id)
        if fired is not None and not fired.decided.is_set():
            fired.newest = newest
            fired.decided.set()

    def close(self) -> list[TurnCompleted]:
        """The actor's graceful stop: no plan fires from now on. The ends fired already whose
        chat end the actor has not decided yet (it decides them now)."""
        self._closed = True
        return [f.end for f in self._fired.values() if not f.decided.is_set()]

    async def decision(self, turn_id: str, fired: Fired) -> Any:
        """The state the actor decided ``fired``'s chat end in; None after :data:`DECIDE_SAFETY`
        (logged). Cancelled with the wait (the adapter stopped or crashed)."""
        with trio.move_on_after(DECIDE_SAFETY):
            await fired.decided.wait()
        if not fired.decided.is_set():
            log.error("gateway: the reply of turn %s was sent but its chat's end was not decided within %g s; marked sent all the same", turn_id, DECIDE_SAFETY)
        return fired.newest
