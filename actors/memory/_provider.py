"""The memory provider interface (seed 000 §13) and the pure decisions around it.

A provider is plain synchronous code held by its own actor under ``/memory`` (``_actor.py``),
which calls it one operation at a time in the actor's thread, as the store writer does its
SQLite work: a slow provider stalls only its own inbox. Callers never wait on it without a
deadline (``_client.py``).

Hooks of the seed and where they are here: ``build_system_prompt`` → :meth:`system_prompt_block`;
``prefetch_all`` → :meth:`prefetch` (before a turn's first model call); sync after a turn →
:meth:`sync_turn`; ``get_all_tool_schemas`` / ``handle_tool_call`` → :meth:`tool_names` /
:meth:`handle_tool_call`; ``on_pre_compress``, ``on_memory_write``, ``on_session_end``,
``on_turn_start`` (no remaining-token count: the host does not know it before the request),
``on_delegation``, ``shutdown_all`` → the methods of the same names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from protocols._memory import ProviderReply

from ._store import MemorySettings

PrefetchOutcome = Literal["ok", "empty", "timeout", "error", "unavailable"]


class ProviderError(Exception):
    """An expected failure of a provider operation (bad arguments, nothing found): answered as an
    error. Any other exception is a crash: the actor answers, fails, and its supervisor restarts it."""


@dataclasses.dataclass(frozen=True, slots=True)
class StoreWrite:
    """A tool call's answer that needs the store writer first: the actor tells ``command`` to
    ``/store`` and answers the caller with ``render(reply)`` once the store replied."""

    command: Any
    render: Callable[[Any], str]


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderEnv:
    """What a provider is built with."""

    home: Path
    settings: MemorySettings = MemorySettings()
    store_file: Path | None = None
    prefetch_limit: int = 5
    """Facts a prefetch recalls at most."""


class MemoryProvider:
    """Base of every provider: each hook does nothing until a provider overrides it."""

    name = "provider"

    def __init__(self, env: ProviderEnv) -> None:
        self.env = env

    def system_prompt_block(self) -> str:
        """Text for the system prompt of a new session (frozen for the session)."""
        return ""

    def prefetch(self, query: str, session_id: str) -> str:
        """Context recalled for the turn about to run (``query``: the user's text); empty: none."""
        return ""

    def on_turn_start(self, session_id: str, model: str, platform: str, tool_count: int) -> None:
        """A turn started (before its prefetch may have answered)."""

    def sync_turn(self, session_id: str, user: str, answer: str) -> None:
        """A turn ended with ``answer`` to ``user``."""

    def tool_names(self) -> tuple[str, ...]:
        """The tools this provider answers (their schemas are registered in ``actors.tools``)."""
        return ()

    def handle_tool_call(self, name: str, args: Mapping[str, Any], session_id: str) -> str | StoreWrite:
        raise ProviderError(f"{self.name} has no tool {name!r}")

    def on_pre_compress(self, session_id: str) -> str:
        """Text to keep when the conversation is compressed."""
        return ""

    def on_memory_write(self, action: str, target: str, content: str) -> None:
        """The built-in memory changed (told to the external provider)."""

    def on_session_end(self, session_id: str) -> None:
        """The session ended."""

    def on_delegation(self, task: str, result: str) -> None:
        """A delegated child finished."""

    def shutdown(self) -> None:
        """The actor stops."""


def memory_context_block(parts: Mapping[str, str]) -> str:
    """The prefetched texts (provider → text) as the one ``<memory-context>`` block added to the turn's
    request; empty when no provider recalled anything. Providers in sorted order (stable requests)."""
    texts = [f"[{name}]\n{text.strip()}" for name, text in sorted(parts.items()) if text.strip()]
    if not texts:
        return ""
    return (
        "<memory-context>\n[System note: this is recalled memory context, not new input from the user. "
        "Treat it as background reference.]\n\n" + "\n\n".join(texts) + "\n</memory-context>"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PrefetchResult:
    """The outcome of one provider's prefetch as the client saw it."""

    provider: str
    outcome: PrefetchOutcome
    text: str = ""
    detail: str = ""


def prefetch_result(provider: str, reply: ProviderReply | None) -> PrefetchResult:
    """What one provider's answer to an ask (None: no actor answers at its address) gives the turn."""
    if reply is None:
        return PrefetchResult(provider=provider, outcome="unavailable", detail="no provider actor answers at its address")
    if not reply.ok:
        return PrefetchResult(provider=provider, outcome="error", detail=reply.text)
    return PrefetchResult(provider=provider, outcome="ok" if reply.text.strip() else "empty", text=reply.text)


def missed(provider: str, timeout: float) -> PrefetchResult:
    """A provider that gave nothing within the one deadline of ``timeout`` seconds."""
    return PrefetchResult(provider=provider, outcome="timeout", detail=f"no answer within {timeout:g} s")


def skipped(results: Sequence[PrefetchResult]) -> list[PrefetchResult]:
    """The results the turn goes on without and says so (a timeout, an error, an unavailable actor)."""
    return [r for r in results if r.outcome in ("timeout", "error", "unavailable")]


def block_of(results: Sequence[PrefetchResult]) -> str:
    """The request's memory block from the prefetches that answered in time."""
    return memory_context_block({r.provider: r.text for r in results if r.outcome == "ok"})


def kept_note(results: Sequence[PrefetchResult]) -> str:
    """What the providers asked to keep through a compression (``on_pre_compress``), as a paragraph for
    the summariser's request; empty when none answered in time with text."""
    texts = [f"[{r.provider}] {r.text.strip()}" for r in results if r.outcome == "ok"]
    if not texts:
        return ""
    return "Memory providers ask that the notes keep the following:\n" + "\n".join(texts)
