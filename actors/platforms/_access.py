"""The access log: one structured line per request on the ``hermes.access`` logger.

The app wraps every request in an :class:`AccessRecord` (request id, method, route
template, status, duration, session id when known, bytes in and out) and logs it when the
response ends, at INFO, as ``key=value`` pairs::

    request_id=req_5c0d... method=POST route=/v1/chat/completions status=200 duration_ms=412.7 session=api-1f... bytes_in=93 bytes_out=1840

The same fields ride on the record as ``record.access`` (a dict) for a structured handler.
The request being served is also kept in a context variable (:func:`current_request`):
trio runs each request in its own task, so code deep in a route (the chat stream's tool
progress) can read the request's headers without every function passing it along.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import re
import time
import uuid
from typing import Any

from ._asgi import Request

access_log = logging.getLogger("hermes.access")

REQUEST_ID_HEADER = "x-request-id"
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PLAIN = re.compile(r"^[^\s\"=\\]+$")
_current: contextvars.ContextVar[Request | None] = contextvars.ContextVar("hermes_request", default=None)


@dataclasses.dataclass
class AccessRecord:
    """What the access log says about one request; filled in as the request goes."""

    request_id: str
    method: str
    started: float
    """``time.monotonic()`` when the request arrived."""
    route: str = "-"
    """The matched route's template (``/v1/sessions/{session_id}``), ``-`` when none matched."""
    status: int | None = None
    """None until the response starts (a client that left before any answer)."""
    session_id: str | None = None
    bytes_out: int = 0
    """Response body bytes sent."""

    def fields(self, bytes_in: int) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "method": self.method,
            "route": self.route,
            "status": self.status,
            "duration_ms": round((time.monotonic() - self.started) * 1000, 1),
            "session": self.session_id,
            "bytes_in": bytes_in,
            "bytes_out": self.bytes_out,
        }


def request_id_for(request: Request) -> str:
    """The client's ``X-Request-Id`` when it is a short token, else a new ``req_...`` id."""
    given = request.headers.get(REQUEST_ID_HEADER)
    if given is not None and _CLIENT_ID.match(given):
        return given
    return f"req_{uuid.uuid4().hex[:24]}"


def log_access(record: AccessRecord, request: Request) -> None:
    if not access_log.isEnabledFor(logging.INFO):
        return
    fields = record.fields(len(request._body or b""))
    line = " ".join(f"{key}={_value(value)}" for key, value in fields.items())
    access_log.info("%s", line, extra={"access": fields})


def _value(value: object) -> str:
    if value is None:
        return "-"
    text = str(value)
    if _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def current_request() -> Request | None:
    """The request the calling task serves (None outside a request)."""
    return _current.get()


def serve_request(request: Request) -> contextvars.Token[Request | None]:
    """Make ``request`` the current one for this task; undo with :func:`served`."""
    return _current.set(request)


def served(token: contextvars.Token[Request | None]) -> None:
    _current.reset(token)
