"""Messages of the session store: commands to the one writer, its replies, and stored records.

Commands (``CreateSession``, ``AppendMessages``, ``EndSession``, ``UpdateSessionTotals``,
``GetStoreStatistics``) go to the store writer actor. Each carries a caller ``token``
(echoed in the reply, so a caller can match answers to requests) and an optional
``reply_to``. The writer answers after the write is **committed**: a reply means the data is
on disk (rule 5: a user message is durable before it is acknowledged). A write that fails
is answered with :class:`StoreFailed` instead.

``reply_to`` is a **local-only** field: an in-process address, i.e. anything with a
``.tell(message)`` method (an ``actors.Address``, a pykka ref, a test probe). It is typed
``Any`` and is not encodable: set it to ``None`` before encoding a command with
``to_json`` / ``to_msgpack`` (msgspec raises ``TypeError`` on an address). Decoded commands
have ``reply_to=None``.

Records (``SessionRecord``, ``TurnRecord``, ``StoredMessage``, ``SearchHit``) are what store readers return;
``Interrupted`` is what settling a store at start did to one session.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message
from ._correlation import Token
from ._leases import Fence, LeaseCommand, LeaseGranted, LeaseRefused, LeaseReleased, NodeSeen
from ._transcript import ChatMessage


class CreateSession(Message, frozen=True, kw_only=True):
    """Create one session row. Answered with :class:`SessionCreated` or :class:`StoreFailed`."""

    session_id: str
    source: str
    """Where the conversation comes from: ``cli``, ``api``, ``telegram``, ..."""
    user_id: str | None = None
    model: str | None = None
    model_config: dict[str, Any] | None = None
    """Stored as JSON text in ``sessions.model_config`` (Hermes's format)."""
    system_prompt: str | None = None
    parent_session_id: str | None = None
    """The session this one continues (compression split) or was delegated from; must exist."""
    title: str | None = None
    """Unique among sessions when set (as in Hermes); a clash answers ``StoreFailed``, unless
    ``number_taken_title``."""
    number_taken_title: bool = False
    """On a clash, take the first free ``"<title> (2)"``, ``"<title> (3)"``... instead of failing:
    a session must not fail to start because its automatic title is taken."""
    started_at: float | None = None
    """Unix time; None means the time of the write."""
    fence: Fence | None = None
    """The writer's lease on the session (cluster mode): refused with ``StoreFailed(fenced=...)``,
    nothing written, unless it is the session's current live lease. None: no check (one process)."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


TurnEvent = Literal["started", "completed", "failed", "cancelled"]


class TurnMark(Message, frozen=True, kw_only=True):
    """A turn's start or end, written in the same transaction as the messages that make it.

    ``started`` opens the turn's row (status ``running``); a turn id is started at most once
    per session: a second ``started`` for a known id is refused. An end closes the row
    (status = the event, with ``reason``); a turn is closed at most once (a later end is
    ignored).
    """

    turn_id: str
    event: TurnEvent
    reason: str = ""
    """Why a turn failed or was cancelled (``interrupted``, ``deadline``, ``store``, ...)."""


class SegmentStart(Message, frozen=True, kw_only=True):
    """The messages of this write begin a new segment of the session: what a compression left
    (the head, the summary, the tail). Loads read the newest segment only; the older ones stay
    (search still finds them) and each segment names the one it continues."""

    reason: str = "compression"
    summary: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    summarised: int = 0
    """How many messages of the old segment the summary stands for."""


class TokenUsage(Message, frozen=True, kw_only=True):
    """Tokens of model calls, added to a session's running totals (``sessions.input_tokens`` ...)."""

    input_tokens: int = 0
    """Every prompt token, cached ones included."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def __bool__(self) -> bool:
        return bool(self.input_tokens or self.output_tokens or self.cache_read_tokens or self.cache_write_tokens)


class AppendMessages(Message, frozen=True, kw_only=True):
    """Append transcript messages to a session, in order, in one atomic write.

    Answered with :class:`MessagesPersisted` (the new row ids, in order) or
    :class:`StoreFailed` (then none of the messages was stored).
    """

    session_id: str
    messages: tuple[ChatMessage, ...]
    timestamp: float | None = None
    """One Unix time for every message; None means the time of the write."""
    timestamps: tuple[float, ...] = ()
    """Per-message Unix times (same length as ``messages``); overrides ``timestamp``."""
    token_counts: tuple[int | None, ...] = ()
    """Optional per-message token counts (same length as ``messages``), for ``token_count``."""
    turn: TurnMark | None = None
    """The turn this write starts or ends, recorded in the ``turns`` table in the same
    transaction (``messages`` may then be empty)."""
    segment: SegmentStart | None = None
    """The messages start a new segment (``messages`` must not be empty): all or nothing, in
    the same transaction, so a load finds the old segment or the new one, never half of each."""
    usage: TokenUsage | None = None
    """Tokens the model calls behind these messages used: added to the session's totals in the
    same transaction (so a reply's usage is counted once, with the reply)."""
    fence: Fence | None = None
    """The writer's lease on the session (cluster mode): refused with ``StoreFailed(fenced=...)``,
    nothing written, unless it is the session's current live lease. None: no check (one process)."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class EndSession(Message, frozen=True, kw_only=True):
    """Mark a session ended. Answered with :class:`SessionEnded` or :class:`StoreFailed`."""

    session_id: str
    end_reason: str
    """Why it ended: ``completed``, ``user_exit``, ``compression``, ``error``, ..."""
    ended_at: float | None = None
    """Unix time; None means the time of the write."""
    fence: Fence | None = None
    """The writer's lease on the session (cluster mode): refused with ``StoreFailed(fenced=...)``,
    nothing written, unless it is the session's current live lease. None: no check (one process)."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class UpdateSessionTotals(Message, frozen=True, kw_only=True):
    """Add token usage to a session's running totals (deltas, not absolute values).

    Answered with :class:`SessionTotalsUpdated` or :class:`StoreFailed`.
    """

    session_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    title: str | None = None
    """Set the session's title too (None leaves it unchanged)."""
    model: str | None = None
    """Set the session's model (None leaves it unchanged)."""
    title_if_untitled: bool = False
    """Set ``title`` only if the session has none, numbered if another session has it
    (``"Planning (2)"``), never failing over it."""
    fence: Fence | None = None
    """The writer's lease on the session (cluster mode): refused with ``StoreFailed(fenced=...)``,
    nothing written, unless it is the session's current live lease. None: no check (one process)."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class DeleteSession(Message, frozen=True, kw_only=True):
    """Delete a session and its messages (its search index follows). Answered with
    :class:`SessionDeleted` or :class:`StoreFailed`. Sessions that continued it keep their
    rows, with no parent."""

    session_id: str
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class ReopenWrites(Message, frozen=True, kw_only=True):
    """Lift the fence on a session's transcript writes (no reply).

    The writer fences a session when one of its transcript writes (``CreateSession``,
    ``AppendMessages``, ``RemoveLastTurn``) is refused: later ``AppendMessages`` and
    ``RemoveLastTurn`` of that session are refused too, since they were built on a memory
    the store does not match (results of calls whose message was refused, say). A session
    sends this when it starts (before it reads the store) and after it handled a refusal in
    place; the writer answers in order, so everything its dead incarnation sent is behind it.
    """

    session_id: str


class RemoveLastTurn(Message, frozen=True, kw_only=True):
    """Delete a session's last user message and every message after it (its search index
    follows, its counters too). Answered with :class:`TurnRemoved` or :class:`StoreFailed`."""

    session_id: str
    fence: Fence | None = None
    """The writer's lease on the session (cluster mode): refused with ``StoreFailed(fenced=...)``,
    nothing written, unless it is the session's current live lease. None: no check (one process)."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class PutResponse(Message, frozen=True, kw_only=True):
    """Store a Responses API object (JSON text) for ``previous_response_id`` chains and GET.

    The table is bounded: past ``keep`` responses the oldest are deleted. Answered with
    :class:`ResponseStored` or :class:`StoreFailed`."""

    response_id: str
    session_id: str
    body: str
    created_at: float
    keep: int = 10_000
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class DeleteResponse(Message, frozen=True, kw_only=True):
    """Forget a stored response. Answered with :class:`ResponseDeleted` or :class:`StoreFailed`."""

    response_id: str
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class GetStoreStatistics(Message, frozen=True, kw_only=True):
    """Commit whatever the writer holds, then answer :class:`StoreStatistics`.

    Also a barrier: every write told before it is committed (and acknowledged) when the
    statistics arrive. ``Address.ask`` returns the record too (for tests and benchmarks).
    """

    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


StoreCommand = (
    CreateSession
    | AppendMessages
    | EndSession
    | UpdateSessionTotals
    | DeleteSession
    | RemoveLastTurn
    | ReopenWrites
    | PutResponse
    | DeleteResponse
    | GetStoreStatistics
    | LeaseCommand
)
"""What the store writer's inbox accepts."""


# -- replies -----------------------------------------------------------------------------


class SessionCreated(Message, frozen=True, kw_only=True):
    """The session row is committed."""

    session_id: str
    token: Token | str = ""


class MessagesPersisted(Message, frozen=True, kw_only=True):
    """The messages are committed (durable) under these row ids, in the order sent."""

    session_id: str
    token: Token | str = ""
    message_ids: tuple[int, ...] = ()


class SessionEnded(Message, frozen=True, kw_only=True):
    """The session's end is committed."""

    session_id: str
    token: Token | str = ""


class SessionTotalsUpdated(Message, frozen=True, kw_only=True):
    """The usage deltas are committed."""

    session_id: str
    token: Token | str = ""


class SessionDeleted(Message, frozen=True, kw_only=True):
    """The session and its messages are gone (committed)."""

    session_id: str
    token: Token | str = ""
    messages_deleted: int = 0


class TurnRemoved(Message, frozen=True, kw_only=True):
    """The last exchange is gone (committed); ``removed`` messages were deleted (0: none was stored)."""

    session_id: str
    token: Token | str = ""
    removed: int = 0
    text: str | None = None
    """The removed user message."""


class ResponseStored(Message, frozen=True, kw_only=True):
    response_id: str
    token: Token | str = ""


class ResponseDeleted(Message, frozen=True, kw_only=True):
    response_id: str
    deleted: bool
    token: Token | str = ""


class StoreFailed(Message, frozen=True, kw_only=True):
    """A write was not stored; nothing of it is in the database."""

    token: Token | str
    error: str
    """What happened and what to do, in a sentence or two."""
    command: str = ""
    """The tag of the command that failed (``AppendMessages``, ...)."""
    session_id: str | None = None
    retryable: bool = False
    """True when sending the same command again may succeed (busy, restarting, disk full)."""
    fenced: Fence | None = None
    """Set when the write's fence was refused: the session's lease as the store holds it (its
    owner and epoch; an empty owner when it has none). The sender has lost the session."""


StoreReply = (
    SessionCreated
    | MessagesPersisted
    | SessionEnded
    | SessionTotalsUpdated
    | SessionDeleted
    | TurnRemoved
    | ResponseStored
    | ResponseDeleted
    | StoreFailed
    | LeaseGranted
    | LeaseRefused
    | LeaseReleased
    | NodeSeen
)
"""What the store writer tells a ``reply_to`` for a write."""


class StoreStatistics(Message, frozen=True, kw_only=True):
    """Counters of one store writer incarnation (they restart from zero after a restart)."""

    path: str
    incarnation: int
    transactions: int
    """Transactions committed (group commit: usually far fewer than writes)."""
    writes: int
    """Write commands committed and acknowledged."""
    failures: int
    """Write commands answered with ``StoreFailed``."""
    messages: int
    """Message rows committed."""
    largest_batch: int
    """Most writes committed in one transaction."""
    batch_cap: int
    """A transaction is committed at this many writes even if more are waiting."""
    round_trips: int = 0
    """Postgres: queries sent to the server and waited for (0 on SQLite, which has no server)."""


# -- records -----------------------------------------------------------------------------


class SessionRecord(Message, frozen=True, kw_only=True):
    """One row of ``sessions``."""

    id: str
    source: str
    user_id: str | None = None
    model: str | None = None
    model_config: dict[str, Any] | None = None
    system_prompt: str | None = None
    parent_session_id: str | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    end_reason: str | None = None
    message_count: int = 0
    tool_call_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    title: str | None = None


TurnStatus = Literal["running", "completed", "failed", "cancelled"]


class SegmentRecord(Message, frozen=True, kw_only=True):
    """One row of ``segments``: a segment of a session after its first (made by a compression)."""

    session_id: str
    segment: int
    """1 for the first compression's segment, then 2, ... (0 is the session's start, no row)."""
    first_message_id: int
    """The id of its first message: the segment is every message of the session from it on,
    up to the next segment's first."""
    reason: str
    started_at: float
    summary: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    summarised: int = 0


class TurnRecord(Message, frozen=True, kw_only=True):
    """One row of ``turns``: a turn's status as the store knows it."""

    session_id: str
    turn_id: str
    status: TurnStatus
    reason: str = ""
    """Why it failed or was cancelled (``interrupted``: the process stopped while it ran)."""
    started_at: float | None = None
    """None when the store first heard of the turn at its end (it started before schema 4)."""
    ended_at: float | None = None


class Interrupted(Message, frozen=True, kw_only=True):
    """What settling a store at start did to one session a dead process left open."""

    turn_ids: tuple[str, ...] = ()
    """Its turns that were ``running``, now ``failed`` with reason ``interrupted`` (in start
    order; empty for a session settled by its transcript alone, written before schema 4)."""
    settled_calls: int = 0
    """Tool calls that had no result and got one (the outcome is unknown)."""


class StoredMessage(Message, frozen=True, kw_only=True):
    """One row of ``messages``: the transcript entry and what the store adds to it."""

    id: int
    session_id: str
    timestamp: float
    message: ChatMessage
    token_count: int | None = None


class SearchHit(Message, frozen=True, kw_only=True):
    """One full-text search match."""

    message_id: int
    session_id: str
    role: str
    snippet: str
    """The matching part of the content, matches wrapped in the reader's markers."""
    timestamp: float
    rank: float
    """FTS5 bm25 rank: lower is a better match."""
