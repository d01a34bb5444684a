"""A model call's ``messages`` on the wire: the transcript's OpenAI shape, plus what providers
need back from earlier replies, plus prompt-cache marks.

- An assistant message's ``reasoning`` goes back as ``reasoning_content`` (OpenRouter,
  Moonshot and DeepSeek keep multi-turn reasoning with it; other endpoints ignore the field)
  and its ``reasoning_details`` as the exact bytes the provider sent (``_reasoning_details``).
- For an Anthropic model (or with ``prompt_caching.enabled: true``) the system prompt and the
  last three messages carry ``cache_control`` (``_caching``).

The transcript's frozen messages are never changed: every call builds fresh dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from protocols import ChatMessage

from ._caching import is_native_anthropic, with_breakpoints

if TYPE_CHECKING:
    from ._model import ModelSettings


def wire_message(message: ChatMessage) -> dict[str, Any]:
    """One message as a request carries it."""
    out = message.to_openai()
    if message.role == "assistant":
        if message.reasoning:
            out["reasoning_content"] = message.reasoning
        if message.reasoning_details:
            out["reasoning_details"] = msgspec.Raw(message.reasoning_details.encode())
    return out


def wire_messages(messages: Sequence[ChatMessage], settings: ModelSettings) -> list[dict[str, Any]]:
    """The request's ``messages`` for a call with ``settings`` (cache marks when it caches prompts)."""
    # Most messages carry no reasoning: they take the plain path, inline (this runs for every message of every call).
    out = [wire_message(m) if m.reasoning or m.reasoning_details else m.to_openai() for m in messages]
    if settings.caches_prompts:
        return with_breakpoints(out, native=is_native_anthropic(settings.provider, settings.base_url), ttl=settings.caching.cache_ttl)
    return out
