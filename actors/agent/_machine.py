"""The turn machine: a session's logic as a pure function ``step(state, event) -> (state, effects)``.

No I/O, no clock reads, no threads, no randomness: time arrives inside events (``now``),
and everything the machine wants done leaves as effects (persist, call the model, run a
tool, cancel, start a timer, emit an event). The session actor executes the effects; the
deterministic simulator can run the same function.

Invariant: every turn ends in exactly one of TurnCompleted / TurnFailed / TurnCancelled,
and before any model call the transcript is sanitized (every tool call has one result).
Invariant: a late outcome (a model reply, a tool result, a timer) for work that was
cancelled or superseded is ignored: each carries the token or call id it was started with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import msgspec

from protocols import ChatMessage, Token, ToolCall
from protocols._session import (
    BusyPolicy,
    SessionEvent,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnQueued,
    TurnRejected,
    TurnStarted,
    UserMessageSaved,
)
from protocols._store import TokenUsage, TurnMark

from . import _machine_compress as compression
from . import _machine_failures as failures
from . import _machine_tools as tools
from ._answer_format import answer_problem
from ._compress import CompressionSettings
from ._machine_failures import NO_KEY_MIN_WAIT
from ._machine_tools import PREVIEW_CHARS
from ._plan import ToolTraits
from ._sanitize import cancelled_result, sanitize, synthetic_result
from ._tokens import DEFAULT_CONTEXT_WINDOW, RequestSize
from ._turn_io import (
    NO_KEY,
    CallModel,
    Cancel,
    CancelModel,
    CancelTimer,
    CancelTool,
    Effect,
    Emit,
    Input,
    MachineEffect,
    MachineInput,
    ModelFailed,
    ModelReplied,
    Persist,
    Persisted,
    PersistFailed,
    Resume,
    RunTool,
    StartTimer,
    Stop,
    TimerFired,
    ToolDone,
    UserInput,
)
from ._turn_state import (
    BackingOff,
    Calling,
    Committing,
    Compressing,
    PersistingAnswer,
    PersistingCalls,
    PersistingSegment,
    PersistingUser,
    Phase,
    RunningTools,
    SessionState,
    Turn,
)

__all__ = [
    "BackingOff",
    "CONTINUE_INSTRUCTION",
    "CallModel",
    "Calling",
    "Cancel",
    "CancelModel",
    "CancelTimer",
    "CancelTool",
    "Committing",
    "EMPTY_ANSWER",
    "Effect",
    "Emit",
    "FORMAT_INSTRUCTION",
    "GRACE_INSTRUCTION",
    "Input",
    "MachineConfig",
    "MachineEffect",
    "MachineInput",
    "ModelFailed",
    "ModelReplied",
    "NO_KEY",
    "NO_KEY_MIN_WAIT",
    "PREVIEW_CHARS",
    "Persist",
    "PersistFailed",
    "Persisted",
    "PersistingAnswer",
    "PersistingCalls",
    "PersistingUser",
    "Phase",
    "RECENT_TURNS",
    "Resume",
    "RunTool",
    "RunningTools",
    "SessionState",
    "StartTimer",
    "Stop",
    "TimerFired",
    "ToolDone",
    "Turn",
    "UserInput",
    "step",
]

GRACE_INSTRUCTION = "You have used all tool calls this turn allows. Do not call tools. Summarise what you did, what you found, and what is left to do."
FORMAT_INSTRUCTION = "Your answer was not accepted: {why}. Reply again with only the JSON the requested response format asks for, nothing before or after it."
CONTINUE_INSTRUCTION = "Your answer was cut off by the output token limit. Continue exactly where it stopped, without repeating anything."
EMPTY_ANSWER = "(empty)"
"""The answer recorded when the model twice replied with nothing (or only reasoning)."""
RECENT_TURNS = 256


@dataclasses.dataclass(frozen=True, slots=True)
class MachineConfig:
    """Per-session limits and policies."""

    traits: Mapping[str, ToolTraits] = dataclasses.field(default_factory=dict)
    """The tools this session may call, with what the batch planner needs to know."""
    max_iterations: int = 90
    max_parallel: int = 8
    turn_timeout: float = 900.0
    model_timeout: float = 300.0
    tool_timeout: float = 600.0
    max_attempts: int = 5
    retry_base: float = 1.0
    retry_cap: float = 30.0
    busy_policy: BusyPolicy = "queue"
    queue_limit: int = 8
    providers: tuple[tuple[str, str], ...] = ()
    """The fallback chain as (provider, model), primary first; empty: one provider, no fallback."""
    max_continuations: int = 3
    """Times an answer cut by the token limit (``finish_reason: length``) is continued."""
    compression: CompressionSettings | None = None
    """Context compression (None: off; a context overflow then fails the turn)."""
    context_length: int = DEFAULT_CONTEXT_WINDOW
    """The model's context window, in tokens (``_tokens.context_window``)."""
    summary_model: str = ""
    """The model that writes compression summaries (empty: the session's own)."""
    tools_size: RequestSize = RequestSize(chars=0, fixed=0)
    """The size of the tool schemas sent with every call: counted against the window, and part
    of what a reply's reported prompt tokens are compared with."""


# -- the step function -----------------------------------------------------------------------


def step(state: SessionState, event: MachineInput, config: MachineConfig) -> tuple[SessionState, list[MachineEffect]]:
    """Apply one input; return the new state and the effects to execute, in order."""
    run = _Step(state, config)
    run.handle(event)
    return run.state, run.effects


class _Step:
    __slots__ = ("config", "effects", "state")

    def __init__(self, state: SessionState, config: MachineConfig) -> None:
        self.state = state
        self.config = config
        self.effects: list[MachineEffect] = []

    # helpers ----------------------------------------------------------------------------------

    def emit(self, event: SessionEvent) -> None:
        self.effects.append(Emit(event=msgspec.structs.replace(event, session_id=self.state.session_id)))

    def set_turn(self, turn: Turn | None) -> None:
        self.state = msgspec.structs.replace(self.state, turn=turn)

    def append(self, *messages: ChatMessage) -> None:
        self.state = msgspec.structs.replace(self.state, transcript=self.state.transcript + messages)

    # dispatch --------------------------------------------------------------------------------

    def handle(self, event: MachineInput) -> None:
        # Dispatched on the exact type (inputs and phases are final structs, never subclassed):
        # a class pattern costs an ``isinstance`` through msgspec's metaclass for every case it
        # passes, and every step of every session comes through here.
        turn = self.state.turn
        if type(event) is UserInput:
            self.on_user_input(event)
        elif type(event) is Resume:
            if turn is None:
                self.resume(event)
        elif type(event) is Cancel:
            self.on_cancel(turn, event)
        elif type(event) is Stop:
            self.on_stop(turn, event)
        elif turn is None:
            return  # a late outcome after the turn ended
        elif type(event) is Persisted:
            self.on_persisted(turn, event)
        elif type(event) is ModelReplied:
            phase = turn.phase
            if type(phase) is Calling and event.token == phase.token:
                compression.learn(self, turn, event)
                self.on_reply(turn, event)
            elif type(phase) is Compressing and event.token == phase.token:
                compression.on_summary(self, turn, phase, event)
        elif type(event) is ToolDone:
            phase = turn.phase
            if type(phase) is RunningTools and event.call_id in phase.running:
                tools.on_done(self, turn, phase, event)
        elif type(event) is TimerFired:
            phase, token = turn.phase, event.token
            if token == _deadline_token(turn.turn_id):
                limit = self.config.turn_timeout
                error = f"the turn ran longer than its {limit:g} s limit and was stopped; ask again or split the task"
                self.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=error, kind="deadline"), event.now)
            elif type(phase) is BackingOff and token == phase.token:
                self.call_model(turn, event.now, attempt=phase.attempt, extra=phase.extra)
        elif type(event) is ModelFailed:
            phase = turn.phase
            if type(phase) is Calling and event.token == phase.token:
                failures.on_model_failed(self, turn, phase, event)
            elif type(phase) is Compressing and event.token == phase.token:
                compression.on_summary_failed(self, turn, phase, event)
        elif type(event) is PersistFailed:
            self.on_persist_failed(turn, event.token, event.error, event.now)

    def resume(self, event: Resume) -> None:
        turn_id = event.turn_id
        resumed = Turn(turn_id=turn_id, phase=PersistingUser(token=Token(step="user", turn_id=turn_id)), deadline=event.now + self.config.turn_timeout)
        self.effects.append(StartTimer(token=_deadline_token(turn_id), delay=self.config.turn_timeout))
        self.call_model(resumed, event.now)

    def on_cancel(self, turn: Turn | None, event: Cancel) -> None:
        target = event.turn_id
        if turn is not None and target in ("", turn.turn_id):
            self.end_turn(turn, TurnCancelled(turn_id=turn.turn_id, reason=event.reason), event.now)
        elif target and any(q.turn_id == target for q in self.state.queued):
            self.state = msgspec.structs.replace(self.state, queued=tuple(q for q in self.state.queued if q.turn_id != target))
            self.end_queued(TurnCancelled(turn_id=target, reason=event.reason))

    def on_stop(self, turn: Turn | None, event: Stop) -> None:
        def ending(turn_id: str) -> TurnFailed | TurnCancelled:
            if event.failed:
                return TurnFailed(turn_id=turn_id, error=event.reason, kind=event.failed)
            return TurnCancelled(turn_id=turn_id, reason=event.reason)

        if turn is not None:
            self.end_turn(turn, ending(turn.turn_id), event.now, dequeue=False)
        queued, self.state = self.state.queued, msgspec.structs.replace(self.state, queued=())
        for waiting in queued:
            self.end_queued(ending(waiting.turn_id))

    def end_queued(self, terminal: TurnCancelled | TurnFailed) -> None:
        """End a queued turn that never started: nothing of it to settle, but its end is recorded
        (a row of its own in ``turns``), so a client that was told it was accepted (a run's 202)
        reads how it ended, also after a restart."""
        if isinstance(terminal, TurnFailed):
            mark = TurnMark(turn_id=terminal.turn_id, event="failed", reason=terminal.kind)
        else:
            mark = TurnMark(turn_id=terminal.turn_id, event="cancelled", reason=terminal.reason)
        self.effects.append(Persist(token=Token(step="end", turn_id=terminal.turn_id), messages=(), turn=mark))
        self.emit(terminal)

    def on_persisted(self, turn: Turn, event: Persisted) -> None:
        phase, token = turn.phase, event.token
        if type(phase) is PersistingUser and token == phase.token:
            if turn.focus is not None:
                compression.on_requested(self, turn, event.now)
                return
            self.emit(UserMessageSaved(turn_id=turn.turn_id))
            self.call_model(turn, event.now)
        elif type(phase) is PersistingCalls and token == phase.token:
            tools.start(self, turn, event.now)
        elif type(phase) is PersistingAnswer and token == phase.token:
            self.finish(turn, phase.answer, event.now, phase.paused)
        elif type(phase) is PersistingSegment and token == phase.token:
            compression.on_segment_saved(self, turn, phase, event.now)

    # user input and the busy policy ------------------------------------------------------------

    def on_user_input(self, event: UserInput) -> None:
        if event.turn_id in self.state.recent_turns:
            return  # a retry of a turn this session has already taken: it runs once
        recent = (*self.state.recent_turns, event.turn_id)[-RECENT_TURNS:]
        self.state = msgspec.structs.replace(self.state, recent_turns=recent)
        turn = self.state.turn
        if turn is None:
            self.start_turn(event)
            return
        policy = event.policy or self.config.busy_policy
        if policy == "interrupt":
            self.end_turn(turn, TurnCancelled(turn_id=turn.turn_id, reason="interrupted by a new message"), event.now, dequeue=False)
            self.start_turn(event)
        elif policy == "queue" and len(self.state.queued) < self.config.queue_limit:
            self.state = msgspec.structs.replace(self.state, queued=self.state.queued + (event,))
            self.emit(TurnQueued(turn_id=event.turn_id, position=len(self.state.queued)))
        else:
            why = (
                f"the session is busy with turn {turn.turn_id}"
                if policy == "reject"
                else f"the session is busy and {self.config.queue_limit} messages are already waiting"
            )
            self.emit(TurnRejected(turn_id=event.turn_id, reason=f"{why}; send it again when the turn ends, or interrupt it"))

    def start_turn(self, event: UserInput) -> None:
        turn_id = event.turn_id
        token = Token(step="user", turn_id=turn_id)
        opening: tuple[ChatMessage, ...] = ()
        if not event.compress:  # a /compress turn opens with no message
            # A client's tool results take the place of the user message: the paused turn goes on.
            opening = event.tool_results or (ChatMessage(role="user", content=event.text, images=event.images),)
        self.append(*opening)
        self.set_turn(
            Turn(
                turn_id=turn_id,
                phase=PersistingUser(token=token),
                deadline=event.now + self.config.turn_timeout,
                instructions=event.instructions,
                options=event.options,
                opened=len(opening),
                focus=event.text.strip() if event.compress else None,
            )
        )
        self.emit(TurnStarted(turn_id=turn_id, text=f"/compress {event.text.strip()}".rstrip() if event.compress else event.text))
        self.effects.append(StartTimer(token=_deadline_token(turn_id), delay=self.config.turn_timeout))
        self.effects.append(Persist(token=token, messages=opening, acked=True, turn=TurnMark(turn_id=turn_id, event="started")))

    def on_persist_failed(self, turn: Turn, token: Token, error: str, now: float) -> None:
        if token.turn_id != turn.turn_id:
            # An earlier turn's late write failed: it is not this turn's fault. (Its message
            # is missing from the store; a reload settles what it leaves unpaired.)
            return
        if isinstance(turn.phase, PersistingUser) and token == turn.phase.token:
            # The user message never became durable: take it back and say so.
            self.state = msgspec.structs.replace(self.state, transcript=self.state.transcript[: len(self.state.transcript) - turn.opened])
            message = f"your message could not be saved ({error}); nothing was sent to the model, send it again"
            if turn.focus is not None:
                message = f"the compression could not start: the store refused its record ({error}); the conversation is unchanged, try again"
        else:
            message = f"the transcript could not be saved ({error}); the turn was stopped to avoid losing more"
        self.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=message, kind="store"), now)

    # the model -----------------------------------------------------------------------------------

    def call_model(
        self, turn: Turn, now: float, *, attempt: int | None = None, extra: tuple[ChatMessage, ...] = (), grace: bool = False, problem: str = ""
    ) -> None:
        """Call the model: the next iteration, or (``attempt`` given) a retry of the current one.
        A fresh call may first compress the conversation (``_machine_compress.preflight``)."""
        if attempt is None and not grace and not extra and compression.preflight(self, turn, now):
            return
        iteration = turn.iteration if attempt is not None else turn.iteration + 1
        attempt = attempt or 0
        grace = grace or turn.grace
        token = Token(step="model", turn_id=turn.turn_id, n=iteration, attempt=attempt, provider=turn.provider)
        self.set_turn(
            msgspec.structs.replace(turn, phase=Calling(token=token, attempt=attempt, extra=extra, problem=problem), iteration=iteration, grace=grace)
        )
        messages, _ = sanitize(self.state.transcript)
        prompt: tuple[ChatMessage, ...] = (ChatMessage(role="system", content=self.state.system_prompt),)
        if turn.instructions:
            prompt += (ChatMessage(role="system", content=turn.instructions),)
        prompt += messages
        if grace:
            prompt += (ChatMessage(role="user", content=GRACE_INSTRUCTION),)
        prompt += extra
        timeout = max(0.001, min(self.config.model_timeout, turn.deadline - now))
        use_tools = not grace and (bool(self.config.traits) or bool(turn.options and turn.options.client_tools))
        self.effects.append(
            CallModel(token=token, turn_id=turn.turn_id, messages=prompt, use_tools=use_tools, timeout=timeout, options=turn.options, provider=turn.provider)
        )

    def on_reply(self, turn: Turn, reply: ModelReplied) -> None:
        used = TokenUsage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cache_read_tokens=reply.cache_read_tokens,
            cache_write_tokens=reply.cache_write_tokens,
        )
        turn = msgspec.structs.replace(
            turn,
            input_tokens=turn.input_tokens + reply.input_tokens,
            output_tokens=turn.output_tokens + reply.output_tokens,
            cache_read_tokens=turn.cache_read_tokens + reply.cache_read_tokens,
            cache_write_tokens=turn.cache_write_tokens + reply.cache_write_tokens,
            unsaved=turn.unsaved + used,
        )
        content = turn.partial + reply.content
        if not reply.tool_calls:
            if reply.finish_reason == "length" and turn.continuations < self.config.max_continuations:
                # Cut by the token limit: ask for the rest (the parts are joined, and stored as one answer).
                cut = (ChatMessage(role="assistant", content=content), ChatMessage(role="user", content=CONTINUE_INSTRUCTION))
                self.call_model(msgspec.structs.replace(turn, partial=content, continuations=turn.continuations + 1), reply.now, extra=cut)
                return
            if not content.strip():
                if not turn.empty_retried:  # nothing (or only reasoning): ask once more
                    self.call_model(msgspec.structs.replace(turn, empty_retried=True), reply.now)
                    return
                content = EMPTY_ANSWER
        form = turn.options.response_format if turn.options is not None else None
        problem = answer_problem(content, form) if form is not None and not reply.tool_calls else None
        if problem is not None:
            if not turn.format_retried:
                rejected = (ChatMessage(role="assistant", content=content), ChatMessage(role="user", content=FORMAT_INSTRUCTION.format(why=problem)))
                self.call_model(msgspec.structs.replace(turn, format_retried=True, partial=""), reply.now, extra=rejected)
            else:
                error = f"the model's answer broke the requested response_format twice: {problem}; simplify the schema or ask again"
                self.end_turn(turn, TurnFailed(turn_id=turn.turn_id, error=error, kind="format"), reply.now)
            return
        calls = _normalise_ids(reply.tool_calls, turn.turn_id, turn.iteration)
        assistant = ChatMessage(
            role="assistant",
            content=content,
            tool_calls=calls,
            reasoning=reply.reasoning,
            reasoning_details=reply.reasoning_details,
            finish_reason=reply.finish_reason,
        )
        reply_token = Token(step="reply", turn_id=turn.turn_id, n=turn.iteration)
        if turn.reasoning and reply.reasoning:
            reasoning: str | None = f"{turn.reasoning}\n\n{reply.reasoning}"
        else:
            reasoning = turn.reasoning or reply.reasoning or None
        usage, turn = (
            turn.unsaved or None,
            msgspec.structs.replace(turn, calls=calls, answered=(), reasoning=reasoning, partial="", continuations=0, unsaved=TokenUsage()),
        )
        limit = self.config.max_iterations
        not_run = ""
        if calls and turn.grace:  # a model that calls tools in the grace call: answer them, run nothing
            not_run = "[not run] The turn's tool budget was used up."
        elif calls and turn.iteration >= limit:
            not_run = f"[not run] The turn reached its limit of {limit} model calls."
        results = tuple(synthetic_result(c.id, c.name, not_run) for c in calls) if not_run else ()
        self.append(assistant, *results)
        # Write-ahead: tools run only once the calls are durable, so a crash can never
        # leave a tool that ran without a record of its call. The answer too: a turn
        # completes only once its answer is durable, so a client that saw it can read it
        # back at once and a crash cannot take it away. Calls answered without running go in
        # the same write as the message that makes them: both land, or neither.
        final = not calls or turn.grace
        mark = TurnMark(turn_id=turn.turn_id, event="completed") if final else None
        self.effects.append(Persist(token=reply_token, messages=(assistant, *results), acked=True, turn=mark, usage=usage))
        if results:
            turn = msgspec.structs.replace(turn, answered=tuple(c.id for c in calls))
        if final:
            self.set_turn(msgspec.structs.replace(turn, phase=PersistingAnswer(token=reply_token, answer=content)))
            return
        if results:  # the limit: one last call, without tools, to sum up
            self.call_model(turn, reply.now, grace=True)
            return
        self.set_turn(msgspec.structs.replace(turn, phase=PersistingCalls(token=reply_token)))

    def settle(self, turn: Turn, text: str, end: TurnMark) -> None:
        """Give every unanswered call of the latest assistant message a synthetic result, and record the end."""
        missing = [c for c in turn.calls if c.id not in turn.answered]
        results = tuple(synthetic_result(c.id, c.name, text) for c in missing)
        self.append(*results)
        token = Token(step="settle", turn_id=turn.turn_id, n=turn.iteration) if results else Token(step="end", turn_id=turn.turn_id)
        self.effects.append(Persist(token=token, messages=results, turn=end, usage=turn.unsaved or None))

    # ending -----------------------------------------------------------------------------------------

    def finish(self, turn: Turn, text: str, now: float, calls: tuple[ToolCall, ...] = ()) -> None:
        self.effects.append(CancelTimer(token=_deadline_token(turn.turn_id)))
        self.emit(
            TurnCompleted(
                turn_id=turn.turn_id,
                text=text,
                tool_calls=calls,
                reasoning=turn.reasoning,
                iterations=turn.iteration,
                input_tokens=turn.input_tokens,
                output_tokens=turn.output_tokens,
                cache_read_tokens=turn.cache_read_tokens,
                cache_write_tokens=turn.cache_write_tokens,
            )
        )
        self.set_turn(None)
        self.dequeue(now)

    def pause_for_client(self, turn: Turn, calls: tuple[ToolCall, ...]) -> None:
        """The model called client tools: the turn ends with those calls for the client to run.

        Their results come back as the next turn's opening (``UserInput.tool_results``); until
        then the calls have no result in the transcript, and a model call sees them settled.
        """
        assistant = next((m for m in reversed(self.state.transcript) if m.role == "assistant"), None)
        token = Token(step="pause", turn_id=turn.turn_id)
        answer = (assistant.content or "") if assistant is not None else ""
        self.set_turn(msgspec.structs.replace(turn, phase=PersistingAnswer(token=token, answer=answer, paused=calls)))
        self.effects.append(Persist(token=token, messages=(), acked=True, turn=TurnMark(turn_id=turn.turn_id, event="completed")))

    def end_turn(self, turn: Turn, terminal: SessionEvent, now: float, *, dequeue: bool = True) -> None:
        """Stop all work of ``turn``, settle its calls, and emit its terminal event."""
        phase = turn.phase  # by exact type, as in ``handle``
        if type(phase) is Calling or type(phase) is Compressing:
            self.effects.append(CancelModel(token=phase.token))
        elif type(phase) is BackingOff:
            self.effects.append(CancelTimer(token=phase.token))
        elif type(phase) is RunningTools:
            self.effects.extend(CancelTool(call_id=call_id) for call_id in phase.running)
        self.effects.append(CancelTimer(token=_deadline_token(turn.turn_id)))
        if type(terminal) is TurnCancelled:
            self.settle(turn, cancelled_result(terminal.reason), TurnMark(turn_id=turn.turn_id, event="cancelled", reason=terminal.reason))
        else:
            kind = terminal.kind if type(terminal) is TurnFailed else "error"
            self.settle(turn, "[not run] The turn failed before this tool finished.", TurnMark(turn_id=turn.turn_id, event="failed", reason=kind))
        self.emit(terminal)
        self.set_turn(None)
        if dequeue:
            self.dequeue(now)

    def dequeue(self, now: float) -> None:
        if self.state.queued and self.state.turn is None:
            head, rest = self.state.queued[0], self.state.queued[1:]
            self.state = msgspec.structs.replace(self.state, queued=rest)
            self.start_turn(msgspec.structs.replace(head, now=now))


def _deadline_token(turn_id: str) -> Token:
    return Token(step="deadline", turn_id=turn_id)


def _normalise_ids(calls: tuple[ToolCall, ...], turn_id: str, iteration: int) -> tuple[ToolCall, ...]:
    """Give every call a unique, non-empty id (some providers send none or repeat them)."""
    seen: set[str] = set()
    out = []
    for index, call in enumerate(calls):
        call_id = call.id.strip()
        if not call_id or call_id in seen:
            call_id = f"call_{turn_id[-8:]}_{iteration}_{index}"
        seen.add(call_id)
        out.append(call if call_id == call.id else msgspec.structs.replace(call, id=call_id))
    return tuple(out)
