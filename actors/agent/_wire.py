"""The chat-completions wire format, decoded with msgspec (what a streamed chunk may hold)."""

from __future__ import annotations

from typing import Any

import msgspec

from ._retry import read_error_body


class FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolDelta(msgspec.Struct):
    index: int = 0
    id: str | None = None
    function: FunctionDelta | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolDelta] | None = None


class Choice(msgspec.Struct):
    delta: Delta = msgspec.field(default_factory=Delta)
    finish_reason: str | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


class Chunk(msgspec.Struct):
    """One ``chat.completion.chunk`` (unknown fields are ignored)."""

    choices: list[Choice] = msgspec.field(default_factory=list)
    usage: Usage | None = None
    error: Any = None
    """Some providers send an error object inside the stream."""


chunk_decoder = msgspec.json.Decoder(Chunk)
request_encoder = msgspec.json.Encoder()


def error_details(raw: bytes) -> tuple[str, str | None]:
    """``(detail, code)`` of a provider's error body (any shape :func:`_retry.read_error_body` reads)."""
    body = read_error_body(raw)
    return body.detail, body.code
