"""Prompt caching for Anthropic models: which messages of a request carry a cache breakpoint.

Anthropic (natively, or Claude through OpenRouter and other OpenAI-compatible routers) caches a
prompt's prefix up to each block marked ``cache_control: {"type": "ephemeral"}``, at most
four marks a request. The layout here is *system and 3*: the system prompt (the most stable
prefix) and the last three non-system messages (a window that rolls forward each call, so the
previous call's marks are found again by the next one).

Where a mark goes on one message:

- content a string: it becomes one text part carrying the mark;
- content a list of parts: the mark goes on the last part;
- no content (``None`` or ``""``, as an assistant message that only calls tools): on the
  message itself;
- a ``tool`` message: on the message itself when the endpoint is Anthropic's own, which
  takes it there; any other endpoint would refuse the field, so the message gets no mark.

Decision: a ``tool`` message that gets no mark still counts as one of the last three. The
window is the last three positions, as the layout is described for Hermes (whose users'
caches this should behave like), not the last three messages that can carry a mark; so a
request that ends in tool results, off Anthropic's own endpoint, carries fewer than four.

Pure: it reads the wire dicts of one request and returns new ones; the transcript is never
touched, and an input dict is never changed (only the few marked messages are copied).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

CacheTtl = Literal["5m", "1h"]
"""How long Anthropic keeps a cached prefix: 5 minutes (default) or an hour (written at a higher price)."""

MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` marks in one request."""
ROLLING = MAX_BREAKPOINTS - 1
"""How many of the last non-system messages are marked."""


class PromptCaching(msgspec.Struct, frozen=True, kw_only=True):
    """``prompt_caching:`` in config.yaml."""

    enabled: bool | None = None
    """True: always mark; False: never; None (``auto``): mark for Anthropic models only."""
    cache_ttl: CacheTtl = "5m"


AUTO = PromptCaching()


def is_anthropic_model(model: str, provider: str) -> bool:
    """Whether ``model`` is Claude (any spelling: ``claude-sonnet-4``, ``anthropic/claude-...``) or its provider is Anthropic."""
    return "claude" in model.lower() or provider.lower() == "anthropic"


def is_native_anthropic(provider: str, base_url: str) -> bool:
    """Whether the endpoint is Anthropic's own (it takes a mark on a ``tool`` message)."""
    return provider.lower() == "anthropic" or "api.anthropic.com" in base_url.lower()


def marker(ttl: CacheTtl) -> dict[str, str]:
    """The ``cache_control`` value for ``ttl``."""
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def breakpoints(roles: Sequence[str]) -> tuple[int, ...]:
    """The indices of the messages that get a mark: the first if it is a system message, then the
    last :data:`ROLLING` non-system ones (whether a ``tool`` one can carry it is :func:`mark`'s call)."""
    first = (0,) if roles and roles[0] == "system" else ()
    rest = [i for i, role in enumerate(roles) if role != "system"][-ROLLING:]
    return (*first, *rest)


def mark(message: dict[str, Any], cache_control: dict[str, str], *, native: bool) -> dict[str, Any] | None:
    """A copy of ``message`` carrying ``cache_control`` (the rules in the module docstring), or
    None when it cannot carry one (a ``tool`` message off Anthropic's own endpoint)."""
    if message.get("role") == "tool":
        return {**message, "cache_control": cache_control} if native else None
    content = message.get("content")
    if content is None or content == "":
        return {**message, "cache_control": cache_control}
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content, "cache_control": cache_control}]}
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        return {**message, "content": [*content[:-1], {**content[-1], "cache_control": cache_control}]}
    return {**message, "cache_control": cache_control}  # an empty list, or parts of another shape


def with_breakpoints(messages: Sequence[dict[str, Any]], *, native: bool, ttl: CacheTtl = "5m") -> list[dict[str, Any]]:
    """``messages`` with the system-and-3 marks; at most :data:`MAX_BREAKPOINTS` of them."""
    out = list(messages)
    cache_control = marker(ttl)
    for index in breakpoints([str(m.get("role")) for m in messages]):
        marked = mark(out[index], cache_control, native=native)
        if marked is not None:
            out[index] = marked
    return out


def count_breakpoints(messages: Sequence[dict[str, Any]]) -> int:
    """How many ``cache_control`` marks a request's messages carry (on messages and on their parts)."""
    count = 0
    for message in messages:
        count += "cache_control" in message
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for part in content if isinstance(part, dict) and "cache_control" in part)
    return count
