"""The session actor: one per conversation; it hosts the turn machine and executes its effects.

It never waits. Loading the transcript, model calls, tools and timers are reactor waits
whose outcomes come back as messages; writes go to the store writer, whose acknowledgement
comes back as a message. Events go to the session's hub.

Invariant: one session actor per session id: sessions are children of a dynamic supervisor
and are reached through ``session_address`` (``_address.py``), which reserves the address atomically.
Invariant: after a restart the transcript is reloaded from the store and sanitized;
unfinished tool calls get an "outcome unknown" result and are never re-run.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from actors import Actor, HermesError, WaitHandle
from protocols import ChatMessage, WaitFinished
from protocols._session import (
    AnswerClarification,
    CancelTurn,
    EnsureSession,
    ModelSwitched,
    SessionReady,
    SwitchModel,
    TurnUndone,
    UndoTurn,
    ResolveApproval,
    SessionRecovered,
    StartTurn,
    Subscribe,
    TurnCompleted,
    TurnFailed,
    Unsubscribe,
)
from protocols._store import (
    AppendMessages,
    CreateSession,
    GetStoreStatistics,
    MessagesPersisted,
    RemoveLastTurn,
    ReopenWrites,
    SessionCreated,
    SessionTotalsUpdated,
    StoreFailed,
    StoreStatistics,
    TurnRemoved,
    UpdateSessionTotals,
)

from ._approvals import ApprovalGate
from ._clarify import Clarifier
from ._delegation import Delegation, SessionOverrides
from ._recovery import plan_recovery
from ._loading import build_system_prompt, load_with_retry
from ._machine import (
    CallModel,
    Cancel,
    CancelModel,
    CancelTimer,
    CancelTool,
    Emit,
    MachineConfig,
    MachineEffect,
    MachineInput,
    ModelFailed,
    ModelReplied,
    Persist,
    Persisted,
    PersistFailed,
    Resume,
    RunTool,
    SessionState,
    StartTimer,
    TimerFired,
    ToolDone,
    UserInput,
    step,
)
from ._model import ModelFailure, ModelReply, call_model
from ._sanitize import sanitize
from ._session_deps import RecoveryPolicy as RecoveryPolicy
from ._session_deps import SessionDeps as SessionDeps
from ._tools import ToolCall, ToolOutput, ToolSpec, Workspace

log = logging.getLogger(__name__)

class StoreDiverged(HermesError):
    """A write of this session was refused, so its memory no longer matches the store."""


RESTART_FAILED = (
    "the session restarted while this turn was running or waiting; unfinished tools were not re-run "
    "(their results say 'outcome unknown'); send the message again to continue"
)


WRITE_REPLIES = (MessagesPersisted, StoreFailed, SessionCreated, TurnRemoved, SessionTotalsUpdated)
"""The store's answers to a session's writes (each carries the write's token)."""


class _Timer(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    token: str


class _Idle(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    generation: int


class _AckCheck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Time to check that the store answered every write sent ``store_ack_timeout`` ago."""


async def _run_tool(tool: ToolSpec, arguments: dict[str, Any], call: ToolCall) -> ToolOutput:
    return await tool.run(arguments, call)


class SessionActor(Actor):
    """Hosts one conversation."""

    def __init__(self, deps: SessionDeps, session_id: str, overrides: SessionOverrides | None = None) -> None:
        super().__init__()
        self.overrides = overrides
        if overrides is not None:
            tools = {n: t for n, t in deps.tools.items() if n not in overrides.blocked_tools}
            config = dataclasses.replace(
                deps.config,
                traits={n: t for n, t in deps.config.traits.items() if n in tools},
                max_iterations=overrides.max_iterations,
            )
            deps = dataclasses.replace(deps, tools=tools, config=config, source=overrides.source, recovery="fail")
        self.deps = deps
        self.model = deps.model
        """This session's model settings (the runtime's, or the session's own choice)."""
        self.session_id = session_id
        self.hub = deps.hubs.get(session_id)
        self.state: SessionState | None = None
        self.stash: list[Any] = []
        self.waits: dict[int, tuple[str, str]] = {}
        """wait id -> (kind, key): kind is "model" or "tool", key the token or call id."""
        self.handles: dict[str, WaitHandle] = {}
        """token / call id -> handle, to cancel."""
        self.idle_generation = 0
        self.durable = False
        """True once the session's row is known to be committed."""
        self.waiting_ready: list[Any] = []
        self.serial = 0
        self.writes: collections.deque[tuple[float, str]] = collections.deque()
        """Writes told to the store and not answered yet: (monotonic time sent, token), oldest first."""
        self.ack_check_armed = False
        self.answers: dict[str, _Answer] = {}
        """store token -> a request answered once the store committed (or refused) its write."""
        self.tools_schema = [tool.schema() for tool in deps.tools.values()]
        self.workspace = Workspace(
            deps.workdir, ApprovalGate(self.hub.publish, home=deps.home, settings=deps.approvals), Clarifier(self.hub)
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def started(self) -> None:
        context = self._context()
        self.store = context.registry.lookup(self.deps.store_path)
        depth = self.overrides.depth if self.overrides is not None else 0
        self.delegation = Delegation(context.registry, context.reactor, self.deps.hubs, self.session_id, depth)
        # Load only after the writer has committed everything sent before now: writes of a
        # dead incarnation may still be in its inbox (otherwise a tool result landing after
        # the reload would get a second, synthetic result). Those that build on a refused
        # one are refused (the fence); what this incarnation writes is not.
        self.store.tell(ReopenWrites(session_id=self.session_id))
        self.store.tell(GetStoreStatistics(reply_to=self.actor_ref))

    def load(self) -> None:
        self.start_wait(
            load_with_retry,
            self.deps.open_reader,
            self.session_id,
            self.deps.home,
            self.deps.workdir,
            tag="load",
            timeout=self.deps.load_timeout,
        )

    def receive(self, message: Any) -> Any:
        if isinstance(message, WRITE_REPLIES):
            self.acknowledged(message.token)
        match message:
            case Subscribe(subscriber=subscriber, after_seq=after_seq, observer=observer):
                return self.hub.subscribe(subscriber, after_seq=after_seq, observer=observer)
            case Unsubscribe(subscriber=subscriber):
                self.hub.unsubscribe(subscriber)
            case StoreStatistics() if self.state is None:
                self.load()
            case WaitFinished(tag="load"):
                self.on_loaded(message)
            case SessionCreated(token="create"):
                self.durable = True
                waiting, self.waiting_ready = self.waiting_ready, []
                for reply_to in waiting:
                    reply_to.tell(SessionReady(session_id=self.session_id, created=True))
            case _ if self.state is None:
                self.stash.append(message)
            case StartTurn(text=text, turn_id=turn_id, policy=policy, instructions=instructions, history=history):
                if history and not self.state.transcript and self.state.turn is None:
                    self.seed(history, answered=frozenset(m.tool_call_id or "" for m in message.tool_results))
                self.feed(
                    UserInput(
                        turn_id=turn_id or f"turn_{uuid.uuid4().hex[:12]}",
                        text=text,
                        policy=policy,
                        instructions=instructions,
                        tool_results=message.tool_results,
                        options=message.options,
                        images=message.images,
                        now=time.monotonic(),
                    )
                )
            case CancelTurn(reason=reason, turn_id=turn_id):
                self.feed(Cancel(reason=reason, turn_id=turn_id, now=time.monotonic()))
            case EnsureSession(reply_to=reply_to, title=title):
                if self.durable and title:
                    # It exists (made by a model switch, say) but may have no title yet: give it
                    # this one, and answer once that is stored. A refused title is cosmetic.
                    ready = SessionReady(session_id=self.session_id, created=False)
                    update = UpdateSessionTotals(session_id=self.session_id, title=title, title_if_untitled=True)
                    self.write_answered(update, _Answer(reply_to, lambda _: ready, lambda _: ready, reload=False))
                elif self.durable:
                    reply_to.tell(SessionReady(session_id=self.session_id, created=False))
                else:
                    self.waiting_ready.append(reply_to)
            case SwitchModel(model=model, reply_to=reply_to):
                self.switch_model(model, reply_to)
            case UndoTurn(reply_to=reply_to):
                self.undo(reply_to)
            case TurnRemoved(token=token) | SessionTotalsUpdated(token=token) if token in self.answers:
                pending = self.answers.pop(token)
                _answer(pending.reply_to, pending.done(message))
            case AnswerClarification(request_id=request_id, answer=answer):
                clarifier = self.workspace.clarifier
                if clarifier is not None:
                    self.reactor.call_soon(clarifier.answer, request_id, answer)
            case ResolveApproval(request_id=request_id, choice=choice):
                approvals = self.workspace.approvals
                if approvals is not None:
                    self.reactor.call_soon(approvals.resolve, request_id, choice)
            case WaitFinished():
                self.on_wait(message)
            case MessagesPersisted(token=token):
                self.feed(Persisted(token=token, now=time.monotonic()))
            case StoreFailed(token=token, error=error) if token in self.answers:
                pending = self.answers.pop(token)
                _answer(pending.reply_to, pending.refused(f"the store refused it ({error})"))
                if pending.reload:  # memory changed first: the store is the truth
                    raise StoreDiverged(f"session {self.session_id}: write {token!r} was not stored ({error}); reloading from the store")
                log.warning("session %s: write %r was not stored: %s", self.session_id, token, error)
            case StoreFailed(token=token, error=error):
                turn = self.state.turn
                if turn is not None and turn.phase == "persist_user" and token == turn.token:
                    # Nothing of this turn is stored: take the message back and say so. Nothing
                    # was sent after it (the model waits for it), so the session writes on.
                    self.feed(PersistFailed(token=token, error=error, now=time.monotonic()))
                    self.store.tell(ReopenWrites(session_id=self.session_id))
                else:
                    # Memory and the store now disagree (a message the session holds is not
                    # stored). The store is the truth: restart from it, which settles the turn.
                    raise StoreDiverged(f"session {self.session_id}: write {token!r} was not stored ({error}); reloading from the store")
            case _AckCheck():
                self.check_acks()
            case _Timer(token=token):
                self.handles.pop(token, None)
                self.feed(TimerFired(token=token, now=time.monotonic()))
            case _Idle(generation=generation):
                if generation == self.idle_generation and self.state.turn is None and not self.state.queued:
                    log.info("session %s idle: passivating", self.session_id)
                    self.stop()
            case _:
                return super().receive(message)
        return None

    def terminated(self, kind: str) -> None:
        if kind == "normal":
            self.hub.release()  # passivated: keep the numbering, not the events
        # Whatever tools left running (background commands) ends with the session.
        try:
            self.reactor.call_soon(self.workspace.close)
        except HermesError:
            pass  # the reactor is gone, and took those tasks with it

    def stopping(self) -> None:
        # An orderly stop (shutdown, passivation) settles the running turn first: its
        # cancelled results reach the store, which stops after the sessions.
        if self.state is not None and self.state.turn is not None:
            self.feed(Cancel(reason="the server is shutting down", now=time.monotonic()))

    # -- writes and their acknowledgements -------------------------------------------------------------

    def write(self, command: Any) -> None:
        """Tell the store a write whose reply comes back here, and expect that reply in time."""
        self.writes.append((time.monotonic(), command.token))
        self.store.tell(command)
        if not self.ack_check_armed:
            self.ack_check_armed = True
            self.send_after(self.deps.store_ack_timeout, _AckCheck())

    def acknowledged(self, token: str) -> None:
        writes = self.writes
        if writes and writes[0][1] == token:
            writes.popleft()  # the store answers in order: nearly always the oldest
            return
        for index, (_, pending) in enumerate(writes):
            if pending == token:
                del writes[index]
                return

    def check_acks(self) -> None:
        """One timer per session while writes are unanswered, not one per write."""
        self.ack_check_armed = False
        if not self.writes:
            return
        sent, token = self.writes[0]
        age, limit = time.monotonic() - sent, self.deps.store_ack_timeout
        if age >= limit:
            # Lost or stuck: either way this memory may hold what the store does not.
            msg = f"session {self.session_id}: the store did not answer write {token!r} within {limit:g} s; reloading from the store"
            raise StoreDiverged(msg)
        self.ack_check_armed = True
        self.send_after(max(limit - age, limit / 30), _AckCheck())  # at most 30 checks a timeout

    # -- commands that change the stored session --------------------------------------------------

    def switch_model(self, model: str, reply_to: Any) -> None:
        if not model.strip():
            _answer(reply_to, ModelSwitched(session_id=self.session_id, model=model, error="the model name is empty"))
            return
        chosen = model.strip()
        self.model = dataclasses.replace(self.model, model=chosen)
        self.write_answered(
            UpdateSessionTotals(session_id=self.session_id, model=chosen),
            _Answer(
                reply_to,
                lambda _: ModelSwitched(session_id=self.session_id, model=chosen),
                lambda why: ModelSwitched(session_id=self.session_id, model=chosen, error=why),
            ),
        )

    def undo(self, reply_to: Any) -> None:
        """Take back the last exchange: trimmed here now, answered once the store removed it too."""
        assert self.state is not None
        if self.state.turn is not None or self.state.queued:
            _answer(reply_to, TurnUndone(session_id=self.session_id, error="a turn is running or waiting; stop it first, then undo"))
            return
        transcript = self.state.transcript
        last = next((i for i in range(len(transcript) - 1, -1, -1) if transcript[i].role == "user"), None)
        if last is None:
            _answer(reply_to, TurnUndone(session_id=self.session_id, error="there is nothing to undo: the session has no message of yours yet"))
            return
        # The store answers in order: a message sent after this lands after the removal.
        self.state = msgspec.structs.replace(self.state, transcript=transcript[:last])
        self.write_answered(
            RemoveLastTurn(session_id=self.session_id),
            _Answer(
                reply_to,
                lambda removed: TurnUndone(session_id=self.session_id, removed=removed.removed, text=removed.text),
                lambda why: TurnUndone(session_id=self.session_id, error=why),
            ),
        )

    def write_answered(self, command: Any, pending: _Answer) -> None:
        """Write ``command`` and answer ``pending`` once the store committed or refused it."""
        self.serial += 1
        token = f"{type(command).__name__}/{self.serial}"
        self.answers[token] = pending
        self.write(msgspec.structs.replace(command, token=token, reply_to=self.actor_ref))

    # -- loading and recovery -----------------------------------------------------------------------

    def on_loaded(self, finished: WaitFinished) -> None:
        if finished.status != "ok":
            raise RuntimeError(f"session {self.session_id}: could not load from the store: {finished.status} {finished.error}")
        record, messages, context = finished.value
        now = time.time()
        if record is None:
            prompt = build_system_prompt(self.deps.model.model, self.deps.platform_hint, datetime.date.today(), context)
            title = next((m.title for m in self.stash if isinstance(m, EnsureSession) and m.title), None)
            self.write(
                CreateSession(
                    session_id=self.session_id,
                    source=self.deps.source,
                    model=self.deps.model.model,
                    system_prompt=prompt,
                    title=title,
                    number_taken_title=True,
                    parent_session_id=self.overrides.parent_session_id if self.overrides else self.branched_from(),
                    started_at=now,
                    token="create",
                    reply_to=self.actor_ref,
                )
            )
            self.state = SessionState(session_id=self.session_id, system_prompt=prompt)
            self.recover((), 0)  # turns this process saw start but that never became durable
        else:
            self.durable = True
            if record.model and record.model != self.model.model:
                self.model = dataclasses.replace(self.model, model=record.model)  # the session's own choice
            transcript, settled = sanitize(messages)
            self.state = SessionState(session_id=self.session_id, system_prompt=record.system_prompt or "", transcript=transcript)
            if settled:
                # Persist the synthetic results so the store agrees with what the model sees.
                synthetic = tuple(m for m in transcript if m not in messages)
                self.write(AppendMessages(session_id=self.session_id, messages=synthetic, timestamp=now, token="recover", reply_to=self.actor_ref))
            self.recover(transcript, settled)
        stash, self.stash = self.stash, []
        for message in stash:
            self.receive(message)
        self.arm_idle_timer()

    def recover(self, transcript: tuple[ChatMessage, ...], settled: int) -> None:
        """Settle the turns that were open when the last incarnation ended (see ``_recovery``)."""
        plan = plan_recovery(
            seen=self.hub.open_turns.seen,
            open_turns=self.hub.open_turns.snapshot(),
            transcript_open=bool(transcript) and transcript[-1].role in ("user", "tool"),
            settled=settled,
            policy=self.deps.recovery,
        )
        if plan.announce:
            self.hub.publish(SessionRecovered(settled_calls=settled, resumed=plan.resume is not None))
        for turn_id in plan.fail:
            self.hub.publish(TurnFailed(turn_id=turn_id, error=RESTART_FAILED, kind="restarted"))
        if plan.resume is not None:
            self.feed(Resume(turn_id=plan.resume or f"turn_{uuid.uuid4().hex[:12]}", now=time.monotonic()))

    def branched_from(self) -> str | None:
        """The session a waiting chat request says this conversation branched from."""
        return next((m.branched_from for m in self.stash if isinstance(m, StartTurn) and m.branched_from), None)

    def seed(self, history: tuple[ChatMessage, ...], *, answered: frozenset[str] = frozenset()) -> None:
        """Start an empty session from the history a client sent (system messages excluded).

        Calls of the last assistant message whose results come with the turn (``answered``:
        a client's tool results) are left open for them; every other call is settled.
        """
        assert self.state is not None
        history = tuple(m for m in history if m.role != "system")
        last = history[-1] if history else None
        if last is not None and last.role == "assistant" and any(c.id in answered for c in last.tool_calls):
            messages = sanitize(history[:-1])[0] + (last,)
        else:
            messages, _ = sanitize(history)
        if messages:
            self.state = msgspec.structs.replace(self.state, transcript=messages)
            self.write(AppendMessages(session_id=self.session_id, messages=messages, timestamp=time.time(), token="seed", reply_to=self.actor_ref))

    # -- the machine and its effects ----------------------------------------------------------------------

    def feed(self, event: MachineInput) -> None:
        assert self.state is not None
        self.state, effects = step(self.state, event, self.deps.config)
        for effect in effects:
            self.execute(effect)
        if self.state.turn is None:
            self.arm_idle_timer()

    def execute(self, effect: MachineEffect) -> None:
        match effect:
            case Emit(event=event):
                if type(event) is TurnCompleted and self.model.prices:
                    event = msgspec.structs.replace(event, cost_usd=self.model.cost(event.input_tokens, event.output_tokens))
                self.hub.publish(event)
            case Persist(token=token, messages=messages):
                self.write(
                    AppendMessages(session_id=self.session_id, messages=messages, timestamp=time.time(), token=token, reply_to=self.actor_ref)
                )
            case CallModel(token=token, messages=messages, use_tools=use_tools, timeout=timeout, options=options):
                turn_id = token.split("/", 1)[0]
                tools = self.tools_schema if use_tools else []
                if options is not None and use_tools and options.client_tools:
                    # A client's tool shadows a server tool of the same name for its turn.
                    shadowed = options.client_tool_names
                    tools = [t for t in tools if t.get("function", {}).get("name") not in shadowed]
                    tools += [t.schema for t in options.client_tools]
                call = functools.partial(
                    call_model,
                    self.deps.clients,
                    self.model,
                    messages,
                    tools,
                    hub=self.hub,
                    turn_id=turn_id,
                    session_id=self.session_id,
                    options=options,
                )
                handle = self.start_wait(call, tag="model", timeout=timeout)
                self.track(handle, "model", token)
            case RunTool(call_id=call_id, name=name, arguments=arguments, timeout=timeout):
                assert self.state is not None and self.state.turn is not None
                tool_call = ToolCall(
                    session_id=self.session_id,
                    turn_id=self.state.turn.turn_id,
                    call_id=call_id,
                    home=self.deps.home,
                    workspace=self.workspace,
                    publish=self.hub.publish,
                    store_file=self.deps.store_file,
                    delegation=self.delegation if self.delegation.allowed else None,
                    tools=self.deps.tools,
                )
                handle = self.start_wait(_run_tool, self.deps.tools[name], arguments, tool_call, tag="tool", timeout=timeout)
                self.track(handle, "tool", call_id)
            case CancelModel(token=key) | CancelTool(call_id=key) | CancelTimer(token=key):
                pending = self.handles.get(key)
                if pending is not None:
                    del self.handles[key]
                    self.cancel_wait(pending)
                    self.waits.pop(pending.wait_id, None)
            case StartTimer(token=token, delay=delay):
                self.handles[token] = self.send_after(delay, _Timer(token=token))

    def track(self, handle: WaitHandle, kind: str, key: str) -> None:
        self.waits[handle.wait_id] = (kind, key)
        self.handles[key] = handle

    def on_wait(self, finished: WaitFinished) -> None:
        entry = self.waits.pop(finished.wait_id, None)
        if entry is None:
            return  # cancelled on purpose; the machine has moved on
        kind, key = entry
        self.handles.pop(key, None)
        now = time.monotonic()
        if kind == "model":
            value = finished.value
            if finished.status == "ok" and isinstance(value, ModelReply):
                self.feed(
                    ModelReplied(
                        token=key,
                        content=value.content,
                        reasoning=value.reasoning,
                        tool_calls=value.tool_calls,
                        finish_reason=value.finish_reason,
                        input_tokens=value.input_tokens,
                        output_tokens=value.output_tokens,
                        now=now,
                    )
                )
            elif finished.status == "ok" and isinstance(value, ModelFailure):
                self.feed(ModelFailed(token=key, kind=value.kind, status=value.status, detail=value.detail, retry_after=value.retry_after, now=now))
            elif finished.status == "timeout":
                self.feed(ModelFailed(token=key, kind="timeout", detail=finished.error, now=now))
            else:
                self.feed(ModelFailed(token=key, kind="malformed", detail=finished.error or finished.status, now=now))
        elif kind == "tool":
            if finished.status == "ok" and isinstance(finished.value, ToolOutput):
                self.feed(ToolDone(call_id=key, content=finished.value.content, ok=finished.value.ok, now=now))
            elif finished.status == "timeout":
                self.feed(ToolDone(call_id=key, content=f"[error] the tool did not finish in time and was stopped ({finished.error})", ok=False, now=now))
            else:
                self.feed(ToolDone(call_id=key, content=f"[error] the tool failed: {finished.error or finished.status}", ok=False, now=now))

    def arm_idle_timer(self) -> None:
        self.idle_generation += 1
        if self.deps.idle_timeout > 0:
            self.send_after(self.deps.idle_timeout, _Idle(generation=self.idle_generation))


@dataclasses.dataclass(frozen=True, slots=True)
class _Answer:
    """A request answered after its write: ``done(store reply)`` or ``refused(why)``."""

    reply_to: Any
    done: Callable[[Any], Any]
    refused: Callable[[str], Any]
    reload: bool = True
    """On a refusal, reload from the store (the session changed its memory first)."""


def _answer(reply_to: Any, message: Any) -> None:
    if reply_to is not None:
        reply_to.tell(message)
