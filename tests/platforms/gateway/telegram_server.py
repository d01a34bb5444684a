"""A Telegram Bot API server for tests, written from Telegram's documented HTTP API
(https://core.telegram.org/bots/api): ``getMe``, ``getUpdates`` (long polling: updates with
``update_id >= offset``; an offset confirms every update before it; waits up to ``timeout``
seconds for one), ``sendMessage``, ``editMessageText`` (a message of the bot; the same text again
is ``400 message is not modified``), ``sendPhoto`` / ``sendDocument`` (``multipart/form-data``,
the file in the ``photo`` / ``document`` field; at most 10 MB / 50 MB), ``getFile`` and the
download at ``/file/bot<token>/<file_path>``. Answers are ``{"ok": true, "result": ...}`` or ``{"ok":
false, "error_code": N, "description": ..., "parameters": {"retry_after": S}}``. A wrong token
is a 401. Runs on 127.0.0.1 in threads; tests push updates and wait for sent messages.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
import http.server
import json
import socket
import threading
import time
import weakref
from typing import Any

from tests.conftest import DEADLINE
from tests.platforms.gateway.telegram_markdown import CantParse, parse_markdown_v2

TOKEN = "123456:test-token"
BOT = {"id": 999, "is_bot": True, "first_name": "Hermes", "username": "hermes_test_bot"}


@dataclasses.dataclass
class Sent:
    at: float
    """When the request arrived (monotonic, read before the server checks it)."""
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


@dataclasses.dataclass
class Uploaded:
    """A ``sendPhoto`` / ``sendDocument`` the server accepted."""

    method: str
    fields: dict[str, str]
    name: str
    data: bytes

    @property
    def chat_id(self) -> int:
        return int(self.fields["chat_id"])


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """``multipart/form-data`` as (fields, files: name -> (file name, bytes))."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    for part in parsed.iter_parts():
        name = str(part.get_param("name", header="content-disposition"))
        data = part.get_payload(decode=True) or b""
        filename = part.get_param("filename", header="content-disposition")
        if filename is None:
            fields[name] = data.decode()
        else:
            files[name] = (str(filename), data)
    return fields, files


class TelegramServer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.confirmed = 0
        """Every update_id below this was confirmed by an offset."""
        self.epoch = 0
        """Advanced by :meth:`redeliver`: an offset carried by a connection accepted before counts no more."""
        self._epochs: weakref.WeakKeyDictionary[socket.socket, int] = weakref.WeakKeyDictionary()
        self._barrier = 0
        """The local port of :meth:`redeliver`'s own connection, until the server accepted it."""
        self.sent: list[Sent] = []
        self.failures: list[tuple[int, dict[str, Any]]] = []
        """Answers the next sendMessage calls get instead of success: (status, body)."""
        self.poll_failures: list[tuple[int, dict[str, Any]]] = []
        """Answers the next getUpdates calls get instead of updates."""
        self.callbacks_answered: list[str] = []
        self.handed: dict[int, float] = {}
        """update_id -> when a getUpdates answer carrying it was first written out (monotonic; benchmarks)."""
        self.current = threading.local()
        """The request its thread handles: ``at``, when it was read (monotonic: a sent message's
        ``Sent.at``); ``epoch``, its connection's (``get_updates``)."""
        self.calls: dict[str, int] = {}
        self.texts: dict[int, tuple[str, str]] = {}
        """message_id -> (text, parse_mode) of every message the bot sent, as edited since."""
        self.edits: list[Sent] = []
        """Every ``editMessageText`` call (``payload["message_id"]`` names the message)."""
        self.edit_failures: list[tuple[int, dict[str, Any]]] = []
        self.on_edit: Any = None
        """Called with each ``editMessageText`` body as it arrives (a test's look at the bot's state then)."""
        self.uploads: list[Uploaded] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        """file_id -> (file_path, bytes): files users sent, for ``getFile``."""
        self.polls_dropped = 0
        """Long polls whose client closed the connection (an adapter stopping cancels its poll)."""
        self.held: threading.Event | None = None
        """While set: a sendMessage is taken (in ``sent``) but its answer waits for this event."""
        self.cond = threading.Condition()
        self._next_update = 1
        self._next_message = 1
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Telegram: a client reuses its connections
            disable_nagle_algorithm = True  # the answer's headers and body go as two writes: no 40 ms delayed-ACK stall

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                server.current.at = time.monotonic()  # the request is here: a benchmark's clock stops at this
                server.current.epoch = server.epoch_of(self.connection)
                answered = threading.Event()
                if self.path.endswith("/getUpdates"):
                    threading.Thread(target=server.watch_poll, args=(self.connection, answered), daemon=True).start()
                kind = self.headers.get("content-type") or ""
                if self.path.startswith("/file/"):
                    status, content, answer_type = server.file(self.path)
                    data = content
                else:
                    if kind.startswith("multipart/form-data"):
                        fields, files = parse_multipart(kind, raw)
                        status, answer = server.handle(self.path, {**fields, "_files": files})
                    else:
                        status, answer = server.handle(self.path, json.loads(raw or b"{}"))
                    data, answer_type = json.dumps(answer).encode(), "application/json"
                try:
                    self.send_response(status)
                    self.send_header("content-type", answer_type)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a poll cancelled at its stop), as against Telegram
                    return
                finally:
                    answered.set()
                if self.path.endswith("/getUpdates") and status == 200:
                    server.hand_out(answer["result"])

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            def process_request(self, request: Any, client_address: Any) -> None:
                if server.accepted(request, client_address):
                    self.shutdown_request(request)
                    return
                super().process_request(request, client_address)

        self.http = Server(("127.0.0.1", 0), Handler)
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
            answer = self.send_message(body)
            held = self.held
            if held is not None:
                assert held.wait(DEADLINE), "a held sendMessage answer was never released"
            return answer
        if method == "editMessageText":
            return self.edit_message(body)
        if method in ("sendPhoto", "sendDocument"):
            return self.upload(method, body)
        if method == "getFile":
            found = self.files.get(str(body.get("file_id")))
            if found is None:
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"}
            return 200, {
                "ok": True,
                "result": {"file_id": body["file_id"], "file_unique_id": "u" + str(body["file_id"]), "file_size": len(found[1]), "file_path": found[0]},
            }
        return 404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"}

    def file(self, path: str) -> tuple[int, bytes, str]:
        token, _, file_path = path.removeprefix("/file/bot").partition("/")
        found = next((data for p, data in self.files.values() if p == file_path), None)
        if token != TOKEN or found is None:
            return 404, b'{"ok":false,"error_code":404,"description":"Not Found"}', "application/json"
        return 200, found, "application/octet-stream"

    def edit_message(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        verdict = self.on_edit(body) if self.on_edit is not None else None
        if verdict is not None:  # the test answers this edit itself: not applied
            with self.cond:
                self.edits.append(Sent(self._arrival(), body, verdict[0]))
                self.cond.notify_all()
            return verdict
        with self.cond:
            message_id = int(body.get("message_id", 0))
            text, mode = str(body.get("text", "")), str(body.get("parse_mode") or "")
            status, answer = 200, {"ok": True, "result": {"message_id": message_id, "chat": {"id": body.get("chat_id")}, "text": text}}
            if self.edit_failures:
                status, answer = self.edit_failures.pop(0)
            elif message_id not in self.texts:
                status, answer = 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
            elif self.texts[message_id] == (text, mode):
                status, answer = (
                    400,
                    {"ok": False, "error_code": 400, "description": "Bad Request: message is not modified: specified new message content is exactly the same"},
                )
            elif mode == "MarkdownV2":
                try:
                    parse_markdown_v2(text)
                except CantParse as exc:
                    status, answer = 400, {"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {exc}"}
            if status == 200:
                self.texts[message_id] = (text, mode)
            self.edits.append(Sent(self._arrival(), body, status))
            self.cond.notify_all()
            return status, answer

    def upload(self, method: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        field, limit = ("photo", 10 * 1024 * 1024) if method == "sendPhoto" else ("document", 50 * 1024 * 1024)
        files = body.pop("_files", {})
        if field not in files:
            return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: there is no {field} in the request"}
        name, data = files[field]
        if len(data) > limit:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: file is too big"}
        with self.cond:
            self._next_message += 1
            self.uploads.append(Uploaded(method, {k: str(v) for k, v in body.items()}, name, data))
            self.cond.notify_all()
            return 200, {"ok": True, "result": {"message_id": 10_000 + self._next_message, "date": int(time.time()), "chat": {"id": int(body["chat_id"])}}}

    def get_updates(self, offset: int, timeout: float) -> list[dict[str, Any]]:
        end = time.monotonic() + min(timeout, DEADLINE)
        with self.cond:
            if offset > self.confirmed and getattr(self.current, "epoch", self.epoch) == self.epoch:
                self.confirmed = offset
            while True:
                ready = [u for u in self.updates if u["update_id"] >= max(offset, self.confirmed)]
                left = end - time.monotonic()
                if ready or left <= 0:
                    return ready
                self.cond.wait(left)  # the long poll: until an update comes or the timeout

    def hand_out(self, updates: list[dict[str, Any]]) -> None:
        """A ``getUpdates`` answer carrying ``updates`` was written to its client."""
        now = time.monotonic()
        with self.cond:
            for update in updates:
                self.handed.setdefault(update["update_id"], now)

    def _arrival(self) -> float:
        return float(getattr(self.current, "at", None) or time.monotonic())

    def accepted(self, request: socket.socket, address: tuple[str, int]) -> bool:
        """The server accepted a connection (in order: the kernel queues them first come, first
        served): note its epoch; True for :meth:`redeliver`'s own, which ends the last epoch."""
        with self.cond:
            if self._barrier and address[1] == self._barrier:
                self._barrier = 0
                self.epoch += 1
                self.confirmed = 0
                self.cond.notify_all()
                return True
            self._epochs[request] = self.epoch
            return False

    def epoch_of(self, connection: socket.socket) -> int:
        with self.cond:
            return self._epochs.get(connection, self.epoch)

    def watch_poll(self, connection: socket.socket, answered: threading.Event) -> None:
        """Count the poll as dropped if its client closes the connection before its answer was
        written (a peek sees the end; the next request's bytes on the kept-alive connection, or
        the server's own close, end the watch; a close after the answer is a pooled connection's)."""
        try:
            dropped = connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return
        if dropped and not answered.is_set():
            with self.cond:
                self.polls_dropped += 1
                self.cond.notify_all()

    def send_message(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.cond:
            if self.failures:
                status, answer = self.failures.pop(0)
                self.sent.append(Sent(self._arrival(), body, status))
                self.cond.notify_all()
                return status, answer
            if body.get("parse_mode") == "MarkdownV2":
                try:
                    parse_markdown_v2(str(body.get("text", "")))
                except CantParse as exc:
                    self.sent.append(Sent(self._arrival(), body, 400))
                    self.cond.notify_all()
                    return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {exc}"}
            self._next_message += 1
            self.sent.append(Sent(self._arrival(), body, 200))
            self.texts[10_000 + self._next_message] = (str(body.get("text", "")), str(body.get("parse_mode") or ""))
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

    def push_file(self, user_id: int, *, photo: bytes | None = None, document: tuple[str, bytes] | None = None, caption: str = "") -> dict[str, Any]:
        """A user sends a photo (three sizes, the given bytes the largest) or a document."""
        with self.cond:
            n = self._next_update
            message: dict[str, Any] = {
                "message_id": n,
                "date": int(time.time()),
                "chat": {"id": user_id, "type": "private"},
                "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            }
            if caption:
                message["caption"] = caption
            if photo is not None:
                sizes = []
                for i, (w, h) in enumerate(((90, 60), (320, 213), (1280, 853))):
                    file_id = f"photo{n}-{i}"
                    data = photo if i == 2 else photo[: max(1, len(photo) // (4 - i))]
                    self.files[file_id] = (f"photos/file_{n}_{i}.jpg", data)
                    sizes.append({"file_id": file_id, "file_unique_id": f"u{file_id}", "width": w, "height": h, "file_size": len(data)})
                message["photo"] = sizes
            if document is not None:
                file_id = f"doc{n}"
                self.files[file_id] = (f"documents/file_{n}.bin", document[1])
                message["document"] = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_name": document[0], "file_size": len(document[1])}
            update = {"update_id": n, "message": message}
            self._next_update += 1
            self.updates.append(update)
            self.cond.notify_all()
            return update

    def wait_for(self, done: Any, what: str) -> None:
        """Wait (up to the test deadline) until ``done()`` is true (called under the lock)."""
        end = time.monotonic() + DEADLINE
        with self.cond:
            while not done():
                left = end - time.monotonic()
                assert left > 0, f"waited in vain for {what}"
                self.cond.wait(left)

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
        """Forget every confirmation (as if the offsets never reached Telegram): all updates come
        again. That includes an offset the server has not read yet, sent on a connection made
        before this call (a client killed right after its last ``getUpdates``: its request may
        still wait in the socket): the connections accepted before the server accepts this
        call's own connect no longer confirm anything."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as own:
            own.bind(("127.0.0.1", 0))
            with self.cond:
                self._barrier = own.getsockname()[1]
            own.connect(self.http.server_address)
            end = time.monotonic() + DEADLINE
            with self.cond:
                while self._barrier:
                    left = end - time.monotonic()
                    assert left > 0, "the server did not accept a connection within the test deadline"
                    self.cond.wait(left)

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
