"""The adapter's door for unknown users: a user not on the allowlist gets a one-time pairing code
and nothing else; once the owner runs ``hermes pairing approve`` (another process), the same
user is let in. The book is read fresh, in a worker thread, as a wait (``tag="pair"``).

A mixin of :class:`GatewayAdapter`: it uses the adapter's state and effects, declared below.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from protocols import PlatformMessage

from ._chats import Action, Reply
from ._effects import Effect
from ._pairing import new_code, request_code, update_book

log = logging.getLogger("actors.platforms.gateway._adapter")


class PairingDoor:
    """Pairing codes for unknown users of :class:`GatewayAdapter` (a mixin)."""

    platform: str
    home: Path
    counts: dict[str, int]
    start_wait: Callable[..., Any]
    commit: Callable[..., None]
    execute: Callable[[list[Action]], None]
    allowed: Callable[[PlatformMessage], list[Effect]]

    def pair(self, message: PlatformMessage) -> None:
        self.start_wait(self._pair, message, tag="pair", timeout=30.0)

    async def _pair(self, message: PlatformMessage) -> tuple[PlatformMessage, bool, str | None]:
        """The pairing book, read fresh: is the user paired now (``hermes pairing approve`` runs
        in another process), else the code to send them (None: they already have one)."""

        def change(book: Any) -> tuple[Any, tuple[bool, str | None]]:
            if message.user_id in book.paired(self.platform):
                return book, (True, None)
            new, code = request_code(
                book, platform=self.platform, user_id=message.user_id, user_name=message.user_name, chat_id=message.chat_id, now=time.time(), code=new_code()
            )
            return new, (False, code)

        paired, code = await trio.to_thread.run_sync(update_book, self.home, change)
        return message, paired, code

    def paired(self, status: str, value: Any, error: str) -> None:
        if status != "ok":
            log.warning("gateway %s: the pairing book could not be read: %s", self.platform, error)
            return
        message, paired, code = value
        if paired:
            self.commit(self.allowed(message))
            return
        self.counts["refused"] += 1
        if code is not None:
            text = f"Hi! I don't know you yet. Your pairing code is {code}.\nAsk the owner of this bot to run: hermes pairing approve {self.platform} {code}"
            self.execute([Reply(message, text, final=False)])
