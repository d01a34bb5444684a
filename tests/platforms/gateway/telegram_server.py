"""A Telegram Bot API server for tests, written from Telegram's documented HTTP API
(https://core.telegram.org/bots/api): ``getMe``, ``getUpdates`` (long polling: updates with
``update_id >= offset``; an offset confirms every update before it; waits up to ``timeout``
seconds for one), ``sendMessage``. Answers are ``{"ok": true, "result": ...}`` or ``{"ok":
false, "error_code": N, "description": ..., "parameters": {"retry_after": S}}``. A wrong token
is a 401. Runs on 127.0.0.1 in threads; tests push updates and wait for sent messages.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import threading
import time
from typing import Any

from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_markdown import CantParse, parse_markdown_v2

TOKEN = "123456:test-token"
BOT = {"id": 999, "is_bot": True, "first_name": "Hermes", "username": "hermes_test_bot"}


@dataclasses.dataclass
class Sent:
    at: float
    payload: dict[str, Any]
    status: int

    @property
    def chat_id(self) -> int:
        return int(self.payload["chat_id"])

    @property
    def raw(self) -> str:
        return str(self.payload.get("text", ""))

    @property
    def text(self) -> str:
        """What the user sees (MarkdownV2 markup resolved)."""
        if self.payload.get("parse_mode") == "MarkdownV2":
            try:
                return parse_markdown_v2(self.raw)[0]
            except CantParse:
                return self.raw
        return self.raw

    @property
    def entities(self) -> list[str]:
        return parse_markdown_v2(self.raw)[1] if self.payload.get("parse_mode") == "MarkdownV2" else []


class TelegramServer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.confirmed = 0
        """Every update_id below this was confirmed by an offset."""
        self.sent: list[Sent] = []
        self.failures: list[tuple[int, dict[str, Any]]] = []
        """Answers the next sendMessage calls get instead of success: (status, body)."""
        self.poll_failures: list[tuple[int, dict[str, Any]]] = []
        """Answers the next getUpdates calls get instead of updates."""
        self.callbacks_answered: list[str] = []
        self.handed: dict[int, float] = {}
        """update_id -> when a getUpdates answer first carried it (monotonic; benchmarks)."""
        self.calls: dict[str, int] = {}
        self.cond = threading.Condition()
        self._next_update = 1
        self._next_message = 1
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, answer = server.handle(self.path, body)
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a poll cancelled at its stop), as against Telegram

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http.block_on_close = False
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> TelegramServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.cond.notify_all()
        self.http.shutdown()
        self.http.server_close()

    # -- the API ----------------------------------------------------------------------------

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        token, _, method = path.removeprefix("/bot").partition("/")
        if token != TOKEN:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        with self.cond:
            self.calls[method] = self.calls.get(method, 0) + 1
        if method == "getMe":
            return 200, {"ok": True, "result": BOT}
        if method == "getUpdates":
            with self.cond:
                if self.poll_failures:
                    return self.poll_failures.pop(0)
            return 200, {"ok": True, "result": self.get_updates(int(body.get("offset", 0)), float(body.get("timeout", 0)))}
        if method == "answerCallbackQuery":
            with self.cond:
                self.callbacks_answered.append(str(body.get("callback_query_id")))
                self.cond.notify_all()
            return 200, {"ok": True, "result": True}
        if method == "sendMessage":
            return self.send_message(body)
        return 404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"}

    def get_updates(self, offset: int, timeout: float) -> list[dict[str, Any]]:
        end = time.monotonic() + min(timeout, DEADLINE)
        with self.cond:
            if offset > self.confirmed:
                self.confirmed = offset
            while True:
                ready = [u for u in self.updates if u["update_id"] >= max(offset, self.confirmed)]
                left = end - time.monotonic()
                if ready or left <= 0:
                    now = time.monotonic()
                    for update in ready:
                        self.handed.setdefault(update["update_id"], now)
                    return ready
                self.cond.wait(left)  # the long poll: until an update comes or the timeout

    def send_message(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.cond:
            if self.failures:
                status, answer = self.failures.pop(0)
                self.sent.append(Sent(time.monotonic(), body, status))
                self.cond.notify_all()
                return status, answer
            if body.get("parse_mode") == "MarkdownV2":
                try:
                    parse_markdown_v2(str(body.get("text", "")))
                except CantParse as exc:
                    self.sent.append(Sent(time.monotonic(), body, 400))
                    self.cond.notify_all()
                    return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {exc}"}
            self._next_message += 1
            self.sent.append(Sent(time.monotonic(), body, 200))
            self.cond.notify_all()
            message = {
                "message_id": 10_000 + self._next_message,
                "date": int(time.time()),
                "chat": {"id": body["chat_id"], "type": "private"},
                "text": body.get("text", ""),
            }
            return 200, {"ok": True, "result": message}

    # -- the test's side --------------------------------------------------------------------

    def push(self, user_id: int, text: str, *, chat_id: int | None = None, chat_type: str = "private") -> dict[str, Any]:
        """A user writes to the bot: a new update."""
        with self.cond:
            update = {
                "update_id": self._next_update,
                "message": {
                    "message_id": self._next_update,
                    "date": int(time.time()),
                    "chat": {"id": chat_id if chat_id is not None else user_id, "type": chat_type},
                    "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                    "text": text,
                },
            }
            self._next_update += 1
            self.updates.append(update)
            self.cond.notify_all()
            return update

    def press(self, user_id: int, sent: Sent, data: str) -> dict[str, Any]:
        """A user taps an inline button of ``sent``: a ``callback_query`` update."""
        with self.cond:
            update = {
                "update_id": self._next_update,
                "callback_query": {
                    "id": f"q{self._next_update}",
                    "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                    "message": {"message_id": 1, "date": int(time.time()), "chat": {"id": sent.chat_id, "type": "private"}, "text": sent.raw},
                    "chat_instance": "1",
                    "data": data,
                },
            }
            self._next_update += 1
            self.updates.append(update)
            self.cond.notify_all()
            return update

    def fail_next_poll(self, status: int, description: str, retry_after: int | None = None) -> None:
        answer: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            answer["parameters"] = {"retry_after": retry_after}
        with self.cond:
            self.poll_failures.append((status, answer))

    def redeliver(self) -> None:
        """Forget every confirmation (as if the offsets never reached Telegram): all updates come again."""
        with self.cond:
            self.confirmed = 0
            self.cond.notify_all()

    def fail_next_send(self, status: int, description: str, retry_after: int | None = None) -> None:
        answer: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            answer["parameters"] = {"retry_after": retry_after}
        with self.cond:
            self.failures.append((status, answer))

    def delivered(self, chat_id: int) -> list[Sent]:
        with self.cond:
            return [s for s in self.sent if s.chat_id == chat_id and s.status == 200]

    def wait_delivered(self, chat_id: int, count: int) -> list[Sent]:
        """Wait (up to the test deadline) until ``count`` messages reached ``chat_id``."""
        end = time.monotonic() + DEADLINE
        with self.cond:
            while True:
                done = [s for s in self.sent if s.chat_id == chat_id and s.status == 200]
                if len(done) >= count:
                    return done
                left = end - time.monotonic()
                assert left > 0, f"only {len(done)} of {count} messages reached chat {chat_id}: {[s.text for s in self.sent]}"
                self.cond.wait(left)
