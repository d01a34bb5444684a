"""A turn's answer streamed into one chat message by edits, run inside the turn's wait
(:func:`follow_turn`): the loop every editing platform shares. Every decision is
:mod:`._stream_plan`'s; a platform's subclass only makes the two calls (``_make``: send the
first message, edit it), each shielded so a call in flight is always answered before the wait
returns (the final reply's edit comes after the last streamed one).

No edit goes out before the streamed message's id is saved (``saved``, set by the adapter once
``StreamOpened`` is on disk; at most ``SAVE_WAIT``), so a crash after any edit finds the message.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import trio

from protocols import PlatformMessage, TextDelta, ToolStarted

from ._chunks import Measure, chunk_text
from ._media import split_media
from ._stream_plan import StreamPlan, StreamStep, add_text, add_tool, next_step, wake_at

CALL_TIMEOUT = 30.0
SAVE_WAIT = 30.0
"""Seconds the first edit waits for the streamed message's id to be saved."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """``platforms.<name>.extra``: ``streaming``, ``edit_interval``, ``tool_progress``."""

    enabled: bool = False
    interval: float = 1.0
    tool_progress: bool = False


@dataclasses.dataclass(frozen=True)
class FinalExtras:
    """What a final reply carries besides its text: the streamed message its first piece edits ('' none) and its files."""

    edit: str = ""
    media: tuple[str, ...] = ()


def final_pieces(text: str, edit: str, limit: int, measure: Measure) -> tuple[list[str], FinalExtras] | None:
    """A final reply's pieces and extras when it edits a streamed message or carries ``MEDIA:``
    files; None: a plain reply (the adapter's default delivery)."""
    body, media = split_media(text)
    if not media and not edit:
        return None
    pieces = chunk_text(body, limit, measure) if body else (["📎"] if edit else [])
    return pieces, FinalExtras(edit=edit, media=media)


class EditStream:
    """Feeds the plan with the turn's events and makes its calls (``_make``, per platform)."""

    def __init__(
        self,
        message: PlatformMessage,
        turn_id: str,
        settings: StreamSettings,
        notify: Callable[[Any], None],
        message_id: str = "",
        *,
        limit: int,
        measure: Measure,
        saved: trio.Event | None = None,
    ) -> None:
        self._message = message
        self._turn_id = turn_id
        self._notify = notify
        self.plan = StreamPlan(interval=settings.interval, limit=limit, measure=measure, tool_progress=settings.tool_progress, message_id=message_id)
        self._wake = trio.Event()
        self._closed = False
        self._saved = saved
        """Set by the adapter once the streamed message's id is saved; no edit goes out before."""

    def feed(self, event: Any) -> None:
        if isinstance(event, TextDelta):
            self.plan = add_text(self.plan, event.text)
        elif isinstance(event, ToolStarted):
            self.plan = add_tool(self.plan, event.name, event.arguments)
        else:
            return
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        while not self._closed:
            self.plan, step = next_step(self.plan, trio.current_time())
            if step is None:
                at = wake_at(self.plan)
                self._wake = trio.Event()
                with trio.move_on_at(at if at is not None else math.inf):
                    await self._wake.wait()
                continue
            with trio.CancelScope(shield=True):  # a call in flight is answered before the turn's end goes out
                await self._make(step)
            if step.kind == "send" and self.plan.message_id and self._saved is not None:
                with trio.move_on_after(SAVE_WAIT):  # a save that never comes costs only this
                    await self._saved.wait()
                self._saved = None

    async def _make(self, step: StreamStep) -> None:
        """Make ``step``'s call and update ``self.plan`` (``succeeded`` / ``failed``); tell
        ``StreamOpened`` through ``self._notify`` once a ``send`` has its message id."""
        raise NotImplementedError
