"""A session's state as the turn machine keeps it: the transcript, the queue, and the running
turn, which is always in exactly one phase, each phase holding only what it needs.

Frozen msgspec structs: ``_machine.step`` makes a new state for every input.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocols import ChatMessage, Token, ToolCall
from protocols._session import TurnOptions
from protocols._store import TokenUsage

from ._compress import CompressionGuard, CompressionPlan
from ._tokens import TokenRatio
from ._turn_io import UserInput

#
# A turn is always in exactly one phase, and each phase holds only what it needs: a turn that
# waits for a commit has the write's token, a model call its attempt, a tool batch its groups.
# What lives across phases (the latest calls and which have results, the usage, the options)
# is on the Turn itself.


class PersistingUser(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="persist_user"):
    """The opening (a user message, or a client's tool results) is being committed."""

    token: Token


class Calling(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="model"):
    """A model call runs."""

    token: Token
    attempt: int = 0
    extra: tuple[ChatMessage, ...] = ()
    """Shown to this call after the transcript, never stored: a rejected answer and why, or a
    cut-off answer and the request to continue it."""
    problem: str = ""
    """What failed the previous attempt when it benched a key (said again if no key is left)."""


class BackingOff(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="backoff"):
    """A model call failed and is retried when the timer ``token`` fires."""

    token: Token
    attempt: int
    extra: tuple[ChatMessage, ...] = ()


class PersistingCalls(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="persist_calls"):
    """The assistant message with tool calls is being committed (write-ahead: no tool runs before)."""

    token: Token


class RunningTools(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="tools"):
    """A group of tool calls runs; the other groups wait their turn."""

    groups: tuple[tuple[str, ...], ...]
    """Planned groups not started yet."""
    running: tuple[str, ...] = ()
    arguments: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Each planned call's arguments, parsed once."""


class PersistingAnswer(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="persist_answer"):
    """The final answer (or the end of a turn that pauses for the client's tools) is being committed."""

    token: Token
    answer: str
    paused: tuple[ToolCall, ...] = ()
    """The client's calls the turn ends with (``pause_for_client``)."""


class Compressing(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="compress"):
    """The model summarises the middle of the conversation (``plan``) before the next call."""

    token: Token
    plan: CompressionPlan
    model: str = ""
    """The model asked for the summary (empty: the session's own)."""


class PersistingSegment(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag="persist_segment"):
    """The compressed conversation is being committed as the session's next segment."""

    token: Token
    tokens_before: int
    tokens_after: int
    summarised: int


Phase = PersistingUser | Calling | BackingOff | PersistingCalls | RunningTools | PersistingAnswer | Compressing | PersistingSegment
Committing = PersistingUser | PersistingCalls | PersistingAnswer | PersistingSegment
"""The phases that wait for the commit of their ``token``."""


class Turn(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    turn_id: str
    phase: Phase
    deadline: float
    iteration: int = 0
    grace: bool = False
    calls: tuple[ToolCall, ...] = ()
    """The tool calls of the latest assistant message."""
    answered: tuple[str, ...] = ()
    """Ids of those calls that already have a result in the transcript."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    unsaved: TokenUsage = TokenUsage()
    """Tokens of replies whose usage no write carried yet (asked again, continued, or the
    reply being written): the next write of the turn adds them to the session's totals."""
    reasoning: str | None = None
    instructions: str | None = None
    """This turn's ephemeral system prompt."""
    options: TurnOptions | None = None
    """What the client asked of this turn's model calls; its client tools pause the turn."""
    opened: int = 1
    """Messages the turn's opening appended (a user message, or a client's tool results)."""
    format_retried: bool = False
    """The turn already asked again once for a well-formed answer."""
    provider: int = 0
    """Where in the fallback chain (``MachineConfig.providers``) the turn's model calls go; every turn starts on the primary."""
    partial: str = ""
    """The answer so far when replies were cut by the token limit (``finish_reason: length``)."""
    continuations: int = 0
    empty_retried: bool = False
    """The turn already asked again once after an empty reply."""
    compressions: int = 0
    """Compression passes this turn made (at most ``CompressionSettings.max_passes``)."""
    focus: str | None = None
    """Set on a ``/compress`` turn (the topic; empty for none): one forced pass, no model answer."""


class SessionState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    session_id: str
    system_prompt: str
    transcript: tuple[ChatMessage, ...] = ()
    turn: Turn | None = None
    queued: tuple[UserInput, ...] = ()
    recent_turns: tuple[str, ...] = ()
    """Ids of the latest turns (bounded): a retried StartTurn with a known id is ignored."""
    guard: CompressionGuard = CompressionGuard()
    """Compression's anti-thrash and failure cooldowns."""
    ratio: TokenRatio = TokenRatio()
    """Characters per token, learned from the replies' reported prompt tokens."""
