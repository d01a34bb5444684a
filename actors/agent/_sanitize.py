"""The transcript sanitizer: what is sent to a model always pairs calls with results.

Invariant: after :func:`sanitize`, every ``tool_call`` of an assistant message is followed,
before the next non-tool message, by exactly one ``tool`` message with its id, in the
model's order; no ``tool`` message lacks its call. Missing results get a synthetic one.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols import ChatMessage

UNKNOWN_OUTCOME = (
    "[outcome unknown] The session stopped while this tool was running, so its result was lost. "
    "It was not run again; check its effects before retrying."
)
CANCELLED = "[cancelled] The user interrupted the turn before this tool finished."


def synthetic_result(call_id: str, name: str, text: str) -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name=name, content=text)


def sanitize(messages: Sequence[ChatMessage], *, missing: str = UNKNOWN_OUTCOME) -> tuple[tuple[ChatMessage, ...], int]:
    """Return the repaired transcript and how many synthetic results were added."""
    out: list[ChatMessage] = []
    added = 0
    i = 0
    n = len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            continue  # an orphan: its call is not right before it
        out.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        # Gather the tool messages that follow this assistant message.
        results: dict[str, ChatMessage] = {}
        while i < n and messages[i].role == "tool":
            result = messages[i]
            i += 1
            if result.tool_call_id is not None and result.tool_call_id not in results:
                results[result.tool_call_id] = result
        for call in message.tool_calls:
            found = results.get(call.id)
            if found is None:
                found = synthetic_result(call.id, call.name, missing)
                added += 1
            out.append(found)
    return tuple(out), added


def unanswered_calls(messages: Sequence[ChatMessage]) -> int:
    """How many tool calls :func:`sanitize` would have to answer."""
    return sanitize(messages)[1]
