"""The chat-completions wire format, decoded with msgspec (what a streamed chunk may hold)."""

from __future__ import annotations

import dataclasses
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
    reasoning_details: list[msgspec.Raw] | None = None
    """Opaque reasoning blocks (OpenRouter: Anthropic signatures, encrypted reasoning), kept as
    the bytes that arrived; ``_reasoning_details.py`` joins a block streamed in fragments."""


class Choice(msgspec.Struct):
    delta: Delta = msgspec.field(default_factory=Delta)
    finish_reason: str | None = None


class PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None
    """OpenAI, OpenRouter: prompt tokens read from the cache (part of ``prompt_tokens``)."""
    cache_write_tokens: int | None = None
    """OpenRouter: prompt tokens written to the cache (part of ``prompt_tokens``)."""


class Usage(msgspec.Struct):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptDetails | None = None
    cache_read_input_tokens: int | None = None
    """Anthropic's name for tokens read from the cache; Anthropic does not count them in its input tokens."""
    cache_creation_input_tokens: int | None = None
    """Anthropic's name for tokens written to the cache (likewise not counted in its input tokens)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tokens:
    """What one call used: every prompt token (cached ones included), completion, cache reads and writes."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


def tokens_of(usage: Usage) -> Tokens:
    """One call's token counts, whatever the provider's spelling.

    With ``prompt_tokens_details`` (OpenAI, OpenRouter) the cached tokens are part of
    ``prompt_tokens``. With only Anthropic's ``cache_read_input_tokens`` /
    ``cache_creation_input_tokens`` they are not (Anthropic's input count leaves them out), so
    they are added: ``input`` is always the whole prompt.
    """
    prompt = usage.prompt_tokens or 0
    details = usage.prompt_tokens_details
    if details is not None and (details.cached_tokens is not None or details.cache_write_tokens is not None):
        read, write = details.cached_tokens or 0, details.cache_write_tokens or usage.cache_creation_input_tokens or 0
        return Tokens(input=prompt, output=usage.completion_tokens or 0, cache_read=read, cache_write=write)
    read, write = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    return Tokens(input=prompt + read + write, output=usage.completion_tokens or 0, cache_read=read, cache_write=write)


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
