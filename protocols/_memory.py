"""Memory providers (``/memory``): what a session and the memory tools ask a provider actor,
and the store commands the ``store`` provider's facts go through.

A provider actor takes :class:`ProviderCall` (one of the provider interface's operations with
its arguments) and answers :class:`ProviderReply` to ``reply_to``; :class:`ProviderNotice` is the
same without an answer (a turn's sync, the end of a session). Facts of the ``store`` provider
are rows of the store (``memory_facts``, schema 9), written only by the store writer
(:class:`SaveFact`, :class:`DeleteFact`).
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message

ProviderOp = Literal["system_prompt", "prefetch", "tool", "pre_compress", "status"]
"""Operations answered with a :class:`ProviderReply`."""
NoticeOp = Literal["turn_start", "sync_turn", "memory_write", "session_end", "delegation"]
"""Operations told without an answer."""


class ProviderCall(Message, frozen=True, kw_only=True):
    """Ask a provider actor for one operation; answered :class:`ProviderReply` (``token`` echoed)."""

    op: ProviderOp
    arguments: dict[str, Any] = {}
    """``prefetch``: ``query``, ``session_id``; ``tool``: ``name``, ``args``, ``session_id``;
    ``pre_compress``: ``session_id``."""
    token: str = ""
    reply_to: Any = None


class ProviderReply(Message, frozen=True, kw_only=True):
    provider: str
    token: str = ""
    ok: bool = True
    text: str = ""
    """The block, the prefetched context, the tool's output or the error, as text."""


class ProviderNotice(Message, frozen=True, kw_only=True):
    """Tell a provider something happened (no answer): ``turn_start`` (``session_id``, ``model``,
    ``platform``, ``tool_count``), ``sync_turn`` (``session_id``, ``user``, ``answer``), ``memory_write``
    (``action``, ``target``, ``content``), ``session_end`` (``session_id``), ``delegation`` (``task``, ``result``)."""

    op: NoticeOp
    arguments: dict[str, Any] = {}


class SaveFact(Message, frozen=True, kw_only=True):
    """Insert a fact (a repeat of an existing one only updates its time). Answered :class:`FactSaved`."""

    content: str
    category: str = "general"
    session_id: str = ""
    saved_at: float
    token: str = ""
    reply_to: Any = None


class FactSaved(Message, frozen=True, kw_only=True):
    fact_id: int
    created: bool
    """False: the same fact was stored already."""
    token: str = ""


class DeleteFact(Message, frozen=True, kw_only=True):
    """Delete one fact by id. Answered :class:`FactDeleted`."""

    fact_id: int
    token: str = ""
    reply_to: Any = None


class FactDeleted(Message, frozen=True, kw_only=True):
    fact_id: int
    found: bool
    token: str = ""


FactStoreCommand = SaveFact | DeleteFact
