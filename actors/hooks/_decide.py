"""The dispatcher's decisions, pure: what the hooks' answers mean for the call that fired them.

Answers come in dispatch order: plugins alphabetically by name (each plugin's callbacks in the
order it registered them), then shell hooks in config order. A ``pre_tool_call`` is blocked by
the first answer that blocks; ``pre_llm_call`` contexts are joined with a blank line;
a ``transform_*`` takes the first non-empty string.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any, Literal

MAX_ANSWER_CHARS = 100_000
"""An answer longer than this (a context, a transformed result) is a flood: skipped."""


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One hook's return value, and who gave it."""

    source: str
    value: Any


def block_message(value: Any) -> str | None:
    """The reason a hook's answer blocks a tool call: ``{"action": "block", "message": m}``
    (Hermes's form) or ``{"decision": "block", "reason": r}`` (Claude Code's), never empty."""
    if not isinstance(value, dict):
        return None
    if value.get("action") == "block":
        message = value.get("message")
    elif value.get("decision") == "block":
        message = value.get("reason")
    else:
        return None
    return message if isinstance(message, str) and message.strip() else None


def first_block(answers: Iterable[Answer]) -> Answer | None:
    """The first answer that blocks (its ``value`` the message), or None."""
    for answer in answers:
        message = block_message(answer.value)
        if message is not None:
            return Answer(answer.source, message)
    return None


def context_of(value: Any) -> str:
    """What an answer adds to the user message: ``{"context": text}`` or a non-empty string."""
    if isinstance(value, dict):
        value = value.get("context")
    return value if isinstance(value, str) and value.strip() else ""


def joined_context(answers: Iterable[Answer]) -> str:
    return "\n\n".join(text for text in (context_of(a.value) for a in answers) if text)


def first_text(answers: Iterable[Answer]) -> str | None:
    """A transform's result: the first non-empty string answer (None keeps the original)."""
    for answer in answers:
        if isinstance(answer.value, str) and answer.value:
            return answer.value
    return None


def oversized(value: Any) -> bool:
    """Whether an answer floods (a string, or a dict's string, past ``MAX_ANSWER_CHARS``)."""
    if isinstance(value, str):
        return len(value) > MAX_ANSWER_CHARS
    if isinstance(value, dict):
        return any(isinstance(v, str) and len(v) > MAX_ANSWER_CHARS for v in value.values())
    return False


def shell_answer(stdout: bytes) -> tuple[Any, str | None]:
    """A shell hook's stdout as an answer: (value, problem). Empty output is a silent no-op."""
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return None, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"its output is not JSON ({exc.msg} at character {exc.pos}): {text[:120]!r}"
    if not isinstance(value, dict):
        return None, f"its output is JSON but not an object: {text[:120]!r}"
    return value, None


def tool_matches(matcher: re.Pattern[str] | None, tool_name: str | None) -> bool:
    """A shell hook's matcher against a tool's name: no matcher matches everything."""
    return matcher is None or (tool_name is not None and matcher.fullmatch(tool_name) is not None)


def clamp_timeout(value: float | None, default: float = 60.0, cap: float = 300.0) -> tuple[float, str | None]:
    """A shell hook's timeout: default 60 s, at most 300 s (with a warning), above zero."""
    if value is None:
        return default, None
    if value <= 0:
        return default, f"timeout {value:g} is not above zero: {default:g} s used"
    if value > cap:
        return cap, f"timeout {value:g} s is above the cap: {cap:g} s used"
    return float(value), None


SkipReason = Literal["timeout", "raised", "flood"]


def skip_reason(answer: tuple[tuple[Any, ...], str | None] | None) -> SkipReason | None:
    """Why a plugin's answer to a call is skipped (None: it is used): no answer by the
    deadline, a callback raised, or an answer past the size limit."""
    if answer is None:
        return "timeout"
    values, error = answer
    if error is not None:
        return "raised"
    for value in values:  # a loop, not any(): this runs for every plugin on every tool call
        if value is not None and oversized(value):
            return "flood"
    return None


def hook_cost(answered_after: float, deadline: float) -> float:
    """What one call of the plugins costs the caller: the last answer's time, at most the deadline."""
    return min(answered_after, deadline)


DispatchVerdict = tuple[Literal["allow", "skip", "rewrite"], str]


def dispatch_verdict(answers: Iterable[Answer]) -> DispatchVerdict:
    """``pre_gateway_dispatch``: the first answer that is an action dict decides (``{"action":
    "skip", "reason"}``, ``{"action": "rewrite", "text"}``, ``{"action": "allow"}``); anything
    else, a rewrite without text included, is ignored. ``("allow", "")`` when nothing decides."""
    for answer in answers:
        value = answer.value
        if not isinstance(value, dict):
            continue
        action = value.get("action")
        if action == "skip":
            return "skip", str(value.get("reason") or "")
        if action == "rewrite" and isinstance(value.get("text"), str):
            return "rewrite", value["text"]
        if action == "allow":
            return "allow", ""
    return "allow", ""
