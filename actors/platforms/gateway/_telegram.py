"""The Telegram adapter (``/platforms/telegram``): long polling ``getUpdates`` and ``sendMessage``.

Each ``getUpdates`` is one reactor wait. Its batch is deduped and the seen log saved with the
next offset *before* the next poll (which confirms the batch to Telegram), so an update is
never confirmed before it is recorded. A failed poll (outage, 429, 5xx) waits by
:func:`retry_delay` and polls again; a refused token (401/404) is retried every minute and
shown as ``unauthorized``. Replies are cut at 4,096 UTF-16 units and sent piece by piece,
each retried after a 429's ``retry_after`` or with backoff.

With ``streaming: true`` a turn's answer is shown while it comes (``_telegram_stream.py``)
and the final reply's first piece is the last edit of that message; an answer's ``MEDIA:``
files follow the text as ``sendPhoto`` / ``sendDocument``; a message's photo and document are
fetched for the turn (``_chat_files.py``, shared with Matrix).
"""

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import trio

from actors._errors import ReactorStopped
from protocols import AdapterTimer, ApprovalRequested, PlatformMessage, WaitFinished

from ._adapter import GatewayAdapter
from ._chat_commands import approval_text
from ._chat_files import Attachment, prepare_turn, read_attachment
from ._chunks import utf16_units
from ._dedup import SeenLog
from ._edit_stream import FinalExtras, final_pieces
from ._effects import Effect
from ._inbound_lane import Lane, Laned, laned
from ._markdown_v2 import to_markdown_v2
from ._retry import CallFailed, retry_delay
from ._state_file import Outgoing
from ._telegram_api import CALLBACK_PREFIX, approval_buttons, download, edit_payload, not_modified, send_payload, to_message, unparsable, upload
from ._telegram_stream import TelegramStream
from ._telegram_transport import BotTransport
from ._waits import Prepare, Stream

UNAUTHORIZED_RETRY = 60.0
TELEGRAM_LIMIT = 4096
UPLOAD_TIMEOUT = 120.0


class TelegramAdapter(GatewayAdapter):
    platform = "telegram"
    limit = TELEGRAM_LIMIT
    measure = staticmethod(utf16_units)

    def __init__(
        self,
        *,
        token: str,
        base_url: str,
        poll_timeout: float,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.token = token
        self.base_url = base_url
        self.poll_timeout = poll_timeout
        self.username = ""
        self.bot_id = ""
        self.failures = 0
        self.transport: BotTransport | None = None
        """This incarnation's connections to the Bot API (made and used in the reactor, closed when it ends)."""
        self.polling = False
        """Invariant: at most one ``getUpdates`` in flight (a second would confirm a batch early)."""

    def scheduled_sender(self) -> Any:
        from ._scheduled import telegram_sender

        return telegram_sender(self.token, self.base_url, workspace=self.workspace, home=self.home)

    def begin(self) -> None:
        self.start_wait(self._call, "getMe", {}, 30.0, tag="me", timeout=60.0)

    def _transport(self) -> BotTransport:
        """This incarnation's connections (kept alive; made in the reactor, closed when the
        incarnation ends). Each call still has its own timeout; a call cancelled mid-request
        only loses its own connection."""
        if self.transport is None:
            self.transport = BotTransport(self.base_url, self.token)
        return self.transport

    async def _client(self) -> httpx.AsyncClient:
        return await self._transport().client()

    def terminated(self, kind: Any) -> None:
        super().terminated(kind)
        transport, self.transport = self.transport, None
        if transport is not None:
            with contextlib.suppress(ReactorStopped):  # a stopped reactor closed its sockets with it
                self.reactor.call_soon(trio.lowlevel.spawn_system_task, transport.aclose)

    async def _call(self, method: str, payload: dict[str, Any], timeout: float) -> Any:
        return await self._transport().call(method, payload, timeout)

    async def _upload(self, method: str, fields: dict[str, Any], field: str, name: str, data: bytes) -> Any:
        return await upload(await self._client(), self.base_url, self.token, method, fields, field, name, data, timeout=UPLOAD_TIMEOUT)

    async def _fetch(self, file_id: str, limit: int) -> tuple[str, bytes]:
        return await download(await self._client(), self.base_url, self.token, file_id, limit=limit, timeout=UPLOAD_TIMEOUT)

    # -- streaming and files ----------------------------------------------------------------

    def streamer(self, message: PlatformMessage, turn_id: str) -> Stream | None:
        if not self.stream_settings.enabled:
            return None
        known = self.streams.get(turn_id, "")
        saved = None
        if not known:  # a new stream: its first edit waits until the message's id is on disk
            saved = self.stream_saved[turn_id] = trio.Event()
        return TelegramStream(self._call, message, turn_id, self.stream_settings, self.address.tell, known, saved=saved)

    def preparer(self, message: PlatformMessage) -> Prepare | None:
        if not message.files:
            return None

        async def prepare(start: Any) -> Any:
            return await prepare_turn(self._fetch, message, start, workspace=self.workspace, vision=self.vision)

        return prepare

    def final_call(self, owed: Outgoing, streamed: str) -> tuple[list[str], Any]:
        """The final reply: its first piece edits the streamed message (if any), its ``MEDIA:`` files follow the text."""
        planned = final_pieces(owed.text, streamed, self.limit, self.measure)
        return planned if planned is not None else super().final_call(owed, streamed)

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
            case WaitFinished(tag="poll", status="ok", value=(updates, laned)):
                self.polling = False
                self.laned = laned
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
        self.start_wait(self._poll, payload, self.lane(), tag="poll", timeout=self.poll_timeout + 30.0)

    async def _poll(self, payload: dict[str, Any], lane: Lane | None) -> tuple[Any, dict[str, Laned]]:
        """``getUpdates``; the messages that take the lane (``_inbound_lane``) are told to their
        sessions from here, at once: ``(the updates, the lane's decisions)``. No lane if a
        ``pre_gateway_dispatch`` hook came since the poll started (a plugin loaded or reloaded
        meanwhile): the adapter screens the answer's messages first, as usual."""
        updates = await self._call("getUpdates", payload, self.poll_timeout + 10.0)
        if lane is None or not updates or self.screened():
            return updates, {}
        messages = [m for m in (to_message(u, self.username, self.bot_id) for u in updates) if m is not None]
        decided = laned(lane, messages, [self.dedup_key(m) for m in messages], self.clock())
        told: dict[str, Laned] = {}
        for turn_id, item in decided.items():
            try:
                self.tell_session(item.session_id, item.start)
            except Exception:  # the adapter tells it itself
                continue
            told[turn_id] = item
        return updates, told

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

    async def deliver(self, message: PlatformMessage, pieces: list[str], markup: dict[str, Any] | FinalExtras | None = None) -> int:
        """Each piece as MarkdownV2 (plain text when the converted piece is too long, or when
        Telegram cannot parse it), retried by :func:`retry_delay`; ``markup``: buttons on the
        last piece, or a final reply's extras (the streamed message the first piece edits, files)."""
        extras = markup if isinstance(markup, FinalExtras) else FinalExtras()
        buttons = markup if isinstance(markup, dict) else None
        retries = 0
        for i, piece in enumerate(pieces):
            retries += await self._send_text(
                message, piece, first=i == 0, buttons=buttons if i == len(pieces) - 1 else None, edit=extras.edit if i == 0 else ""
            )
        for path in extras.media:
            item = await read_attachment(path, workspace=self.workspace, home=self.home)
            if isinstance(item, Attachment):
                retries += await self._send_file(message, item)
            else:
                retries += await self._send_text(message, item, first=False, buttons=None, edit="")
        return retries

    async def _send_text(self, message: PlatformMessage, piece: str, *, first: bool, buttons: dict[str, Any] | None, edit: str) -> int:
        formatted = to_markdown_v2(piece)
        plain = utf16_units(formatted) > TELEGRAM_LIMIT
        attempt = retries = 0
        while True:
            attempt += 1
            text, mode = (piece, "") if plain else (formatted, "MarkdownV2")
            try:
                with trio.CancelScope(shield=True):  # a stop mid-call must not leave the reply's fate unknown
                    if edit:
                        await self._call("editMessageText", edit_payload(message, edit, text, parse_mode=mode), 30.0)
                    else:
                        await self._call("sendMessage", send_payload(message, text, first=first, parse_mode=mode, markup=buttons), 30.0)
                return retries
            except CallFailed as failure:
                if edit and not_modified(failure):
                    return retries  # this edit was made before (a restart between it and its record)
                if not plain and unparsable(failure):
                    plain = True  # never lose a reply to formatting
                    continue
                if edit and failure.status == 400:
                    edit = ""  # the streamed message is gone (deleted, too old): the reply as a new message
                    continue
                delay = retry_delay(failure, attempt)
                if delay is None:
                    raise
                retries += 1
                await trio.sleep(delay)

    async def _send_file(self, message: PlatformMessage, item: Attachment) -> int:
        method, field = ("sendPhoto", "photo") if item.kind == "photo" else ("sendDocument", "document")
        fields = {k: v for k, v in send_payload(message, "", first=False).items() if k != "text"}
        attempt = retries = 0
        while True:
            attempt += 1
            try:
                with trio.CancelScope(shield=True):
                    await self._upload(method, fields, field, item.name, item.data)
                return retries
            except CallFailed as failure:
                delay = retry_delay(failure, attempt)
                if delay is None:
                    raise
                retries += 1
                await trio.sleep(delay)
