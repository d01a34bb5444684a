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

from actors.memory import MemoryOptions, block_of, kept_note, pre_compress_all, prefetch_all, skipped
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


async def with_memory(
    call: Call, messages: Sequence[ChatMessage], memo: TurnMemory, *, registry: Any, options: MemoryOptions, session_id: str, turn_id: str, publish: Any
) -> ModelReply | ModelFailure:
    """One model call of a turn with the turn's recalled memory in its request."""
    index = _user_index(messages)
    if memo.turn_id != turn_id:
        memo.turn_id, memo.block = turn_id, ""
        query = (messages[index].content or "") if index >= 0 else ""
        results = await prefetch_all(registry, options, query, session_id)
        for result in skipped(results):
            publish(MemorySkipped(turn_id=turn_id, provider=result.provider, reason=result.outcome, detail=result.detail))
        memo.block = block_of(results)
    if memo.block and index >= 0:
        messages = with_context(messages, index, memo.block)
    return await call(messages)


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
