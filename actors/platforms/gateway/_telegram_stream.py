"""A turn's answer streamed into one Telegram message (``sendMessage``, then ``editMessageText``):
the shared loop of :mod:`._edit_stream`, its calls plain text."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocols import PlatformMessage, StreamOpened

from ._chunks import utf16_units
from ._edit_stream import CALL_TIMEOUT, EditStream, StreamSettings
from ._retry import CallFailed, retry_delay
from ._stream_plan import StreamStep, failed, succeeded
from ._telegram_api import edit_payload, not_modified, send_payload

log = logging.getLogger(__name__)

Call = Callable[[str, dict[str, Any], float], Awaitable[Any]]


class TelegramStream(EditStream):
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
        super().__init__(message, turn_id, settings, notify, message_id, limit=4096, measure=utf16_units, saved=saved)
        self._call = call

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
