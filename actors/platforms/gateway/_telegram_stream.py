"""A turn's answer streamed into one Telegram message (``sendMessage``, then ``editMessageText``),
run inside the turn's wait (:func:`follow_turn`). Every decision is :mod:`._stream_plan`'s;
this only makes the calls, plain text, each shielded so a call in flight is always answered
before the wait returns (the final reply's edit comes after the last streamed one).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocols import PlatformMessage, StreamOpened, TextDelta, ToolStarted

from ._chunks import utf16_units
from ._retry import CallFailed, retry_delay
from ._stream_plan import StreamPlan, StreamStep, add_text, add_tool, failed, next_step, succeeded, wake_at
from ._telegram_api import edit_payload, not_modified, send_payload

log = logging.getLogger(__name__)

Call = Callable[[str, dict[str, Any], float], Awaitable[Any]]
CALL_TIMEOUT = 30.0
SAVE_WAIT = 30.0
"""Seconds the first edit waits for the streamed message's id to be saved."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """``platforms.telegram.extra``: ``streaming``, ``edit_interval``, ``tool_progress``."""

    enabled: bool = False
    interval: float = 1.0
    tool_progress: bool = False


class TelegramStream:
    def __init__(
        self,
        call: Call,
        message: PlatformMessage,
        turn_id: str,
        settings: StreamSettings,
        notify: Callable[[Any], None],
        message_id: str = "",
        *,
        saved: trio.Event | None = None,
    ) -> None:
        self._call = call
        self._message = message
        self._turn_id = turn_id
        self._notify = notify
        self.plan = StreamPlan(interval=settings.interval, limit=4096, measure=utf16_units, tool_progress=settings.tool_progress, message_id=message_id)
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
        try:
            with trio.fail_after(CALL_TIMEOUT + 5):
                if step.kind == "send":
                    sent = await self._call("sendMessage", send_payload(self._message, step.text, first=True), CALL_TIMEOUT)
                    message_id = str((sent or {}).get("message_id", ""))
                    self.plan = succeeded(self.plan, step, trio.current_time(), message_id)
                    if message_id:
                        self._notify(StreamOpened(turn_id=self._turn_id, message_id=message_id))
                else:
                    await self._call("editMessageText", edit_payload(self._message, self.plan.message_id, step.text), CALL_TIMEOUT)
                    self.plan = succeeded(self.plan, step, trio.current_time())
        except CallFailed as failure:
            if not_modified(failure):
                self.plan = succeeded(self.plan, step, trio.current_time())
                return
            give_up = retry_delay(failure, 1) is None
            if give_up:
                log.info("telegram: streaming into a message stopped (%s); the answer comes as a message", failure)
            self.plan = failed(self.plan, trio.current_time(), retry_after=failure.retry_after, final=give_up)
        except trio.TooSlowError:
            self.plan = failed(self.plan, trio.current_time(), retry_after=None, final=False)
