"""Tool progress in chat-completion streams, as SSE comments that no client reads as data.

A chat-completion stream is read by clients that parse every ``data:`` frame as a
``chat.completion.chunk`` (the openai SDK, LangChain, Open WebUI); a frame of another shape
breaks them, a named event included (the SDK ignores the event name). So tool progress is
off unless asked for (``X-Hermes-Tool-Progress: true`` on the request, or
``api_server.tool_progress: true`` in config.yaml), and then travels as comment lines::

    : hermes.tool.progress {"tool": "terminal", "call_id": "call_1", "status": "started", "arguments": "{...}"}
    : hermes.tool.progress {"tool": "mcp_x_y", "call_id": "call_2", "status": "progress", "progress": 1, "total": 3, "message": "..."}
    : hermes.tool.progress {"tool": "terminal", "call_id": "call_1", "status": "completed", "ok": true, "preview": "..."}

The JSON is on one line (the encoder escapes line breaks inside strings).
"""

from __future__ import annotations

import msgspec

from protocols import ToolFinished, ToolProgress, ToolStarted

from ._access import current_request
from ._app import ApiContext

HEADER = "x-hermes-tool-progress"
PREFIX = b": hermes.tool.progress "
_ON = frozenset({"true", "1", "yes", "on"})
_OFF = frozenset({"false", "0", "no", "off"})
_encode = msgspec.json.Encoder().encode


def tool_progress_wanted(ctx: ApiContext) -> bool:
    """The request's ``X-Hermes-Tool-Progress`` (true / false) if it sent one, else the server's setting."""
    request = current_request()
    value = request.headers.get(HEADER) if request is not None else None
    if value is not None:
        value = value.strip().lower()
        if value in _ON:
            return True
        if value in _OFF:
            return False
    return ctx.tool_progress


def tool_progress_comment(ctx: ApiContext, event: ToolStarted | ToolProgress | ToolFinished) -> bytes | None:
    """The SSE comment for a tool event, or None when this request does not want progress."""
    if not tool_progress_wanted(ctx):
        return None
    if isinstance(event, ToolStarted):
        payload: dict[str, object] = {"tool": event.name, "call_id": event.call_id, "status": "started", "arguments": event.arguments}
    elif isinstance(event, ToolProgress):
        payload = {
            "tool": event.name,
            "call_id": event.call_id,
            "status": "progress",
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
        }
    else:
        payload = {"tool": event.name, "call_id": event.call_id, "status": "completed", "ok": event.ok, "preview": event.preview}
    return PREFIX + _encode(payload) + b"\n\n"
