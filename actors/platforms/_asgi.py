"""Small ASGI helpers: read a bounded body, answer JSON or an OpenAI error envelope, stream SSE.

The API server speaks raw ASGI (no framework): routes are few, bodies are decoded with
msgspec, and streaming needs exact control of when bytes go out.

Every request body goes through :func:`decode_body`, the one door from bytes to values:
whatever the bytes are (not JSON, not UTF-8, a lone surrogate escape, NaN, a number out of
range, nested deeper than :data:`MAX_DEPTH`), the answer is a 400 ``HttpError``.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
import trio

from ..agent._json_text import nests_deeper_than

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_BODY = 10 * 1024 * 1024
MAX_DEPTH = 128
"""How deep a request's JSON may nest. A chat request nests about 7 levels; deeper is an attack."""
DRAIN_IDLE = 5.0
"""Seconds a client may pause while we drop a body nobody read (see :meth:`Request.draining`)."""
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
_json = msgspec.json.Encoder()
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class HttpError(Exception):
    """Answer with an OpenAI-style error envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclasses.dataclass
class Request:
    scope: Scope
    _receive: Receive
    method: str
    path: str
    headers: dict[str, str]
    query: str
    _body: bytes | None = None
    _decoded: dict[str, Any] | None = None
    _ended: bool = False
    """The body's last message (or a disconnect) has been received."""

    @classmethod
    def from_scope(cls, scope: Scope, receive: Receive) -> Request:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        return cls(scope, receive, scope["method"], scope["path"], headers, scope.get("query_string", b"").decode("latin-1"))

    async def receive(self) -> dict[str, Any]:
        """The next ASGI message of this request."""
        message = await self._receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            self._ended = True
        return message

    def draining(self, send: Send) -> Send:
        """``send`` that reads and drops the rest of the body before the answer's last message.

        Hypercorn stops reading a connection while its queue of body chunks for the app is
        full, and ends the request by queueing one more message: an answer that leaves a body
        (or the part past ``MAX_BODY``) unread would never finish, and the client, still
        sending, would never read it. Dropping stops once the client pauses ``DRAIN_IDLE`` s.
        """

        async def drained(message: dict[str, Any]) -> None:
            if not self._ended and message["type"] == "http.response.body" and not message.get("more_body", False):
                while not self._ended:
                    with trio.move_on_after(DRAIN_IDLE) as idle:
                        await self.receive()
                    if idle.cancelled_caught:
                        break
            await send(message)

        return drained

    async def body(self, limit: int = MAX_BODY) -> bytes:
        if self._body is None:
            self._body = await self._read(limit)
        return self._body

    async def _read(self, limit: int) -> bytes:
        length = self.headers.get("content-length")
        if length is not None and length.isascii() and length.isdigit() and (len(length) > 15 or int(length) > limit):
            raise self._too_large(limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "the client went away before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise self._too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self, limit: int) -> HttpError:
        return HttpError(413, f"the request body is over {limit // (1024 * 1024)} MB", code="body_too_large")

    async def json(self, *, optional: bool = False) -> dict[str, Any]:
        """The body as a JSON object, decoded once; anything else is a 400 ``HttpError``.

        ``optional``: an empty body (also a chunked one) stands for ``{}``.
        """
        if self._decoded is None:
            raw = await self.body()
            self._decoded = {} if optional and (not raw or raw.isspace()) else decode_body(raw)
        return self._decoded


def decode_body(raw: bytes) -> dict[str, Any]:
    """Decode a request body that must be a JSON object; anything else is a 400 ``HttpError``."""
    if not raw:
        raise HttpError(400, "the body is empty; send a JSON object", code="invalid_json")
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:  # also NaN, Infinity, 1e999 and lone surrogate escapes
        raise HttpError(400, f"the body is not valid JSON: {_why(exc, raw)}", code="invalid_json") from None
    except UnicodeDecodeError as exc:  # msgspec checks UTF-8 where it builds a str
        raise HttpError(400, f"the body is not valid UTF-8 ({exc.reason}); send JSON encoded as UTF-8", code="invalid_json") from None
    except RecursionError:  # far deeper than MAX_DEPTH: msgspec's own guard stopped it
        raise _too_deep() from None
    if not isinstance(value, dict):
        raise HttpError(400, f"the body must be a JSON object, not {_json_type(value)}", code="invalid_json")
    # Nesting past MAX_DEPTH needs more than MAX_DEPTH brackets of each kind: small bodies cannot.
    if len(raw) > 2 * MAX_DEPTH and nests_deeper_than(value, MAX_DEPTH):
        raise _too_deep()
    return value


def _why(exc: msgspec.DecodeError, raw: bytes) -> str:
    lone = _lone_surrogate(raw)
    if lone is None:
        return str(exc)
    # msgspec may call it "truncated": say which escape it is, and why it cannot be text.
    return f"{lone[0].decode()} at byte {lone.start()} is a lone UTF-16 surrogate; an escape from \\ud800 to \\udfff must be one half of a pair"


def _lone_surrogate(raw: bytes) -> re.Match[bytes] | None:
    """The first surrogate escape in ``raw`` without its other half (of the first 100); error path only."""
    low_expected_at = -1
    for escape in itertools.islice(_SURROGATE_ESCAPE.finditer(raw), 100):
        start = escape.start()
        before = raw[max(0, start - 16) : start]
        if (len(before) - len(before.rstrip(b"\\"))) % 2:
            continue  # "\\\\u..." is a backslash and the text "u...", not an escape
        if raw[start + 3] in b"cdefCDEF":  # a low half: fine right after a high one
            if start != low_expected_at:
                return escape
        elif _SURROGATE_ESCAPE.match(raw, escape.end()) and raw[escape.end() + 3] in b"cdefCDEF":
            low_expected_at = escape.end()
        else:
            return escape
    return None


def _too_deep() -> HttpError:
    return HttpError(400, f"the JSON body nests deeper than {MAX_DEPTH} levels; no API request needs that many", code="json_too_deep")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), "a JSON value")


def whole_number(text: str) -> int | None:
    """``text`` as a whole number (ASCII digits, so not "²"), or None; past 10**18 it counts as 10**18."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= 18 else 10**18  # int() refuses over 4300 digits; nothing counts that high


def _headers(extra: Mapping[str, str] | None, content_type: bytes) -> list[tuple[bytes, bytes]]:
    out = [(b"content-type", content_type), *SECURITY_HEADERS]
    for key, value in (extra or {}).items():
        out.append((key.lower().encode("latin-1"), value.encode("latin-1")))
    return out


async def send_json(send: Send, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
    body = _json.encode(payload)
    await send({"type": "http.response.start", "status": status, "headers": _headers(headers, b"application/json")})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, error: HttpError, headers: Mapping[str, str] | None = None) -> None:
    await send_json(send, error.status, error.body(), {**(headers or {}), **error.headers})


async def start_sse(send: Send, headers: Mapping[str, str] | None = None) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": _headers({**(headers or {}), "x-accel-buffering": "no"}, b"text/event-stream")})


def sse(data: Any, *, event: str | None = None, id: int | str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already bytes/str."""
    payload = data if isinstance(data, bytes) else (data.encode() if isinstance(data, str) else _json.encode(data))
    head = b""
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    if id is not None:
        head += b"id: " + str(id).encode() + b"\n"
    return head + b"data: " + payload + b"\n\n"
