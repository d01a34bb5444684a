"""Progressive streaming by editing one message, decided purely (the clock is an argument).

While a turn runs, its answer grows delta by delta. The plan holds what the chat should show
(tool progress lines, then the answer so far, plain text) and what it shows now, and says when
to act: the first text is *sent* as a new message at once, later text *edits* that message at
most once every ``interval`` seconds, and nothing happens while a call is in flight. A 429
pushes the next call to ``retry_after``; a refusal that will not get better (the message was
deleted, a 400) stops the stream, and the final reply then goes as a message of its own.

The plan never sends the final reply: the turn's end goes through the adapter's outbox, whose
delivery edits the streamed message (``message_id``) with the formatted first piece.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ._chunks import Measure
from ._media import split_media

CURSOR = " ▌"
"""Shown after the text while the answer is still coming."""
ELLIPSIS = "…"


@dataclasses.dataclass(frozen=True)
class StreamStep:
    """One call to make: ``send`` the first message or ``edit`` the streamed one to ``text``."""

    kind: Literal["send", "edit"]
    text: str


@dataclasses.dataclass(frozen=True)
class StreamPlan:
    interval: float = 1.0
    """Seconds between two calls (Telegram allows about one edit a second in a chat)."""
    limit: int = 4096
    """The platform's message limit, in ``measure`` units."""
    measure: Measure = len
    tool_progress: bool = False
    """Show a line per tool the turn runs (``🔧 terminal: ls``) above the answer."""
    answer: str = ""
    """The answer's text since the last tool call (text before a tool call was the model thinking aloud)."""
    progress: tuple[str, ...] = ()
    shown: str = ""
    """What the message shows (the last call that succeeded)."""
    message_id: str = ""
    """The streamed message ('': not sent yet)."""
    next_at: float = 0.0
    """No call before this time (the interval, or a 429's ``retry_after``)."""
    in_flight: bool = False
    stopped: bool = False
    """The platform refused the stream for good: no more calls."""


def add_text(plan: StreamPlan, delta: str) -> StreamPlan:
    return dataclasses.replace(plan, answer=plan.answer + delta)


def add_tool(plan: StreamPlan, name: str, arguments: str) -> StreamPlan:
    """A tool call started: the answer so far was a preamble; a progress line when configured."""
    lines = plan.progress
    if plan.tool_progress:
        lines = (*lines, tool_line(name, arguments))
    return dataclasses.replace(plan, answer="", progress=lines)


def tool_line(name: str, arguments: str, width: int = 60) -> str:
    """``🔧 terminal: ls -la`` (the first argument's value when the arguments are a JSON object)."""
    import json

    detail = ""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    if isinstance(parsed, dict) and parsed:
        detail = str(next(iter(parsed.values())))
    elif isinstance(parsed, str):
        detail = parsed
    detail = " ".join(detail.split())
    if len(detail) > width:
        detail = detail[: width - 1] + ELLIPSIS
    return f"🔧 {name}: {detail}" if detail else f"🔧 {name}"


def render(plan: StreamPlan) -> str:
    """What the message should show now: progress lines, the answer, a cursor; cut to the limit."""
    answer = split_media(plan.answer)[0].strip()  # a MEDIA: line is an attachment of the final reply, never text
    body = "\n".join((*plan.progress, answer) if answer else plan.progress)
    if not body:
        return ""
    text = body + CURSOR
    if plan.measure(text) <= plan.limit:
        return text
    room = plan.limit - plan.measure(ELLIPSIS)
    lo, hi = 0, len(body)
    while lo < hi:  # the longest prefix that fits: the rest comes in the final reply's next pieces
        mid = (lo + hi + 1) // 2
        if plan.measure(body[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return body[:lo] + ELLIPSIS


def next_step(plan: StreamPlan, now: float) -> tuple[StreamPlan, StreamStep | None]:
    """The call to make at ``now`` (marked in flight), or None: nothing new, or not yet."""
    if plan.stopped or plan.in_flight or now < plan.next_at:
        return plan, None
    text = render(plan)
    if not text or text == plan.shown:
        return plan, None
    step = StreamStep("edit" if plan.message_id else "send", text)
    return dataclasses.replace(plan, in_flight=True), step


def wake_at(plan: StreamPlan) -> float | None:
    """When :func:`next_step` may have something to do without a new event (None: only after one)."""
    if plan.stopped or plan.in_flight:
        return None
    text = render(plan)
    return plan.next_at if text and text != plan.shown else None


def succeeded(plan: StreamPlan, step: StreamStep, now: float, message_id: str = "") -> StreamPlan:
    return dataclasses.replace(plan, in_flight=False, shown=step.text, message_id=message_id or plan.message_id, next_at=now + plan.interval)


def failed(plan: StreamPlan, now: float, *, retry_after: float | None, final: bool) -> StreamPlan:
    """A call failed: wait ``retry_after`` (429) or the interval; ``final``: it will not get better."""
    wait = max(plan.interval, retry_after or 0.0)
    return dataclasses.replace(plan, in_flight=False, next_at=now + wait, stopped=plan.stopped or final)
