"""A reply's ``reasoning_details``: opaque reasoning blocks a provider needs back on later requests.

OpenRouter returns a model's reasoning as a list of objects (``reasoning.text`` with an
Anthropic ``signature``, ``reasoning.summary``, ``reasoning.encrypted``); Claude and Gemini
through it check those blocks when they come back, so the next request must carry them
unchanged on the assistant message. A stream sends them in ``delta.reasoning_details``
fragments: one thinking block arrives as several ``reasoning.text`` fragments with the same
``index`` (pieces of ``text``, then a text-less one with the ``signature``). Sent back as
fragments, such a block fails the signature check, so consecutive fragments of one block are
joined: their ``text`` (``summary`` for a summary) concatenated in order, every other field
taken from the first fragment that has it (the signature from the last). A fragment that is a
block on its own (an encrypted block, or any one-fragment block) keeps the bytes it arrived in.

The result is stored with the message as JSON text and sent back as those exact bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

_JOINED = {"reasoning.text": "text", "reasoning.summary": "summary"}
"""Block types streamed in pieces, and the field whose pieces are concatenated."""
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def _block_key(fragment: object) -> tuple[str, object] | None:
    if not isinstance(fragment, dict):
        return None
    kind = fragment.get("type")
    return (kind, fragment.get("index")) if isinstance(kind, str) and kind in _JOINED else None


def _join(fragments: Sequence[dict[str, Any]]) -> dict[str, Any]:
    field = _JOINED[fragments[0]["type"]]
    joined: dict[str, Any] = {}
    for fragment in fragments:
        for name, value in fragment.items():
            if name == field:
                joined[name] = (joined.get(name) or "") + (value if isinstance(value, str) else "")
            elif (name == "signature" and value) or joined.get(name) is None:  # the signature comes last
                joined[name] = value
    return joined


def assemble(fragments: Sequence[msgspec.Raw]) -> str | None:
    """The ``reasoning_details`` list of a streamed reply, as JSON text (None when there was none).

    Raises:
        msgspec.DecodeError: a fragment is not JSON (a malformed stream).
    """
    if not fragments:
        return None
    blocks: list[bytes] = []
    group: list[dict[str, Any]] = []
    group_raw: list[bytes] = []
    key: tuple[str, object] | None = None

    def close() -> None:
        if len(group) == 1:
            blocks.append(group_raw[0])  # a block on its own: its own bytes
        elif group:
            blocks.append(_encode(_join(group)))
        group.clear()
        group_raw.clear()

    for raw in fragments:
        data = bytes(raw)
        fragment = _decode(data)
        this = _block_key(fragment)
        if this is None or this != key:
            close()
        key = this
        if this is None:
            blocks.append(data)
            continue
        group.append(fragment)
        group_raw.append(data)
    close()
    return (b"[" + b",".join(blocks) + b"]").decode()


def whole(details: object) -> str | None:
    """The ``reasoning_details`` of a whole (not streamed) reply's message, as JSON text."""
    if not isinstance(details, list) or not details:
        return None
    return _encode(details).decode()
