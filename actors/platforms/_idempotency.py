"""``Idempotency-Key`` on non-streaming creates: a retry gets the first answer, duplicates share one turn."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._asgi import HttpError, Request, Send

MAX_KEYS = 10_000


@dataclasses.dataclass
class _Entry:
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class Idempotency:
    """Remembers the response of each (path, key); reactor-thread only."""

    def __init__(self) -> None:
        self._entries: collections.OrderedDict[tuple[str, str], _Entry] = collections.OrderedDict()

    async def handle(self, request: Request, send: Send, run: Callable[[Send], Awaitable[None]]) -> None:
        key = request.headers.get("idempotency-key")
        if key is None or request.method != "POST" or await _streaming(request):
            await run(send)
            return
        slot = (request.path, key)
        entry = self._entries.get(slot)
        if entry is not None:
            await entry.done.wait()  # a concurrent duplicate shares the first one's turn
            if not entry.messages:
                await run(send)  # the first one failed before answering: this one tries itself
                return
            for message in entry.messages:
                await send(message)
            return
        entry = self._entries[slot] = _Entry()
        while len(self._entries) > MAX_KEYS:
            self._entries.popitem(last=False)

        async def record(message: dict[str, Any]) -> None:
            entry.messages.append(message)
            await send(message)

        try:
            await run(record)
        finally:
            if not entry.messages or entry.messages[0].get("status", 500) >= 500:
                self._entries.pop(slot, None)  # a failure of ours is not an answer to replay
            entry.done.set()


async def _streaming(request: Request) -> bool:
    try:
        body = await request.json()
    except HttpError:
        return False  # the route answers the 400 (or 413) itself
    return body.get("stream") in (True, "true")
