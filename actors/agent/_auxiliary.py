"""Side model calls a tool makes for itself (``session_search``'s summaries): the summary model.

Compression's summaries go through the turn machine (a ``CallModel`` with the summary model);
a tool's side call is no step of the turn, so the tool makes it itself, through this: one
unstreamed-to-anyone completion (no hub: nothing reaches the user's stream) to
``compression.summary_model`` when config.yaml names one, else to the session's model, on
the runtime's model settings (its base URL and first key; the credential pool's leases are
for the turn's own calls). The caller sets the deadline (:attr:`AuxiliaryModel.timeout`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from protocols import ChatMessage

from ._model import ModelClients, ModelFailure, ModelSettings, call_model

SEARCH_SUMMARY_TIMEOUT = 60.0
"""Seconds ``session_search`` waits for its summaries, all of them together."""


class AuxiliaryFailed(Exception):
    """The side call got no answer: the provider refused it, or it answered nothing."""


@dataclasses.dataclass(frozen=True, slots=True)
class AuxiliaryModel:
    """A model a tool may ask for text (``ask`` raises :class:`AuxiliaryFailed`)."""

    model: str
    ask: Callable[[Sequence[ChatMessage]], Awaitable[str]]
    timeout: float = SEARCH_SUMMARY_TIMEOUT
    """The deadline of the tool's side calls, together."""


def auxiliary_model(
    clients: ModelClients, settings: ModelSettings, session_id: str, *, summary_model: str = "", timeout: float = SEARCH_SUMMARY_TIMEOUT
) -> AuxiliaryModel:
    """The side-call model of a session with model ``settings`` (``summary_model`` when set)."""
    chosen = dataclasses.replace(settings, model=summary_model) if summary_model else settings

    async def ask(messages: Sequence[ChatMessage]) -> str:
        reply = await call_model(clients, chosen, messages, (), hub=None, turn_id="", session_id=session_id)
        if isinstance(reply, ModelFailure):
            raise AuxiliaryFailed(f"{reply.kind}: {reply.detail}")
        if not reply.content.strip():
            raise AuxiliaryFailed("the model answered with no text")
        return reply.content.strip()

    return AuxiliaryModel(model=chosen.model, ask=ask, timeout=timeout)
