"""A turn's answer streamed into one Matrix message: the first piece an ``m.room.message``,
then ``m.replace`` edits of it (:func:`edit_content`), plain text with the plan's cursor; the
shared loop of :mod:`._edit_stream`. Transaction ids are derived (:func:`stream_txn`): the
first message's from the turn, an edit's from its text, so a call sent again (a retry, a
restarted adapter streaming the replayed turn) is the event the homeserver already has.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocols import PlatformMessage, StreamOpened

from ._edit_stream import CALL_TIMEOUT, EditStream, StreamSettings
from ._matrix_api import edit_content, message_content, room_path, stream_txn
from ._retry import CallFailed, retry_delay
from ._stream_plan import StreamStep, failed, succeeded

log = logging.getLogger(__name__)

Call = Callable[[str, str, Any], Awaitable[Any]]
"""``(method, path, body) -> answer``: one client-server call (``MatrixAdapter._call``)."""


class MatrixStream(EditStream):
    def __init__(
        self,
        call: Call,
        message: PlatformMessage,
        turn_id: str,
        settings: StreamSettings,
        notify: Callable[[Any], None],
        message_id: str = "",
        *,
        limit: int,
        measure: Callable[[str], int],
        saved: trio.Event | None = None,
    ) -> None:
        super().__init__(message, turn_id, settings, notify, message_id, limit=limit, measure=measure, saved=saved)
        self._call = call

    async def _make(self, step: StreamStep) -> None:
        room = self._message.chat_id
        try:
            with trio.fail_after(CALL_TIMEOUT + 5):
                if step.kind == "send":
                    content = {k: v for k, v in message_content(self._message, step.text, first=True).items() if k not in ("format", "formatted_body")}
                    sent = await self._call("PUT", room_path(room, "send", "m.room.message", stream_txn(self._message, self._turn_id)), content)
                    event_id = str((sent or {}).get("event_id", ""))
                    self.plan = succeeded(self.plan, step, trio.current_time(), event_id)
                    if event_id:
                        self._notify(StreamOpened(turn_id=self._turn_id, message_id=event_id))
                else:
                    content = edit_content(self._message, self.plan.message_id, step.text, html=False)
                    await self._call("PUT", room_path(room, "send", "m.room.message", stream_txn(self._message, self._turn_id, step.text)), content)
                    self.plan = succeeded(self.plan, step, trio.current_time())
        except CallFailed as failure:
            give_up = retry_delay(failure, 1) is None
            if give_up:
                log.info("matrix: streaming into a message stopped (%s); the answer comes as a message", failure)
            self.plan = failed(self.plan, trio.current_time(), retry_after=failure.retry_after, final=give_up)
        except trio.TooSlowError:
            self.plan = failed(self.plan, trio.current_time(), retry_after=None, final=False)
