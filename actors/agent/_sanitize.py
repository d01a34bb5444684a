"""The transcript sanitizer: what is sent to a model always pairs calls with results.

Invariant: after :func:`sanitize`, every ``tool_call`` of an assistant message is followed,
before the next non-tool message, by exactly one ``tool`` message with its id, in the
model's order; no ``tool`` message lacks its call. Missing results get a synthetic one.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols import ChatMessage, ToolCall

UNKNOWN_OUTCOME = (
    "[outcome unknown] The session stopped while this tool was running, so its result was lost. It was not run again; check its effects before retrying."
)


def cancelled_result(reason: str) -> str:
    """The result a call still running gets when its turn is cancelled: ``reason`` is the turn's
    (a user's ``/stop``, a new message, the server shutting down), so the model reads why."""
    return f"[cancelled] The turn was cancelled before this tool finished ({reason or 'no reason given'})."


INTERRUPTED_RESULT = "[not finished] the runtime stopped while this tool ran; its outcome is unknown: check its effects before running it again."
"""The result a call gets when the runtime stopped while it ran (written at the next start)."""


def synthetic_result(call_id: str, name: str, text: str) -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name=name, content=text)


def paired(messages: Sequence[ChatMessage]) -> bool:
    """Whether every call is followed at once by its one result, in the model's order, and no
    tool message stands anywhere else (then :func:`sanitize` would return the same messages,
    adding none: a checker that only asks whether a transcript needs repair asks this)."""
    calls: tuple[ToolCall, ...] = ()
    """The calls of the current assistant message; ``answered`` of them have their result."""
    answered = expected = 0  # expected: len(calls)
    for message in messages:
        if message.role == "tool":
            if answered == expected or message.tool_call_id != calls[answered].id:
                return False
            answered += 1
        elif answered != expected:
            return False
        elif message.tool_calls and message.role == "assistant":
            calls, answered = message.tool_calls, 0
            expected = len(calls)
            if expected > 1 and len({call.id for call in calls}) != expected:
                return False
        elif expected:
            calls, answered, expected = (), 0, 0
    return answered == expected


def sanitize(messages: Sequence[ChatMessage], *, missing: str = UNKNOWN_OUTCOME) -> tuple[tuple[ChatMessage, ...], int]:
    """Return the repaired transcript and how many synthetic results were added.

    A call's result is usually among the tool messages right after its assistant message,
    but it may have been stored later: when a turn's settle write failed and a recovery
    wrote the results after the next turn's user message. So a result is looked for up to
    the next assistant message that calls the same id (providers reuse ids across turns).
    Results nothing claims (orphans, duplicates) are dropped.
    """
    if paired(messages):  # the common case: nothing to repair, one cheap pass
        return tuple(messages), 0
    return repair(messages, missing=missing)


def repair(messages: Sequence[ChatMessage], *, missing: str = UNKNOWN_OUTCOME) -> tuple[tuple[ChatMessage, ...], int]:
    """:func:`sanitize` without its fast path (which must always agree with this)."""
    places: dict[str, list[int]] = {}
    """call id -> indexes of the tool messages that answer it, in order."""
    callers: dict[str, list[int]] = {}
    """call id -> indexes of the assistant messages that call it, in order."""
    for index, message in enumerate(messages):
        if message.role == "tool" and message.tool_call_id is not None:
            places.setdefault(message.tool_call_id, []).append(index)
        elif message.role == "assistant":
            for call in message.tool_calls:
                callers.setdefault(call.id, []).append(index)
    taken: set[int] = set()
    out: list[ChatMessage] = []
    added = 0
    for index, message in enumerate(messages):
        if message.role == "tool":
            continue  # placed with its call below, or unclaimed and dropped
        out.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        for call in message.tool_calls:
            limit = next((i for i in callers[call.id] if i > index), len(messages))
            place = next((i for i in places.get(call.id, ()) if index < i < limit and i not in taken), None)
            if place is None:
                out.append(synthetic_result(call.id, call.name, missing))
                added += 1
            else:
                taken.add(place)
                out.append(messages[place])
    return tuple(out), added
