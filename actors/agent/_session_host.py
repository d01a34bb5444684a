"""The session interpreter: one class the session actor and the simulator both run.

:class:`SessionHost` takes a session's messages (commands, store replies, wait outcomes,
its own timers), asks the pure cores what to do (``_machine.step`` inside a turn,
``_session_core`` around it) and executes the answer through a :class:`SessionPort`: the
store, waits, timers, the event stream and the clock. Everything that is not I/O is here,
once; a host (``_session.SessionActor``, ``actors.chaos._sim_session.SimSession``) only
implements the port.

Invariant: one write-acknowledgement timer per session, on the oldest unanswered write; a
write unanswered past ``ack_timeout`` or refused (other than a running turn's user message)
makes the session restart from the store (``port.reload``), which settles the turn.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import msgspec

from protocols import KeyLeased, LeaseKey, NoKeyAvailable, ReportKey, Token, WaitFinished
from protocols._session import (
    CancelTurn,
    CompressContext,
    EnsureSession,
    ModelSwitched,
    RefreshSettings,
    SessionInbox,
    SessionReady,
    SessionRecovered,
    StartTurn,
    SwitchModel,
    TurnFailed,
    TurnUndone,
    UndoTurn,
)
from protocols._store import (
    AppendMessages,
    CreateSession,
    MessagesPersisted,
    RemoveLastTurn,
    SegmentStart,
    SessionCreated,
    SessionTotalsUpdated,
    StoreFailed,
    TokenUsage,
    TurnMark,
    TurnRemoved,
    UpdateSessionTotals,
)

from ._machine import (
    NO_KEY,
    CallModel,
    Cancel,
    CancelModel,
    CancelTimer,
    CancelTool,
    Emit,
    MachineEffect,
    MachineInput,
    ModelFailed,
    Persist,
    Persisted,
    PersistFailed,
    Resume,
    RunTool,
    SessionState,
    StartTimer,
    Stop,
    TimerFired,
    ToolDone,
    UserInput,
    step,
)
from ._recovery import plan_recovery
from ._session_core import (
    Loaded,
    awaited,
    key_report,
    may_passivate,
    model_problem,
    next_ack_check,
    outcome_input,
    refused_in_place,
    restore,
    seed_transcript,
    undo_cut,
)
from ._session_port import WRITE_REPLY_TYPES, Handle, HostConfig, SessionPort, Write
from ._session_timers import REFRESH_RETRY, AckCheck, IdleTimer, Timer, TurnTimer

RESTART_FAILED = (
    "the session restarted while this turn was running or waiting; unfinished tools were not re-run "
    "(their results say 'outcome unknown'); send the message again to continue"
)
INTERRUPTED_FAILED = (
    "the server stopped while this turn was running; unfinished tools were not re-run "
    "(their results say the outcome is unknown: check before running them again); send the message again to continue"
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Answer:
    """A request answered after its write: ``done(store reply)`` or ``refused(why)``."""

    reply_to: Any
    done: Callable[[Any], Any]
    refused: Callable[[str], Any]
    reload: bool = True
    """On a refusal, reload from the store (the session changed its memory first)."""


class SessionHost:
    """One incarnation's interpreter state: the machine's state, stashed messages, waits, writes."""

    def __init__(self, config: HostConfig, port: SessionPort) -> None:
        self.config = config
        self.port = port
        self.session_id = config.session_id
        self.model = config.model
        self.state: SessionState | None = None
        self.stash: list[Any] = []
        self.waits: dict[int, Token | str] = {}
        """wait id -> what it runs: a model call's token, or a tool call's id."""
        self.handles: dict[Token | str, Handle] = {}
        """token / call id -> handle, to cancel."""
        self.idle_generation = 0
        self.durable = False
        """True once the session's row is known to be committed."""
        self.waiting_ready: list[Any] = []
        self.serial = 0
        self.writes: collections.deque[tuple[float, Token | str]] = collections.deque()
        """Writes told to the store and not answered yet: (time sent, token), oldest first."""
        self.ack_check_armed = False
        self.answers: dict[Token | str, _Answer] = {}
        self.lease_base = port.new_turn_id()
        """Makes this incarnation's lease ids its own (a resumed turn's first call has its predecessor's token)."""
        self.leases: dict[str, CallModel] = {}
        """Lease id -> the model call waiting for its key."""
        self.leasing: dict[Token, str] = {}
        """A waiting call's token -> its lease id."""
        self.keys: dict[Token, tuple[str, str, str]] = {}
        """A running call's token -> (provider, lease id, key id): whom to tell how the key did."""
        self.alive = True
        """False once this incarnation asked to be restarted or passivated: it handles nothing more."""
        self.refresh = False
        """The runtime's settings changed (``RefreshSettings``): passivate at the first idle moment."""

    def reload(self, why: str) -> None:
        self.alive = False
        self.port.reload(why)

    def receive(self, message: SessionInbox | Timer | Loaded) -> bool:
        """Handle ``message``; False if it is not a session message (the host's own business)."""
        state = self.state
        if state is not None:
            # The messages of nearly every step, by exact type (messages are final structs,
            # never subclassed): each class pattern of the match below costs an ``isinstance``
            # through msgspec's metaclass.
            if type(message) is WaitFinished:
                self.on_wait(message)
                return True
            if type(message) is MessagesPersisted:
                token = message.token
                self.acknowledged(token)
                if type(token) is Token and awaited(state, token):  # any other commit changes nothing in the machine
                    self.feed(Persisted(token=token, now=self.port.now()))
                return True
            if type(message) is KeyLeased:  # every model call's lease
                self.on_leased(message)
                return True
            if type(message) is StartTurn:
                self.start_turn(state, message)
                return True
            if type(message) is AckCheck:
                self.check_acks()
                return True
            if type(message) is TurnTimer:
                self.handles.pop(message.token, None)
                self.feed(TimerFired(token=message.token, now=self.port.now()))
                return True
            if type(message) is CancelTurn:
                self.feed(Cancel(reason=message.reason, turn_id=message.turn_id, now=self.port.now()))
                return True
        if type(message) in WRITE_REPLY_TYPES:
            self.acknowledged(message.token)  # type: ignore[union-attr]
        if type(message) is Loaded:
            self.on_loaded(message)
            return True
        if type(message) is SessionCreated and type(message.token) is Token and message.token.step == "create":
            self.durable = True
            waiting, self.waiting_ready = self.waiting_ready, []
            for reply_to in waiting:
                reply_to.tell(SessionReady(session_id=self.session_id, created=True))
            return True
        match message:
            case _ if state is None:
                self.stash.append(message)
            case StartTurn():
                self.start_turn(state, message)
            case CompressContext(focus=focus, turn_id=turn_id, policy=policy):
                self.feed(UserInput(turn_id=turn_id or self.port.new_turn_id(), text=focus, policy=policy, compress=True, now=self.port.now()))
            case CancelTurn(reason=reason, turn_id=turn_id):
                self.feed(Cancel(reason=reason, turn_id=turn_id, now=self.port.now()))
            case EnsureSession(reply_to=reply_to, title=title):
                self.ensure(reply_to, title)
            case SwitchModel(model=model, reply_to=reply_to):
                self.switch_model(model, reply_to)
            case RefreshSettings():
                self.refresh = True
                self.passivate_if_idle(state)
            case UndoTurn(reply_to=reply_to):
                self.undo(reply_to)
            case TurnRemoved(token=token) | SessionTotalsUpdated(token=token) if token in self.answers:
                pending = self.answers.pop(token)
                _answer(pending.reply_to, pending.done(message))
            case WaitFinished():
                self.on_wait(message)
            case KeyLeased():
                self.on_leased(message)
            case NoKeyAvailable():
                self.on_no_key(message)
            case MessagesPersisted(token=Token() as token):
                self.feed(Persisted(token=token, now=self.port.now()))
            case StoreFailed(token=token, error=error):
                self.on_refused(token, error)
            case AckCheck():
                self.check_acks()
            case TurnTimer(token=token):
                self.handles.pop(token, None)
                self.feed(TimerFired(token=token, now=self.port.now()))
            case IdleTimer(generation=generation):
                self.passivate_if_idle(state, generation)
            case _:
                return False
        return True

    def start_turn(self, state: SessionState, m: StartTurn) -> None:
        if m.history and not state.transcript and state.turn is None:
            self.seed(seed_transcript(m.history, frozenset(r.tool_call_id or "" for r in m.tool_results)))
        opening = UserInput(
            turn_id=m.turn_id or self.port.new_turn_id(),
            text=m.text,
            policy=m.policy,
            instructions=m.instructions,
            tool_results=m.tool_results,
            options=m.options,
            images=m.images,
            now=self.port.now(),
        )
        self.feed(opening)

    # -- writes and their acknowledgements -------------------------------------------------------

    def write(self, command: Write) -> None:
        """Tell the store a write whose reply comes back here, and expect that reply in time."""
        self.writes.append((self.port.now(), command.token))
        self.port.tell_store(command)
        if not self.ack_check_armed:
            self.ack_check_armed = True
            self.port.after(self.config.ack_timeout, AckCheck())

    def acknowledged(self, token: Token | str) -> None:
        writes = self.writes
        if writes and writes[0][1] == token:
            writes.popleft()  # the store answers in order: nearly always the oldest
            return
        for index, (_, pending) in enumerate(writes):
            if pending == token:
                del writes[index]
                return

    def check_acks(self) -> None:
        self.ack_check_armed = False
        if not self.writes:
            return
        sent, token = self.writes[0]
        delay = next_ack_check(sent, self.port.now(), self.config.ack_timeout)
        if delay is None:  # lost or stuck: either way this memory may hold what the store does not
            self.reload(f"the store did not answer write {token} within {self.config.ack_timeout:g} s")
            return
        self.ack_check_armed = True
        self.port.after(delay, AckCheck())

    def on_refused(self, token: Token | str, error: str) -> None:
        assert self.state is not None
        pending = self.answers.pop(token, None)
        if pending is not None:
            _answer(pending.reply_to, pending.refused(f"the store refused it ({error})"))
            if pending.reload:  # memory changed first: the store is the truth
                self.reload(f"write {token} was not stored ({error})")
        elif isinstance(token, Token) and refused_in_place(self.state, token):
            self.feed(PersistFailed(token=token, error=error, now=self.port.now()))
            self.port.reopen_writes()
        else:
            self.reload(f"write {token} was not stored ({error})")

    def write_answered(self, command: Write, pending: _Answer) -> None:
        """Write ``command`` and answer ``pending`` once the store committed or refused it."""
        self.serial += 1
        token = Token(step="command", n=self.serial)
        self.answers[token] = pending
        self.write(msgspec.structs.replace(command, token=token, reply_to=self.port.me))

    def append(
        self, token: Token, messages: tuple[Any, ...], mark: TurnMark | None = None, segment: SegmentStart | None = None, usage: TokenUsage | None = None
    ) -> None:
        command = AppendMessages(
            session_id=self.session_id,
            messages=messages,
            timestamp=self.port.wall(),
            turn=mark,
            segment=segment,
            usage=usage,
            token=token,
            reply_to=self.port.me,
        )
        self.write(command)

    # -- commands that change the stored session ------------------------------------------------------

    def ensure(self, reply_to: Any, title: str | None) -> None:
        sid = self.session_id
        if self.durable and title:
            # It exists (made by a model switch, say) but may have no title yet: give it this
            # one, and answer once that is stored. A refused title is cosmetic.
            ready = SessionReady(session_id=sid, created=False)
            update = UpdateSessionTotals(session_id=sid, title=title, title_if_untitled=True)
            self.write_answered(update, _Answer(reply_to, lambda _: ready, lambda _: ready, reload=False))
        elif self.durable:
            _answer(reply_to, SessionReady(session_id=sid, created=False))
        else:
            self.waiting_ready.append(reply_to)

    def switch_model(self, model: str, reply_to: Any) -> None:
        sid = self.session_id
        problem = model_problem(model)
        if problem is not None:
            _answer(reply_to, ModelSwitched(session_id=sid, model=model, error=problem))
            return
        chosen = self.model = model.strip()
        done = _Answer(reply_to, lambda _: ModelSwitched(session_id=sid, model=chosen), lambda why: ModelSwitched(session_id=sid, model=chosen, error=why))
        self.write_answered(UpdateSessionTotals(session_id=sid, model=chosen), done)

    def undo(self, reply_to: Any) -> None:
        """Take back the last exchange: trimmed here now, answered once the store removed it too."""
        assert self.state is not None
        sid, cut = self.session_id, undo_cut(self.state)
        if isinstance(cut, str):
            _answer(reply_to, TurnUndone(session_id=sid, error=cut))
            return
        # The store answers in order: a message sent after this lands after the removal.
        self.state = msgspec.structs.replace(self.state, transcript=self.state.transcript[:cut])
        done = _Answer(reply_to, lambda r: TurnUndone(session_id=sid, removed=r.removed, text=r.text), lambda why: TurnUndone(session_id=sid, error=why))
        self.write_answered(RemoveLastTurn(session_id=sid), done)

    # -- loading and recovery -------------------------------------------------------------------------

    def on_loaded(self, loaded: Loaded) -> None:
        port, sid = self.port, self.session_id
        if not loaded.exists:
            title = next((m.title for m in self.stash if type(m) is EnsureSession and m.title), None)
            branched = next((m.branched_from for m in self.stash if type(m) is StartTurn and m.branched_from), None)
            create = CreateSession(
                session_id=sid,
                source=self.config.source,
                model=self.model,
                system_prompt=loaded.prompt,
                title=title,
                number_taken_title=True,
                parent_session_id=self.config.parent_session_id or branched,
                started_at=port.wall(),
                token=Token(step="create"),
                reply_to=port.me,
            )
            self.write(create)
            self.state = SessionState(session_id=sid, system_prompt=loaded.prompt, recent_turns=port.open_turns.known())
            self.recover(loaded, (), 0)  # turns this process saw start but that never became durable
        else:
            self.durable = True
            self.model = loaded.model or self.model  # the session's own choice
            state, synthetic, settled = restore(sid, loaded, self.config.sanitizer)
            known = dict.fromkeys((*state.recent_turns, *port.open_turns.known()))  # the store's, then the hub's
            self.state = msgspec.structs.replace(state, recent_turns=tuple(known))
            if synthetic:  # the store must agree with what the model sees
                self.append(Token(step="recover"), synthetic)
            self.recover(loaded, state.transcript, settled)
        stash, self.stash = self.stash, []
        for message in stash:
            if not self.alive:
                return  # a reload stopped this incarnation
            self.receive(message)
        self.arm_idle()

    def recover(self, loaded: Loaded, transcript: tuple[Any, ...], settled: int) -> None:
        """Settle the turns that were open when the last incarnation (or process) ended."""
        port = self.port
        if loaded.interrupted is not None:  # a dead process left them; the store settled them at start
            turn_ids, calls = loaded.interrupted
            port.publish(SessionRecovered(settled_calls=calls + settled, resumed=False))
            for turn_id in turn_ids:
                port.publish(TurnFailed(turn_id=turn_id, error=INTERRUPTED_FAILED, kind="interrupted"))
            return
        opened = port.open_turns
        transcript_open = bool(transcript) and transcript[-1].role in ("user", "tool")
        stored = loaded.running if loaded.known_turns or not loaded.exists else None
        plan = plan_recovery(
            seen=opened.seen, open_turns=opened.snapshot(), transcript_open=transcript_open, settled=settled, policy=self.config.recovery, stored=stored
        )
        if plan.announce:
            port.publish(SessionRecovered(settled_calls=settled, resumed=plan.resume is not None))
        for turn_id in plan.fail:
            port.publish(TurnFailed(turn_id=turn_id, error=RESTART_FAILED, kind="restarted"))
        for turn_id in loaded.running:  # the store's record of them ends too (a resumed one ends when it does)
            if turn_id != plan.resume:
                self.append(Token(step="end", turn_id=turn_id), (), TurnMark(turn_id=turn_id, event="failed", reason="restarted"))
        if plan.resume is not None:
            self.feed(Resume(turn_id=plan.resume or port.new_turn_id(), now=port.now()))

    def seed(self, messages: tuple[Any, ...]) -> None:
        assert self.state is not None
        if messages:
            self.state = msgspec.structs.replace(self.state, transcript=messages)
            self.append(Token(step="seed"), messages)

    # -- the machine and its effects ------------------------------------------------------------------

    def feed(self, event: MachineInput) -> None:
        assert self.state is not None
        self.state, effects = step(self.state, event, self.config.machine)
        publish = self.port.publish
        for effect in effects:
            if type(effect) is Emit:  # the most frequent effect (nearly every step emits), without a call
                publish(effect.event)
            else:
                self.execute(effect)
            if not self.alive:
                return  # a reload stopped this incarnation
        if self.state.turn is None:
            self.arm_idle()

    def execute(self, effect: MachineEffect) -> None:
        port = self.port
        # By exact type, as in ``receive`` (effects are final structs).
        if type(effect) is Emit:
            port.publish(effect.event)
        elif type(effect) is Persist:
            self.append(effect.token, effect.messages, effect.turn, effect.segment, effect.usage)
        elif type(effect) is CallModel:
            # Every call runs on a key leased from its provider's pool (on_leased).
            token = effect.token
            lease_id = f"{self.session_id}/{self.lease_base}/{token}"
            self.leases[lease_id] = effect
            self.leasing[token] = lease_id
            port.lease(self.provider_name(effect.provider), LeaseKey(lease_id=lease_id, session_id=self.session_id, reply_to=port.me))
        elif type(effect) is RunTool:
            assert self.state is not None and self.state.turn is not None
            self.track(port.start_tool(effect, self.state.turn.turn_id), effect.call_id)
        elif type(effect) is CancelModel or type(effect) is CancelTimer:
            self.cancel_wait(effect.token)
        elif type(effect) is CancelTool:
            self.cancel_wait(effect.call_id)
        elif type(effect) is StartTimer:
            self.handles[effect.token] = port.after(effect.delay, TurnTimer(token=effect.token))

    def cancel_wait(self, key: Token | str) -> None:
        port = self.port
        if type(key) is Token:
            waiting = self.leasing.pop(key, None)
            if waiting is not None:  # its key is on the way: it is given back when it comes (on_leased)
                del self.leases[waiting]
            used = self.keys.pop(key, None)
            if used is not None:  # a cancelled call is not its key's fault
                port.report(used[0], ReportKey(lease_id=used[1], key_id=used[2], ok=True))
        pending = self.handles.pop(key, None)
        if pending is not None:
            port.cancel(pending)
            self.waits.pop(pending.wait_id, None)

    def track(self, handle: Handle, key: Token | str) -> None:
        self.waits[handle.wait_id] = key
        self.handles[key] = handle

    def on_wait(self, finished: WaitFinished) -> None:
        key = self.waits.pop(finished.wait_id, None)
        if key is None:
            return  # cancelled on purpose; the machine has moved on
        self.handles.pop(key, None)
        outcome = outcome_input(key, finished.status, finished.value, finished.error, self.port.now())
        used = self.keys.pop(key, None) if type(key) is Token else None
        if used is not None and not isinstance(outcome, ToolDone):
            provider, lease_id, key_id = used
            self.port.report(provider, key_report(lease_id, key_id, outcome))
        self.feed(outcome)

    # -- keys ---------------------------------------------------------------------------------------

    def provider_name(self, index: int) -> str:
        chain = self.config.machine.providers
        return chain[index][0] if index < len(chain) else ""

    def model_for(self, index: int) -> str:
        """The primary runs the session's own model (``/model`` may change it); a fallback its configured one."""
        chain = self.config.machine.providers
        return self.model if index == 0 or index >= len(chain) else chain[index][1]

    def on_leased(self, leased: KeyLeased) -> None:
        effect = self.leases.pop(leased.lease_id, None)
        if effect is None:
            if all(used[1] != leased.lease_id for used in self.keys.values()):  # cancelled meanwhile: give the key back
                self.port.report(leased.provider, ReportKey(lease_id=leased.lease_id, key_id=leased.key_id, ok=True))
            return  # (a duplicate answer for a running call changes nothing: its outcome reports the key)
        del self.leasing[effect.token]
        self.keys[effect.token] = (leased.provider, leased.lease_id, leased.key_id)
        self.track(self.port.start_model(effect, effect.model or self.model_for(effect.provider), leased), effect.token)

    def on_no_key(self, refused: NoKeyAvailable) -> None:
        effect = self.leases.pop(refused.lease_id, None)
        if effect is None:
            return
        del self.leasing[effect.token]
        wait = max(0.0, refused.until - self.port.wall()) if refused.until else None
        self.feed(ModelFailed(token=effect.token, kind=NO_KEY, detail=refused.reason, retry_after=wait, benched=refused.kind, now=self.port.now()))

    def passivate_if_idle(self, state: SessionState, generation: int | None = None) -> None:
        """Passivate if no turn runs and nothing happened since the idle timer of ``generation``
        was armed (None: now); with writes unanswered, wait another idle period."""
        verdict = may_passivate(state, self.idle_generation if generation is None else generation, self.idle_generation, len(self.writes))
        if verdict:
            self.alive = False
            self.port.passivate()
        elif verdict is None:
            self.arm_idle()

    def arm_idle(self) -> None:
        if self.state is not None:
            self.idle_generation += 1
            if self.refresh:  # new settings wait: passivate as soon as the writes are answered
                self.port.after(REFRESH_RETRY, IdleTimer(generation=self.idle_generation))
            else:
                self.port.idle(self.idle_generation, self.state)

    def stop_turn(self, reason: str, *, failed: str = "") -> None:
        """An orderly stop ends the running turn and the queued ones first (the running one's
        results reach the store); ``failed``: they fail with that kind instead of being cancelled."""
        if self.state is not None and (self.state.turn is not None or self.state.queued):
            self.feed(Stop(reason=reason, failed=failed, now=self.port.now()))


def _answer(reply_to: Any, message: Any) -> None:
    if reply_to is not None:
        reply_to.tell(message)
