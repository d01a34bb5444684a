"""Session events into trio: a subscriber that any thread can ``tell``, read by a reactor task.

Used by the API server's routes and by delegation (a parent's tool waiting for a child).
"""

from __future__ import annotations

import collections
from typing import Any

import trio

from actors import Reactor

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
