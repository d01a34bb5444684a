"""The Telegram adapter (``/platforms/telegram``): long polling ``getUpdates`` and ``sendMessage``.

Each ``getUpdates`` is one reactor wait. Its batch is deduped and the seen log saved with the
next offset *before* the next poll (which confirms the batch to Telegram), so an update is
never confirmed before it is recorded. A failed poll (outage, 429, 5xx) waits by
:func:`retry_delay` and polls again; a refused token (401/404) is retried every minute and
shown as ``unauthorized``. Replies are cut at 4,096 UTF-16 units and sent piece by piece,
each retried after a 429's ``retry_after`` or with backoff.
"""

from __future__ import annotations

from typing import Any

import httpx
import trio

from protocols import AdapterTimer, PlatformMessage, WaitFinished

from ._adapter import GatewayAdapter
from ._chunks import utf16_units
from ._dedup import SeenLog
from ._retry import CallFailed, retry_delay
from ._telegram_api import call, send_payload, to_message

UNAUTHORIZED_RETRY = 60.0
TELEGRAM_LIMIT = 4096


class TelegramAdapter(GatewayAdapter):
    platform = "telegram"
    limit = TELEGRAM_LIMIT
    measure = staticmethod(utf16_units)

    def __init__(self, *, token: str, base_url: str, poll_timeout: float, **common: Any) -> None:
        super().__init__(**common)
        self.token = token
        self.base_url = base_url
        self.poll_timeout = poll_timeout
        self.username = ""
        self.bot_id = ""
        self.failures = 0

    def begin(self) -> None:
        self.start_wait(self._call, "getMe", {}, 30.0, tag="me", timeout=60.0)

    async def _call(self, method: str, payload: dict[str, Any], timeout: float) -> Any:
        async with httpx.AsyncClient() as client:  # one a call: nothing left open when a wait is cancelled
            return await call(client, self.base_url, self.token, method, payload, timeout=timeout)

    def other(self, message: Any) -> Any:
        match message:
            case WaitFinished(tag="me", status="ok", value=me):
                self.username = str(me.get("username") or "")
                self.bot_id = str(me.get("id") or "")
                self.failures = 0
                self.set_state("running", f"@{self.username}")
                self.poll()
            case WaitFinished(tag="me", value=failure):
                self.failed(failure, "me")
            case WaitFinished(tag="poll", status="ok", value=updates):
                self.failures = 0
                if self.state != "running":
                    self.set_state("running", f"@{self.username}")
                self.batch(updates or [])
            case WaitFinished(tag="poll", value=failure):
                self.failed(failure, "poll")
            case AdapterTimer(what=what):
                if what == "me":
                    self.begin()
                else:
                    self.poll()
            case _:
                return super().other(message)
        return None

    def poll(self) -> None:
        payload = {"offset": self.seen.offset, "timeout": int(self.poll_timeout), "allowed_updates": ["message"]}
        self.start_wait(self._call, "getUpdates", payload, self.poll_timeout + 10.0, tag="poll", timeout=self.poll_timeout + 30.0)

    def batch(self, updates: list[dict[str, Any]]) -> None:
        if not updates:
            self.poll()
            return
        offset = max(int(u.get("update_id", 0)) for u in updates) + 1
        messages = [m for m in (to_message(u, self.username, self.bot_id) for u in updates) if m is not None]
        self.accept(messages, offset=max(offset, self.seen.offset))

    def persisted(self, log_: SeenLog) -> None:
        self.poll()  # the next poll confirms the batch to Telegram: only now

    def failed(self, failure: Any, what: str) -> None:
        self.failures += 1
        if isinstance(failure, CallFailed) and failure.status in (401, 404):
            self.set_state("unauthorized", f"Telegram refused the bot token ({failure}); check TELEGRAM_BOT_TOKEN")
            delay = UNAUTHORIZED_RETRY
        else:
            problem = failure if isinstance(failure, CallFailed) else CallFailed(0, str(failure))
            delay = retry_delay(problem, self.failures) or UNAUTHORIZED_RETRY
            self.set_state("backoff", f"{problem}; retrying in {delay:.1f} s")
        self.send_after(delay, AdapterTimer(what=what))

    async def deliver(self, message: PlatformMessage, pieces: list[str]) -> int:
        retries = 0
        for i, piece in enumerate(pieces):
            attempt = 0
            while True:
                attempt += 1
                try:
                    with trio.CancelScope(shield=True):  # a stop mid-call must not leave the reply's fate unknown
                        await self._call("sendMessage", send_payload(message, piece, first=i == 0), 30.0)
                    break
                except CallFailed as failure:
                    delay = retry_delay(failure, attempt)
                    if delay is None:
                        raise
                    retries += 1
                    await trio.sleep(delay)
        return retries
