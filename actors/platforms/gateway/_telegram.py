"""The Telegram adapter (``/platforms/telegram``): long polling ``getUpdates`` and ``sendMessage``.

Each ``getUpdates`` is one reactor wait. Its batch is deduped and the seen log saved with the
next offset *before* the next poll (which confirms the batch to Telegram), so an update is
never confirmed before it is recorded. A failed poll (outage, 429, 5xx) waits by
:func:`retry_delay` and polls again; a refused token (401/404) is retried every minute and
shown as ``unauthorized``. Replies are cut at 4,096 UTF-16 units and sent piece by piece,
each retried after a 429's ``retry_after`` or with backoff.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import trio

from protocols import AdapterTimer, ApprovalRequested, PlatformMessage, WaitFinished

from ._adapter import Effect, GatewayAdapter, approval_text
from ._chunks import utf16_units
from ._dedup import SeenLog
from ._markdown_v2 import to_markdown_v2
from ._retry import CallFailed, retry_delay
from ._telegram_api import CALLBACK_PREFIX, approval_buttons, call, send_payload, to_message, unparsable

_SSL: ssl.SSLContext | None = None
"""One TLS context for every call (an ``httpx.AsyncClient`` would build its own each time)."""
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
        self.polling = False
        """Invariant: at most one ``getUpdates`` in flight (a second would confirm a batch early)."""

    def scheduled_sender(self) -> Any:
        from ._scheduled import telegram_sender

        return telegram_sender(self.token, self.base_url)

    def begin(self) -> None:
        self.start_wait(self._call, "getMe", {}, 30.0, tag="me", timeout=60.0)

    async def _call(self, method: str, payload: dict[str, Any], timeout: float) -> Any:
        global _SSL
        if _SSL is None:  # building one costs ~70 ms (the CA bundle): once, off the reactor
            _SSL = await trio.to_thread.run_sync(httpx.create_ssl_context)
        async with httpx.AsyncClient(verify=_SSL) as client:  # one a call: nothing left open when a wait is cancelled
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
                self.polling = False
                self.failures = 0
                if self.state != "running":
                    self.set_state("running", f"@{self.username}")
                self.batch(updates or [])
            case WaitFinished(tag="poll", value=failure):
                self.polling = False
                self.failed(failure, "poll")
            case WaitFinished(tag="answered"):
                pass
            case AdapterTimer(what=what):
                if what == "me":
                    self.begin()
                else:
                    self.poll()
            case _:
                return super().other(message)
        return None

    def poll(self) -> None:
        if self.polling:
            return
        self.polling = True
        payload = {"offset": self.seen.offset, "timeout": int(self.poll_timeout), "allowed_updates": ["message", "callback_query"]}
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

    def handle(self, message: PlatformMessage) -> list[Effect]:
        effects = super().handle(message)
        if message.message_id.startswith(CALLBACK_PREFIX):  # a button press: stop its spinner
            query = message.message_id.removeprefix(CALLBACK_PREFIX)
            effects.append(lambda: self.answer_callback(query))
        return effects

    def answer_callback(self, query: str) -> None:
        self.start_wait(self._quiet_call, "answerCallbackQuery", {"callback_query_id": query}, tag="answered", timeout=60.0)

    async def _quiet_call(self, method: str, payload: dict[str, Any]) -> None:
        try:
            await self._call(method, payload, 30.0)
        except CallFailed:
            pass  # the button's spinner ends by itself; nothing is lost

    def ask_approval(self, message: PlatformMessage, request: ApprovalRequested) -> None:
        text = f"{approval_text(request)}\nTap a button, or reply /approve or /deny."
        self.start_wait(self._deliver, message, [text], "", approval_buttons(request.request_id), tag="deliver", timeout=float("inf"))

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: dict[str, Any] | None = None) -> int:
        """Each piece as MarkdownV2 (plain text when the converted piece is too long, or when
        Telegram cannot parse it), retried by :func:`retry_delay`; ``markup`` on the last piece."""
        retries = 0
        for i, piece in enumerate(pieces):
            formatted = to_markdown_v2(piece)
            plain = utf16_units(formatted) > TELEGRAM_LIMIT
            buttons = markup if i == len(pieces) - 1 else None
            attempt = 0
            while True:
                attempt += 1
                payload = send_payload(message, piece if plain else formatted, first=i == 0, parse_mode="" if plain else "MarkdownV2", markup=buttons)
                try:
                    with trio.CancelScope(shield=True):  # a stop mid-call must not leave the reply's fate unknown
                        await self._call("sendMessage", payload, 30.0)
                    break
                except CallFailed as failure:
                    if not plain and unparsable(failure):
                        plain = True  # never lose a reply to formatting
                        continue
                    delay = retry_delay(failure, attempt)
                    if delay is None:
                        raise
                    retries += 1
                    await trio.sleep(delay)
        return retries
