"""Small ASGI helpers: read a bounded body, answer JSON or an OpenAI error envelope, stream SSE.

The API server speaks raw ASGI (no framework): routes are few, bodies are decoded with
msgspec, and streaming needs exact control of when bytes go out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_BODY = 10 * 1024 * 1024
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
_json = msgspec.json.Encoder()


class HttpError(Exception):
    """Answer with an OpenAI-style error envelope."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None, headers: Mapping[str, str] | None = None) -> None:  # noqa: A002
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
    receive: Receive
    method: str
    path: str
    headers: dict[str, str]
    query: str
    _body: bytes | None = None

    @classmethod
    def from_scope(cls, scope: Scope, receive: Receive) -> Request:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        return cls(scope, receive, scope["method"], scope["path"], headers, scope.get("query_string", b"").decode("latin-1"))

    async def body(self, limit: int = MAX_BODY) -> bytes:
        if self._body is None:
            self._body = await self._read(limit)
        return self._body

    async def _read(self, limit: int) -> bytes:
        length = self.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise HttpError(413, f"the request body is over {limit // (1024 * 1024)} MB", code="body_too_large")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "the client went away before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"the request body is over {limit // (1024 * 1024)} MB", code="body_too_large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def json(self) -> dict[str, Any]:
        raw = await self.body()
        try:
            value = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError as exc:
            raise HttpError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
        if not isinstance(value, dict):
            raise HttpError(400, "the body must be a JSON object", code="invalid_json")
        return value


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
    await send(
        {"type": "http.response.start", "status": 200, "headers": _headers({**(headers or {}), "x-accel-buffering": "no"}, b"text/event-stream")}
    )


def sse(data: Any, *, event: str | None = None, id: int | str | None = None) -> bytes:  # noqa: A002
    """One server-sent event; ``data`` is JSON-encoded unless it is already bytes/str."""
    payload = data if isinstance(data, bytes) else (data.encode() if isinstance(data, str) else _json.encode(data))
    head = b""
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    if id is not None:
        head += b"id: " + str(id).encode() + b"\n"
    return head + b"data: " + payload + b"\n\n"
