"""The turn machine's vocabulary: what it is told (inputs) and what it asks done (effects).

Inputs carry the time (``now``) and the token or call id of the work they answer; effects
are executed by a host (the session actor, the simulator). ``_machine.step`` maps one to
the other.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocols import ChatMessage, Token, ToolCall
from protocols._session import BusyPolicy, SessionEvent, TurnOptions
from protocols._store import SegmentStart, TokenUsage, TurnMark

# -- inputs ----------------------------------------------------------------------------------


class Input(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    now: float = 0.0
    """Monotonic seconds, stamped by whoever feeds the machine."""


class UserInput(Input, frozen=True, kw_only=True):
    turn_id: str
    text: str
    policy: BusyPolicy | None = None
    instructions: str | None = None
    tool_results: tuple[ChatMessage, ...] = ()
    """Instead of a user message: a client's results for the client tools the last turn paused on."""
    options: TurnOptions | None = None
    images: tuple[str, ...] = ()
    compress: bool = False
    """Not a message: compress the conversation now (``/compress``); ``text`` is the focus topic."""


class Persisted(Input, frozen=True, kw_only=True):
    token: Token


class PersistFailed(Input, frozen=True, kw_only=True):
    token: Token
    error: str


class ModelReplied(Input, frozen=True, kw_only=True):
    token: Token
    content: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_details: str | None = None
    """The provider's ``reasoning_details`` as JSON text, kept with the assistant message."""


NO_KEY = "no_key"
"""``ModelFailed.kind`` when no key of the provider could be leased (``retry_after``: until the first is back)."""


class ModelFailed(Input, frozen=True, kw_only=True):
    token: Token
    kind: str
    status: int | None = None
    detail: str = ""
    retry_after: float | None = None
    benched: str = ""
    """With kind ``no_key``: why the first key back was benched (``rate_limit``, ``auth``, ``billing``...)."""


class ToolDone(Input, frozen=True, kw_only=True):
    call_id: str
    content: str
    ok: bool = True


class Cancel(Input, frozen=True, kw_only=True):
    reason: str = "cancelled by the user"
    turn_id: str = ""
    """Only this turn (running or queued); empty: the running one."""


class Stop(Input, frozen=True, kw_only=True):
    """This incarnation stops (shutdown, or the node lost the session): the running turn and
    every queued one end now and nothing starts after them (a queued turn started by a stopping
    incarnation would never be answered). They end cancelled with ``reason``, or, with
    ``failed``, as failures of that kind (``not_owner``: another node serves the session; retry)."""

    reason: str
    failed: str = ""


class TimerFired(Input, frozen=True, kw_only=True):
    token: Token


class Resume(Input, frozen=True, kw_only=True):
    """Continue an open turn found in the transcript after a restart (no new user message)."""

    turn_id: str


MachineInput = UserInput | Persisted | PersistFailed | ModelReplied | ModelFailed | ToolDone | Cancel | Stop | TimerFired | Resume


# -- effects ---------------------------------------------------------------------------------


class Effect(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    pass


class Persist(Effect, frozen=True, kw_only=True):
    token: Token
    messages: tuple[ChatMessage, ...]
    acked: bool = False
    """True when the machine waits for ``Persisted(token)`` before going on."""
    turn: TurnMark | None = None
    """The turn this write starts or ends (the store records it in the same transaction)."""
    segment: SegmentStart | None = None
    """The messages start the session's next segment (a compression's result)."""
    usage: TokenUsage | None = None
    """Tokens of the turn's model calls not yet written: added to the session's totals with this write."""


class CallModel(Effect, frozen=True, kw_only=True):
    token: Token
    turn_id: str
    """The turn the call belongs to (hosts never take tokens apart)."""
    messages: tuple[ChatMessage, ...]
    use_tools: bool
    timeout: float
    options: TurnOptions | None = None
    """The client's tools and sampling parameters for this turn (API clients only)."""
    provider: int = 0
    """Which provider of the fallback chain to call (0: the primary)."""
    model: str = ""
    """The model to ask instead of the provider's (a compression's summary model); empty: the provider's."""


class RunTool(Effect, frozen=True, kw_only=True):
    call_id: str
    name: str
    arguments: dict[str, Any]
    timeout: float


class CancelModel(Effect, frozen=True, kw_only=True):
    token: Token


class CancelTool(Effect, frozen=True, kw_only=True):
    call_id: str


class StartTimer(Effect, frozen=True, kw_only=True):
    token: Token
    delay: float


class CancelTimer(Effect, frozen=True, kw_only=True):
    token: Token


class Emit(Effect, frozen=True, kw_only=True):
    event: SessionEvent


MachineEffect = Persist | CallModel | RunTool | CancelModel | CancelTool | StartTimer | CancelTimer | Emit
