"""A session's decisions outside the turn machine: pure functions the session hosts share.

The turn machine (``_machine.step``) decides everything inside a turn. What a session
decides around it lives here: what a loaded transcript becomes, what a client's history
seeds, whether a refused write is handled in place, when an unanswered write is overdue,
whether an idle session may passivate, what undo takes back, and which machine input a
finished wait is. No I/O, no clock: the interpreter (``_session_host.SessionHost``) calls
these and executes what they say, in the session actor and in the simulator alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, get_args

import msgspec

from protocols import ChatMessage, ReportKey, Token

from ._machine import CallModel, Committing, ModelFailed, ModelReplied, PersistingUser, SessionState, ToolDone
from ._model import ModelFailure, ModelReply
from ._retry import ModelError
from ._sanitize import sanitize
from ._tools import ToolOutput

Sanitizer = Callable[[Sequence[ChatMessage]], tuple[tuple[ChatMessage, ...], int]]


class Loaded(msgspec.Struct, frozen=True, kw_only=True):
    """What a starting session found in the store (or, for a new one, the prompt it gets)."""

    exists: bool
    prompt: str
    """The stored system prompt, or the one a new session is created with."""
    model: str | None = None
    messages: tuple[ChatMessage, ...] = ()
    known_turns: tuple[str, ...] = ()
    """Every turn id the store has a row for (a retried ``StartTurn`` of one never runs again)."""
    running: tuple[str, ...] = ()
    """Turns the store shows started and not ended."""
    interrupted: tuple[tuple[str, ...], int] | None = None
    """(turn ids, calls settled) when this start found what a dead process left open."""


def restore(session_id: str, loaded: Loaded, sanitizer: Sanitizer = sanitize) -> tuple[SessionState, tuple[ChatMessage, ...], int]:
    """The state a loaded session starts in, the synthetic results to store, and how many calls they settle."""
    transcript, settled = sanitizer(loaded.messages)
    synthetic = tuple(m for m in transcript if m not in loaded.messages) if settled else ()
    state = SessionState(session_id=session_id, system_prompt=loaded.prompt, transcript=transcript, recent_turns=loaded.known_turns)
    return state, synthetic, settled


def seed_transcript(history: tuple[ChatMessage, ...], answered: frozenset[str]) -> tuple[ChatMessage, ...]:
    """An empty session's transcript from the history a client sent (system messages excluded).

    Calls of the last assistant message whose results come with the turn (``answered``: a
    client's tool results) are left open for them; every other call is settled.
    """
    history = tuple(m for m in history if m.role != "system")
    last = history[-1] if history else None
    if last is not None and last.role == "assistant" and any(c.id in answered for c in last.tool_calls):
        return sanitize(history[:-1])[0] + (last,)
    return sanitize(history)[0]


_COMMITTING = frozenset(get_args(Committing))
"""The committing phases' types: phases are final structs, and a set lookup by exact type costs less
than ``isinstance`` against the union (one metaclass check per member it is not)."""


def awaited(state: SessionState, token: Token) -> bool:
    """Whether the running turn waits for the commit of write ``token`` (its user message, its
    calls or its answer); the commit of any other write (a tool result, a settle, a turn's end)
    is only an acknowledgement."""
    turn = state.turn
    return turn is not None and type(turn.phase) in _COMMITTING and turn.phase.token == token  # type: ignore[union-attr]


def refused_in_place(state: SessionState, token: Token) -> bool:
    """A refused write the session handles itself: its running turn's user message (nothing
    of the turn is stored; the turn fails). Any other refusal means memory and store disagree:
    the session restarts from the store."""
    turn = state.turn
    return turn is not None and isinstance(turn.phase, PersistingUser) and token == turn.phase.token


def next_ack_check(sent: float, now: float, limit: float) -> float | None:
    """Seconds until the oldest unanswered write (sent at ``sent``) must be checked again;
    None when it is overdue. At most 30 checks per timeout."""
    age = now - sent
    if age >= limit:
        return None
    return max(limit - age, limit / 30)


def may_passivate(state: SessionState, generation: int, current: int, unanswered: int) -> bool | None:
    """An idle timer passivates the session only if nothing happened since it was armed (True);
    None: it would, but writes are still unanswered (a refusal must reach a live session,
    which reloads and settles): wait another idle period."""
    if generation != current or state.turn is not None or state.queued:
        return False
    return True if not unanswered else None


def undo_cut(state: SessionState) -> int | str:
    """Where undo cuts the transcript (its last user message), or why it cannot."""
    if state.turn is not None or state.queued:
        return "a turn is running or waiting; stop it first, then undo"
    transcript = state.transcript
    last = next((i for i in range(len(transcript) - 1, -1, -1) if transcript[i].role == "user"), None)
    if last is None:
        return "there is nothing to undo: the session has no message of yours yet"
    return last


def offered_tools(server: list[dict[str, Any]], call: CallModel) -> list[dict[str, Any]]:
    """The tool schemas a model call offers: none, the server's, or (an API client's turn) the
    server's with the client's own tools, a client's tool shadowing a server tool of its name."""
    options = call.options
    if not call.use_tools:
        return []
    if options is None or not options.client_tools:
        return server
    kept = [t for t in server if t.get("function", {}).get("name") not in options.client_tool_names]
    return kept + [t.schema for t in options.client_tools]


def model_problem(model: str) -> str | None:
    return "the model name is empty" if not model.strip() else None


def outcome_input(key: Token | str, status: str, value: Any, error: str, now: float) -> ModelReplied | ModelFailed | ToolDone:
    """The machine input a finished wait is, whatever its status: ``key`` is a model call's
    token or a tool call's id."""
    if isinstance(key, Token):
        if status == "ok" and isinstance(value, ModelReply):
            return ModelReplied(
                token=key,
                content=value.content,
                reasoning=value.reasoning,
                tool_calls=value.tool_calls,
                finish_reason=value.finish_reason,
                input_tokens=value.input_tokens,
                output_tokens=value.output_tokens,
                cache_read_tokens=value.cache_read_tokens,
                cache_write_tokens=value.cache_write_tokens,
                reasoning_details=value.reasoning_details,
                now=now,
            )
        if status == "ok" and isinstance(value, ModelFailure):
            return ModelFailed(token=key, kind=value.kind, status=value.status, detail=value.detail, retry_after=value.retry_after, now=now)
        if status == "timeout":
            return ModelFailed(token=key, kind="timeout", detail=error, now=now)
        return ModelFailed(token=key, kind="malformed", detail=error or status, now=now)
    if status == "ok" and isinstance(value, ToolOutput):
        return ToolDone(call_id=key, content=value.content, ok=value.ok, now=now)
    if status == "timeout":
        return ToolDone(call_id=key, content=f"[error] the tool did not finish in time and was stopped ({error})", ok=False, now=now)
    return ToolDone(call_id=key, content=f"[error] the tool failed: {error or status}", ok=False, now=now)


def key_report(lease_id: str, key_id: str, outcome: ModelReplied | ModelFailed) -> ReportKey:
    """How a leased key did, for its pool: a reply is a success with its tokens; a failure says
    its kind and how long the classifier benches the key (None: not the key's fault)."""
    if isinstance(outcome, ModelReplied):
        return ReportKey(lease_id=lease_id, key_id=key_id, ok=True, input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens)
    error = ModelError(kind=outcome.kind, status=outcome.status, detail=outcome.detail, retry_after=outcome.retry_after)  # type: ignore[arg-type]
    return ReportKey(lease_id=lease_id, key_id=key_id, ok=False, kind=outcome.kind, status=outcome.status, cooldown=error.key_cooldown)
