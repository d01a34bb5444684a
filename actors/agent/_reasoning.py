"""Keep a model's reasoning apart from its answer.

Reasoning arrives either in a separate ``reasoning_content`` field or inline as
``<think>...</think>`` blocks in the content (several, or one left unclosed when the
reply was cut). Both end up in ``reasoning``; the answer is what is left.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def split_reasoning(content: str | None, reasoning_content: str | None = None) -> tuple[str, str | None]:
    """Return ``(answer, reasoning)``; reasoning is None when there was none."""
    text = content or ""
    parts = [reasoning_content.strip()] if reasoning_content and reasoning_content.strip() else []
    if "<think>" in text:
        parts.extend(block.strip() for block in _THINK.findall(text) if block.strip())
        text = _THINK.sub("", text)
    return text.strip(), ("\n\n".join(parts) if parts else None)
