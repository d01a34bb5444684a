"""What a test scripts the model server to answer, and the record of what it was asked.

A script is a queue of replies. Each reply is a frozen, tagged msgspec Struct, so a script
can also be written as JSON (``hermes chaos`` will load them from files). Every reply
carries the same fault modifiers (:class:`ScriptedReply`): a latency before the response
starts, a stall mid-body, a connection cut mid-body.

The body of a response is sent in *chunks*: each server-sent event of a streaming reply is
one chunk (``data: [DONE]`` included); a non-streaming body, an error body included, is a
single chunk. ``stall_after_chunks=N`` and ``cut_after_chunks=N`` act after N chunks were
sent (0: right after the status line and headers).
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

from protocols import Message

from .._errors import UsageError


class ScriptedReply(Message, frozen=True, kw_only=True):
    """Fault modifiers shared by every scripted reply (the base of :data:`Reply`)."""

    latency: float = 0.0
    """Seconds the server waits before it sends the status line."""
    stall_after_chunks: int | None = None
    """After this many body chunks, stop sending for ``stall_seconds`` (then carry on)."""
    stall_seconds: float = 0.0
    cut_after_chunks: int | None = None
    """After this many body chunks, close the connection without finishing the response:
    no ``[DONE]``, no final chunk of the chunked encoding (when N is at least the number of
    chunks, the body is complete but its chunked encoding is not ended)."""

    def __post_init__(self) -> None:
        for name in ("latency", "stall_seconds"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                msg = f"{type(self).__name__}.{name} must be a finite number of seconds >= 0, not {value!r}"
                raise UsageError(msg)
        for name in ("stall_after_chunks", "cut_after_chunks"):
            count = getattr(self, name)
            if count is not None and count < 0:
                msg = f"{type(self).__name__}.{name} must be >= 0 or None, not {count!r}"
                raise UsageError(msg)


class TextReply(ScriptedReply, frozen=True, kw_only=True):
    """An assistant message with text (``finish_reason`` "stop")."""

    content: str
    reasoning: str | None = None
    """The model's reasoning: sent as ``reasoning_content`` (deltas), or inside ``<think>``
    at the start of the content when ``think`` is true."""
    think: bool = False


class ScriptedCall(Message, frozen=True, kw_only=True):
    """One function call in a :class:`ToolCallsReply`."""

    name: str
    arguments: str
    """Raw text sent as the call's arguments: malformed JSON is simply a malformed string."""
    id: str | None = None
    """The call id; None derives one from the server's seed."""


class ToolCallsReply(ScriptedReply, frozen=True, kw_only=True):
    """An assistant message that calls tools (``finish_reason`` "tool_calls")."""

    calls: tuple[ScriptedCall, ...]
    content: str | None = None
    reasoning: str | None = None
    """As :attr:`TextReply.reasoning`."""
    think: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.calls:
            msg = "ToolCallsReply needs at least one ScriptedCall; script a TextReply for a plain answer"
            raise UsageError(msg)


class HttpError(ScriptedReply, frozen=True, kw_only=True):
    """An HTTP error with an OpenAI-shaped body ``{"error": {"message", "type", "code"}}``."""

    status: int
    message: str
    code: str | None = None
    error_type: str | None = None
    """The body's ``error.type``; None picks the usual one for the status."""
    retry_after: float | None = None
    """Seconds sent in a ``Retry-After`` header (429 and 503 use it)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 400 <= self.status <= 599:
            msg = f"HttpError.status must be a 4xx or 5xx status, not {self.status}"
            raise UsageError(msg)

    @classmethod
    def context_length_exceeded(cls, *, limit: int = 8192) -> HttpError:
        """The 400 a provider answers when the messages do not fit the model's context."""
        return cls(
            status=400,
            code="context_length_exceeded",
            message=(
                f"This model's maximum context length is {limit} tokens. However, your messages "
                "resulted in more tokens than that. Please reduce the length of the messages."
            ),
        )


Reply: TypeAlias = TextReply | ToolCallsReply | HttpError
"""Anything a script may hold."""


class RecordedRequest(Message, frozen=True, kw_only=True):
    """One request the server received, in arrival order, for assertions."""

    session: str | None
    """The ``X-Hermes-Session-Id`` header, None when absent."""
    method: str
    path: str
    """The path without the query string, e.g. ``/v1/chat/completions``."""
    body: Any
    """The parsed JSON body; None when there was no body or it was not JSON."""
    connection: int
    """Which TCP connection carried it (counts from 1): equal numbers mean keep-alive reuse."""
