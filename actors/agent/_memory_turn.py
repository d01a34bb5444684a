"""A turn's recalled memory: the providers' prefetch before the turn's first model call, added to
the request only.

The block (``<memory-context>``, seed 000 §13.3) is added after the text of the turn's user
message in what is sent, like ``pre_llm_call`` context: the transcript and the store never see
it, and every model call of the turn carries the same block (fetched once per turn). A provider
that misses the deadline (``memory.prefetch_timeout``), fails or is restarting is left out and
a :class:`MemorySkipped` event says so; the turn is never held past the deadline.

Before a compression's summary call, the providers' ``on_pre_compress`` texts (same deadline)
are added to the summariser's request, so what they ask to keep reaches the notes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from actors.memory import MemoryOptions, PrefetchResult, block_of, kept_note, pre_compress_all, prefetch_all, skipped
from protocols import ChatMessage
from protocols._session import MemorySkipped

from ._hooked import _user_index, with_context
from ._model import ModelFailure, ModelReply

Call = Callable[[Sequence[ChatMessage]], Awaitable[ModelReply | ModelFailure]]


@dataclasses.dataclass
class TurnMemory:
    """A session's recalled block for its current turn (touched in the reactor only)."""

    turn_id: str = ""
    block: str = ""


def first_call_of_turn(memo: TurnMemory, turn_id: str) -> bool:
    """Whether this model call is ``turn_id``'s first, the one that prefetches (the memo is reset for
    the turn then; later calls, retries included, reuse its block)."""
    if memo.turn_id == turn_id:
        return False
    memo.turn_id, memo.block = turn_id, ""
    return True


def turn_query(messages: Sequence[ChatMessage]) -> str:
    """What the providers are asked to recall for: the text of the turn's user message."""
    index = _user_index(messages)
    return (messages[index].content or "") if index >= 0 else ""


def recalled(results: Sequence[PrefetchResult], turn_id: str) -> tuple[str, list[MemorySkipped]]:
    """The turn's block from the prefetches, and one :class:`MemorySkipped` per provider left out."""
    events = [MemorySkipped(turn_id=turn_id, provider=r.provider, reason=r.outcome, detail=r.detail) for r in skipped(results)]
    return block_of(results), events


def with_block(messages: Sequence[ChatMessage], block: str) -> Sequence[ChatMessage]:
    """The request with the block after its user message's text (the messages themselves untouched)."""
    index = _user_index(messages)
    return with_context(messages, index, block) if block and index >= 0 else messages


async def with_memory(
    call: Call, messages: Sequence[ChatMessage], memo: TurnMemory, *, registry: Any, options: MemoryOptions, session_id: str, turn_id: str, publish: Any
) -> ModelReply | ModelFailure:
    """One model call of a turn with the turn's recalled memory in its request."""
    if first_call_of_turn(memo, turn_id):
        results = await prefetch_all(registry, options, turn_query(messages), session_id)
        block, events = recalled(results, turn_id)
        for event in events:
            publish(event)
        memo.block = block
    return await call(with_block(messages, memo.block))


async def with_pre_compress(
    call: Call, messages: Sequence[ChatMessage], *, registry: Any, options: MemoryOptions, session_id: str, turn_id: str, publish: Any
) -> ModelReply | ModelFailure:
    """The summariser's call with what the providers ask to keep (``on_pre_compress``) after its request."""
    results = await pre_compress_all(registry, options, session_id)
    for result in skipped(results):
        publish(MemorySkipped(turn_id=turn_id, provider=result.provider, reason=result.outcome, detail=f"on_pre_compress: {result.detail}"))
    note = kept_note(results)
    index = _user_index(messages)
    if note and index >= 0:
        messages = with_context(messages, index, note)
    return await call(messages)
