"""Following one turn's events in a request handler, and noticing a client that went away."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import trio

from protocols import TurnCancelled, TurnCompleted, TurnFailed, TurnRejected

from ._asgi import Request
from ._bridge import TrioSubscriber

TERMINAL = (TurnCompleted, TurnFailed, TurnCancelled, TurnRejected)


class follow_turn:
    """``await next()`` returns the turn's next event, or None after ``keepalive`` idle seconds."""

    def __init__(self, subscriber: TrioSubscriber, *, keepalive: float | None = None) -> None:
        self.subscriber = subscriber
        self.keepalive = keepalive
        self.done = False

    async def next(self) -> Any:
        if self.keepalive is None:
            event = await self.subscriber.get()
        else:
            event = None
            with trio.move_on_after(self.keepalive):
                event = await self.subscriber.get()
            if event is None:
                return None
        if isinstance(event, TERMINAL):
            self.done = True
        return event


@contextlib.asynccontextmanager
async def watch_disconnect(request: Request) -> AsyncIterator[trio.CancelScope]:
    """Run the block; cancel it if the client disconnects. ``scope.cancelled_caught`` tells."""
    scope = trio.CancelScope()

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                scope.cancel()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        with scope:
            yield scope
        nursery.cancel_scope.cancel()
