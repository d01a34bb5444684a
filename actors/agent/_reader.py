"""Session events into trio: a subscriber that any thread can ``tell``, read by a reactor task.

Used by the API server's routes, and through :func:`run_turn` by everything that starts a turn
in another session and waits for its end (delegation, background reviews, scheduled jobs).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from actors import Reactor
from protocols import CancelTurn, StartTurn, TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

if TYPE_CHECKING:
    from actors import Address

    from ._hub import SessionHub

TurnEnd = TurnCompleted | TurnFailed | TurnCancelled | TurnRejected

MAX_BUFFERED = 10_000


class Overflowed(Exception):
    """The reader fell more than ``MAX_BUFFERED`` events behind; it should resume by sequence number."""


class TrioSubscriber:
    """Buffers events told from any thread; ``await get()`` in the reactor returns them in order."""

    def __init__(self, reactor: Reactor, *, turn_id: str | None = None) -> None:
        self._reactor = reactor
        self._turn_id = turn_id
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = trio.Event()
        self.overflowed = False

    def tell(self, event: Any) -> None:
        if self._turn_id is not None and getattr(event, "turn_id", self._turn_id) != self._turn_id:
            return  # another turn of the same session (or a session-wide notice)
        self._reactor.call_soon(self._push, event)

    def _push(self, event: Any) -> None:
        if len(self._queue) >= MAX_BUFFERED:
            self.overflowed = True
        else:
            self._queue.append(event)
        self._wake.set()

    async def get(self) -> Any:
        while not self._queue:
            if self.overflowed:
                raise Overflowed
            self._wake = trio.Event()
            await self._wake.wait()
        return self._queue.popleft()


async def run_turn(
    reactor: Reactor,
    hub: SessionHub,
    address: Address[Any],
    start: StartTurn,
    *,
    cancel_reason: str,
    before: Sequence[Any] = (),
    on_event: Callable[[Any], None] | None = None,
) -> TurnEnd:
    """Tell ``before`` then ``start`` to the session at ``address`` and wait for that turn's end;
    ``on_event`` sees the turn's other events. A wait left any other way (its caller's deadline or
    cancellation) cancels the turn with ``cancel_reason``, so the turn never outlives the interest."""
    reader = TrioSubscriber(reactor, turn_id=start.turn_id)
    hub.subscribe(reader, after_seq=hub.last_seq)
    ended = False
    try:
        for message in before:
            address.tell(message)
        address.tell(start)
        while True:
            event = await reader.get()
            if isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected):
                ended = True
                return event
            if on_event is not None:
                on_event(event)
    finally:
        hub.unsubscribe(reader)
        if not ended:
            address.tell(CancelTurn(turn_id=start.turn_id, reason=cancel_reason))
