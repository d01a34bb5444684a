"""The test model server's prompt cache: what an Anthropic-style cache would have read and written.

A request whose messages carry ``cache_control`` marks (on a message, or on a part of its
content) asks for its prefix up to each mark to be cached. A prefix is the request's model,
its ``tools`` and its messages up to and including the marked one, compared without the marks
and with a content of text parts read as their joined text (so a message marked in one request
and plain in the next is the same message). The cache read is the longest marked prefix of
this request that an earlier request marked too; the cache write is what the longest marked
prefix adds beyond it when no earlier request marked it. Both are counted in the unit the
server reports ``usage.prompt_tokens`` in (``count`` is given the prefix as a request body).

Like Anthropic's own: nothing expires, and a request without marks reads nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgspec

_encode = msgspec.json.Encoder(order="sorted").encode


def _plain(message: Any) -> Any:
    """``message`` without marks, its text parts joined (the form prefixes are compared in)."""
    if not isinstance(message, dict):
        return message
    plain = {k: v for k, v in message.items() if k != "cache_control"}
    content = plain.get("content")
    if isinstance(content, list):
        parts = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p for p in content]
        if all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in parts):
            plain["content"] = "".join(p["text"] for p in parts)
        else:
            plain["content"] = parts
    return plain


def _marked(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    return "cache_control" in message or any(isinstance(p, dict) and "cache_control" in p for p in parts)


class PromptCache:
    """The prefixes marked so far (not thread-safe: the server calls it under its lock)."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def use(self, body: dict[str, Any], count: Callable[[dict[str, Any]], int]) -> tuple[int, int] | None:
        """``(read, written)`` tokens for the request ``body``, remembering its marked prefixes;
        None when it carries no mark."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        marks = [i for i, m in enumerate(messages) if _marked(m)]
        if not marks:
            return None
        digest = hashlib.blake2b(_encode([body.get("model"), body.get("tools")]), digest_size=16)
        keys: dict[int, bytes] = {}
        for index, message in enumerate(messages[: marks[-1] + 1]):
            digest.update(_encode(_plain(message)))
            if index in marks:
                keys[index] = digest.copy().digest()

        def tokens(end: int) -> int:
            return count({**body, "messages": messages[: end + 1]})

        hit = next((i for i in reversed(marks) if keys[i] in self._seen), None)
        read = 0 if hit is None else tokens(hit)
        written = 0 if keys[marks[-1]] in self._seen else tokens(marks[-1]) - read
        self._seen.update(keys.values())
        return read, written
