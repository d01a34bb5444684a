"""Session commands and the events a session streams to its subscribers.

Events carry ``seq``: a per-session, gap-free sequence number assigned when the event is
published, so a subscriber that reconnects with the last number it saw resumes exactly.
Fields typed ``Any`` hold in-process references (a subscriber, a reply address) and are
not encodable; everything else is.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ._base import Message
from ._credentials import KeyLeased, NoKeyAvailable
from ._reactor import WaitFinished
from ._store import (
    MessagesPersisted,
    SessionCreated,
    SessionTotalsUpdated,
    StoreFailed,
    StoreStatistics,
    TurnRemoved,
)
from ._transcript import ChatMessage, ToolCall

BusyPolicy = Literal["interrupt", "queue", "reject"]


# -- commands ---------------------------------------------------------------------------


class ClientTool(Message, frozen=True, kw_only=True):
    """A function tool an API client offers for one turn: the client runs it, not the server."""

    name: str
    schema: dict[str, Any]
    """The OpenAI tool object as the client sent it (``{"type": "function", "function": {...}}``)."""


class TurnOptions(Message, frozen=True, kw_only=True):
    """What an API client asked of one turn's model calls (OpenAI request fields)."""

    client_tools: tuple[ClientTool, ...] = ()
    """Offered to the model beside the server's tools; a call to one pauses the turn."""
    tool_choice: str | dict[str, Any] | None = None
    sampling: dict[str, Any] = msgspec.field(default_factory=dict)
    """Passed to the model as given: ``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``, penalties."""
    response_format: dict[str, Any] | None = None
    """``json_object`` or ``json_schema``: the final answer must parse (and match the schema)."""

    @property
    def client_tool_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.client_tools)


class StartTurn(Message, frozen=True, kw_only=True):
    """A user message for the session: starts a turn (or follows the busy policy)."""

    text: str
    images: tuple[str, ...] = ()
    """Image URLs (``data:`` or ``https:``) sent with the user message (vision models)."""
    tool_results: tuple[ChatMessage, ...] = ()
    """Instead of a user message: the client's results for the client tools the last turn paused on."""
    options: TurnOptions | None = None
    branched_from: str | None = None
    """The session this conversation branched from (a chat client's regenerate or edit); it
    becomes the new session's parent when the session is created."""
    turn_id: str = ""
    """Caller-chosen id (for idempotent retries); the session makes one when empty."""
    policy: BusyPolicy | None = None
    """Override of the session's busy policy for this message."""
    instructions: str | None = None
    """An ephemeral system prompt for this turn only (after the session's own, never stored)."""
    history: tuple[ChatMessage, ...] = ()
    """Earlier messages a client sends along; used to seed a session that has none yet."""


class CompressContext(Message, frozen=True, kw_only=True):
    """Compress the conversation now (``/compress [topic]``): one forced summary pass, run as a
    turn of its own (it queues behind a running turn like a message), with no model answer after
    it. The turn ends ``TurnCompleted`` after ``ContextCompressed``, or saying there was nothing
    to compress; a failed summary call fails it and leaves the conversation as it was."""

    focus: str = ""
    """A topic the summary keeps in full detail (empty: none)."""
    turn_id: str = ""
    """Caller-chosen id of the compression's turn; the session makes one when empty."""
    policy: BusyPolicy | None = None


class CancelTurn(Message, frozen=True, kw_only=True):
    """Stop the running turn: model stream and tools are cancelled, the transcript settled."""

    reason: str = "cancelled by the user"
    turn_id: str = ""
    """Cancel only this turn (running or queued); empty means whatever turn is running."""


ApprovalChoice = Literal["once", "session", "always", "deny"]


class ResolveApproval(Message, frozen=True, kw_only=True):
    """An attached client's answer to an ``ApprovalRequested`` event."""

    request_id: str
    choice: ApprovalChoice


class SwitchModel(Message, frozen=True, kw_only=True):
    """Use another model (same endpoint) for this session's next model calls; it is saved.

    ``reply_to`` (optional) gets :class:`ModelSwitched` once the choice is committed.
    """

    model: str
    reply_to: Any = None
    """Local-only: anything with ``tell``."""


class RefreshSettings(Message, frozen=True, kw_only=True):
    """The runtime's settings changed (config.yaml reloaded): restart from the store with the
    new ones once no turn runs (the session passivates; the next message starts it again)."""


class ModelSwitched(Message, frozen=True, kw_only=True):
    """The answer to :class:`SwitchModel`: the session's model is saved (or ``error`` says why not)."""

    session_id: str
    model: str
    error: str | None = None


class UndoTurn(Message, frozen=True, kw_only=True):
    """Take back the session's last exchange: its last user message and everything after it.

    Refused while a turn runs or waits. ``reply_to`` gets :class:`TurnUndone` once the
    removal is committed, so the model never sees those messages again.
    """

    reply_to: Any = None
    """Local-only: anything with ``tell``."""


class TurnUndone(Message, frozen=True, kw_only=True):
    """The answer to :class:`UndoTurn`: ``removed`` messages are gone, ``text`` was the user's
    message (to edit and send again); or ``error`` says why nothing was removed."""

    session_id: str
    removed: int = 0
    text: str | None = None
    error: str | None = None


class EnsureSession(Message, frozen=True, kw_only=True):
    """Make sure the session exists in the store; ``reply_to`` gets ``SessionReady`` once it is durable."""

    title: str | None = None
    """Used only when the session is new."""
    reply_to: Any = None
    """Local-only: anything with ``tell``."""


class SessionReady(Message, frozen=True, kw_only=True):
    session_id: str
    created: bool
    """True when this request created the session."""


class AnswerClarification(Message, frozen=True, kw_only=True):
    """An attached client's answer to a ``ClarificationRequested`` event."""

    request_id: str
    answer: str


class Subscribe(Message, frozen=True, kw_only=True):
    """Start receiving the session's events (replaying those after ``after_seq``)."""

    subscriber: Any
    """Anything with ``tell(event)``: an Address, a probe. In-process only."""
    after_seq: int = 0
    observer: bool = False
    """A watcher (logs, monitoring) rather than someone who can answer questions."""


class Unsubscribe(Message, frozen=True, kw_only=True):
    subscriber: Any


# -- events -------------------------------------------------------------------------------


class SessionEvent(Message, frozen=True, kw_only=True):
    """Base of every streamed event."""

    session_id: str = ""
    seq: int = 0
    turn_id: str = ""


class TurnStarted(SessionEvent, frozen=True, kw_only=True):
    text: str


class UserMessageSaved(SessionEvent, frozen=True, kw_only=True):
    """The turn's user message is durable in the store (the acknowledgement to wait for)."""


class TurnQueued(SessionEvent, frozen=True, kw_only=True):
    """The session was busy; this message waits behind the running turn."""

    position: int


class TurnRejected(SessionEvent, frozen=True, kw_only=True):
    """The session was busy (or its queue full) and the message was not taken; or (``owner``
    set) another cluster node holds the session's lease."""

    reason: str
    owner: str = ""
    """The node that holds the session (cluster mode; empty: this node, busy)."""
    retry_after: float = 0.0
    """Seconds after which asking again may find the session free (0: not said)."""


class TextDelta(SessionEvent, frozen=True, kw_only=True):
    text: str


class ReasoningDelta(SessionEvent, frozen=True, kw_only=True):
    text: str


class ModelRetrying(SessionEvent, frozen=True, kw_only=True):
    """A model call failed in a retryable way; the next attempt starts after ``delay_s``."""

    attempt: int
    delay_s: float
    reason: str


class ModelFallback(SessionEvent, frozen=True, kw_only=True):
    """The turn goes on with the next provider of the fallback chain (the next turn starts on the primary again)."""

    from_provider: str
    to_provider: str
    model: str
    """The model the turn now calls."""
    reason: str


class ContextCompressed(SessionEvent, frozen=True, kw_only=True):
    """The conversation was compressed: its middle is now a summary, in a new segment of the
    session (the store keeps every original message; search still finds them)."""

    tokens_before: int
    tokens_after: int
    """Estimated tokens of what the model is sent, before and after."""
    summarised: int
    """How many messages the summary stands for."""
    segment: int = 0
    """The pass within this turn (1, 2, 3)."""


class ToolStarted(SessionEvent, frozen=True, kw_only=True):
    call_id: str
    name: str
    arguments: str


class ToolFinished(SessionEvent, frozen=True, kw_only=True):
    call_id: str
    name: str
    ok: bool
    preview: str
    """The first few hundred characters of the result."""


class ToolProgress(SessionEvent, frozen=True, kw_only=True):
    """A running tool reported progress (an MCP server's ``notifications/progress``)."""

    call_id: str
    name: str
    progress: float
    total: float | None = None
    message: str = ""


class ApprovalRequested(SessionEvent, frozen=True, kw_only=True):
    """A tool wants to do something dangerous; the turn waits for ``ResolveApproval``."""

    request_id: str
    call_id: str
    command: str
    reasons: tuple[str, ...]
    timeout_s: float
    """Seconds until the request is denied by itself."""


class ApprovalResolved(SessionEvent, frozen=True, kw_only=True):
    request_id: str
    choice: str
    """once / session / always / deny, or timeout / cancelled."""


class ClarificationRequested(SessionEvent, frozen=True, kw_only=True):
    """The agent asks the person a question; the turn waits for ``AnswerClarification``."""

    request_id: str
    question: str
    choices: tuple[str, ...] = ()
    timeout_s: float = 0.0


class TurnCompleted(SessionEvent, frozen=True, kw_only=True):
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    """Calls to client tools: the turn paused for the client to run them and send the results."""
    reasoning: str | None = None
    iterations: int = 0
    input_tokens: int = 0
    """Every prompt token of the turn's model calls, cached ones included."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Of ``input_tokens``, those the provider read from its prompt cache."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those the provider wrote to its prompt cache."""
    cost_usd: float | None = None
    """What the turn's tokens cost, when the model's prices are configured (``pricing:``)."""


class TurnFailed(SessionEvent, frozen=True, kw_only=True):
    error: str
    """What happened and what to do, in one or two lines."""
    kind: str = "error"


class TurnCancelled(SessionEvent, frozen=True, kw_only=True):
    reason: str


class SessionRecovered(SessionEvent, frozen=True, kw_only=True):
    """The session actor restarted and reloaded its transcript from the store."""

    settled_calls: int
    """Tool calls that had no result and got a synthetic one (they were not re-run)."""
    resumed: bool


class HookSkipped(SessionEvent, frozen=True, kw_only=True):
    """A hook failed and was skipped for this call (the turn went on without it)."""

    hook: str
    """The plugin's name, or the shell hook's command."""
    event: str
    """The hook event (``pre_tool_call``, ...)."""
    reason: str
    """``raised``, ``timeout``, ``flood``, ``bad_output``, ``exit`` or ``busy``."""
    detail: str = ""


class ReviewFinished(SessionEvent, frozen=True, kw_only=True):
    """A background review forked after turn ``turn_id`` ended (memory / skill nudge); it ran
    off the user's path in session ``review_session_id`` and this is what it saved."""

    review_session_id: str
    kind: str
    """``memory``, ``skills`` or ``combined``: what the review was asked to look at."""
    saved: tuple[str, ...] = ()
    """One short line per successful write (``memory add (user)``, ``skill create deploy-notes``)."""
    summary: str
    """The one line to show: what was saved, nothing, or why the review ended without saving."""
    ok: bool = True
    """False: the review failed, hung past its deadline or crashed (the user's session is unaffected)."""


class MemorySkipped(SessionEvent, frozen=True, kw_only=True):
    """A memory provider's recalled context was left out of this turn's request (``/memory``):
    its prefetch missed the deadline, failed, or its actor was restarting. The turn went on without it."""

    provider: str
    reason: str
    """``timeout``, ``error`` or ``unavailable``."""
    detail: str = ""


AnySessionEvent = (
    TurnStarted
    | UserMessageSaved
    | TurnQueued
    | TurnRejected
    | TextDelta
    | ReasoningDelta
    | ModelRetrying
    | ModelFallback
    | ContextCompressed
    | ToolStarted
    | ToolProgress
    | ToolFinished
    | ApprovalRequested
    | ApprovalResolved
    | ClarificationRequested
    | TurnCompleted
    | TurnFailed
    | TurnCancelled
    | SessionRecovered
    | HookSkipped
    | ReviewFinished
    | MemorySkipped
)
"""The union a client decodes a session stream with."""

TERMINAL_EVENTS = (TurnCompleted, TurnFailed, TurnCancelled)


SessionCommand = (
    StartTurn | CompressContext | CancelTurn | Subscribe | Unsubscribe | EnsureSession | SwitchModel | UndoTurn | AnswerClarification | ResolveApproval
)
"""What clients (the API, the TUI, a delegating session) tell a session."""

SessionInbox = (
    SessionCommand
    | RefreshSettings
    | MessagesPersisted
    | StoreFailed
    | SessionCreated
    | TurnRemoved
    | SessionTotalsUpdated
    | StoreStatistics
    | WaitFinished
    | KeyLeased
    | NoKeyAvailable
)
"""What a session actor's inbox accepts: the commands, the store's answers to its writes
(``StoreStatistics`` is the barrier it loads behind), the outcomes of its reactor waits, and
its credential pools' answers to its leases.

``Address[SessionInbox]`` is what ``session_address`` returns. ``InjectCrash`` is not
listed: it is a kernel message every address takes (``Address.tell``). The session's
private timer messages are not listed either: they live in the actor's module, and the
actor declares ``Actor[SessionInbox | <its timers>]`` (an ``Address`` of the wider inbox
is an ``Address[SessionInbox]``: addresses are contravariant in their inbox).
"""
