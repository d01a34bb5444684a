"""A simulated session: the session actor's role around the real turn machine, plus its supervisor.

:class:`SimSession` does what ``actors.agent._session.SessionActor`` does, step for step:
it feeds the machine (``actors.agent._machine.step``) and executes its effects (persist,
call the model, run tools, timers, cancels, events); it loads and recovers the transcript
the way the actor does (sanitize, persist the synthetic results, fail or resume the open
turn); it stashes messages until loaded. It also plays the part of its supervisor (crash,
restart within intensity, passivation and rehydration on demand) and publishes the same
supervision events the kernel does, in the same order.

The person at the other end is :class:`~._sim_client.SimClient`.

Keep this file in step with ``_session.py``: where the two differ, the simulator tests a
different program.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from protocols import ChatMessage, ChildExited, ChildRestarted, ChildStarted, Escalated
from protocols._session import (
    CancelTurn,
    SessionEvent,
    SessionRecovered,
    StartTurn,
    TurnFailed,
    UserMessageSaved,
)
from protocols._store import MessagesPersisted, SessionCreated, StoreFailed

from ..agent._machine import (
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
from ..agent._model import ModelFailure, ModelReply
from ..agent._recovery import OpenTurns, plan_recovery
from ..agent._session import SessionDeps
from ..agent._sanitize import sanitize
from ._sim_trace import show
from ._sim_world import Loaded, Outcome, TimerMessage, World

if TYPE_CHECKING:
    from ._sim_client import SimClient

PlantedBug = Literal["drop_settle", "rerun_tools", "skip_recovery_sanitize", "ack_before_commit"]
"""Bugs a test plants on purpose, to prove the checker catches them:

- ``drop_settle``: synthetic results that settle a cancelled or failed turn are never written.
- ``rerun_tools``: a recovering session runs the calls it finds unanswered again.
- ``skip_recovery_sanitize``: a recovering session keeps the transcript as loaded.
- ``ack_before_commit``: the store acknowledges a write when it arrives, not when committed.
"""

RESTART_FAILED = (
    "the session restarted while a turn was running; unfinished tools were not re-run "
    "(their results say 'outcome unknown'); send a message to continue"
)
STORE_ACK_TIMEOUT = SessionDeps.store_ack_timeout
"""As a session with the default ``SessionDeps``."""
ACK_CHECK = "store-ack-check"
"""The timer token of SessionActor's ``_AckCheck``."""
MAX_RESTARTS = 50
RESTART_WINDOW = 10.0
"""The session supervisor's intensity (``actors.agent._tree.SESSIONS_INTENSITY``)."""


class Incarnation:
    """One life of a session actor: replies and wait outcomes are addressed to it."""

    __slots__ = ("cancelled_waits", "number", "session", "waits_cancelled")

    def __init__(self, session: SimSession, number: int) -> None:
        self.session = session
        self.number = number
        self.waits_cancelled = False
        """True once it died: its waits and timers are cancelled, nothing reaches it."""
        self.cancelled_waits: set[int] = set()


class SimSession:
    """The session actor, its supervisor and its hub, in the simulated world."""

    def __init__(self, world: World, session_id: str, config: MachineConfig, *, bug: PlantedBug | None = None, load_s: float = 0.005, restart_s: float = 0.001) -> None:
        self.world = world
        self.session_id = session_id
        self.path = f"/sessions/{session_id}"
        self.config = config
        self.recovery = world.plan.workload.recovery
        self.bug = bug
        self.load_s = load_s
        self.restart_s = restart_s
        self.client: SimClient | None = None
        self.current: Incarnation | None = None
        self.restarting = False
        self.mailbox: collections.deque[Any] = collections.deque()
        """Messages told to the address while no incarnation runs (the restart buffer)."""
        self.starts = 0
        self.crashes = 0
        self.restart_times: collections.deque[float] = collections.deque()
        self.seq = 0
        self.resumes = 0
        self.open_turns = OpenTurns()
        """As the session's hub: it outlives incarnations in this world."""
        # The incarnation's own state (reset by each start).
        self.state: SessionState | None = None
        self.stash: list[Any] = []
        self.waits: dict[int, tuple[str, str]] = {}
        self.handles: dict[str, tuple[int, int]] = {}
        """token / call id -> (wait id or 0 for a timer, heap entry)."""
        self.idle_generation = 0
        self.writes: collections.deque[tuple[float, str]] = collections.deque()
        """As SessionActor.writes: unanswered writes, oldest first."""
        self.ack_check_armed = False
        self.checked: tuple[Any, ...] = ()

    # -- the address and the supervisor -----------------------------------------------------------

    def tell(self, message: Any) -> None:
        """A message told to the session's address (a client's StartTurn / CancelTurn)."""
        if self.world.record:
            self.world.note(f"{self.session_id} <- {show(message)}")
        incarnation = self.current
        if incarnation is None:
            self.mailbox.append(message)
            if not self.restarting:
                self.start(False)  # started, or rehydrated, on demand
            return
        self.handle(incarnation, message, from_address=True)

    def on_message(self, incarnation: Incarnation, message: Any) -> None:
        """A reply, wait outcome or timer addressed to one incarnation."""
        if incarnation is not self.current:
            return  # to a dead incarnation: dropped and counted by the real reactor
        if self.world.record:
            self.world.note(f"{self.session_id} <- {show(message)}")
        self.handle(incarnation, message, from_address=False)

    def handle(self, incarnation: Incarnation, message: Any, *, from_address: bool) -> None:
        world = self.world
        crashes = world.plan.crashes
        if self.crashes < crashes.max_per_session and world.dice.fault("crash", "session", crashes.session):
            if from_address:
                self.mailbox.appendleft(message)  # InjectCrash was ahead of it: the next incarnation gets it
            self.crash("InjectedCrash: chaos")
            return
        self.receive(message)

    def start(self, restarted: bool) -> None:
        world = self.world
        self.starts += 1
        incarnation = Incarnation(self, self.starts)
        self.current = incarnation
        self.restarting = False
        self.state, self.stash, self.waits, self.handles = None, [], {}, {}
        self.idle_generation = 0
        self.writes, self.ack_check_armed = collections.deque(), False
        event: Any = ChildRestarted(path=self.path, incarnation=self.starts, restarts=self.starts - 1) if restarted else ChildStarted(path=self.path, incarnation=self.starts)
        world.note(f"{self.session_id}: {type(event).__name__} incarnation {self.starts}")
        world.checker.supervision(event, world.now)
        if restarted:
            # The kernel publishes the exit that caused a restart after the restart itself.
            world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts - 1, kind="crashed"), world.now)
        # As SessionActor: lift the fence, and load only after the store committed what was
        # sent before (a barrier).
        world.store.reopen(self.session_id)
        world.at(max(world.now, world.store.free_at) + world.dice.uniform("session", 0.0005, self.load_s), self._load_done, incarnation)
        while self.mailbox and self.current is incarnation:
            self.handle(incarnation, self.mailbox.popleft(), from_address=True)

    def _load_done(self, incarnation: Incarnation) -> None:
        if incarnation is self.current:
            prompt, messages = self.world.store.load(self.session_id)
            self.handle(incarnation, Loaded(prompt=prompt, messages=messages), from_address=False)

    def _die(self) -> None:
        incarnation = self.current
        assert incarnation is not None
        incarnation.waits_cancelled = True  # the reactor cancels every wait of a dead incarnation
        self.current = None

    def crash(self, reason: str) -> None:
        world = self.world
        self.crashes += 1
        world.note(f"{self.session_id}: CRASH ({reason})")
        self._die()
        now = world.now
        self.restart_times.append(now)
        while self.restart_times and now - self.restart_times[0] > RESTART_WINDOW:
            self.restart_times.popleft()
        if len(self.restart_times) > MAX_RESTARTS:
            # The session supervisor gives up; its parent restarts it without its dynamic
            # children, whose addresses close: waiting messages are dead letters.
            world.checker.supervision(Escalated(path="/sessions", reason=f"{self.path} crashed too often"), now)
            world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts, kind="crashed"), now)
            self.mailbox.clear()
            self.starts = 0
            return
        self.restarting = True
        world.at(now + self.restart_s, self.start, True)

    def passivate(self) -> None:
        world = self.world
        world.note(f"{self.session_id}: passivated (idle)")
        self._die()
        world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts, kind="normal"), world.now)
        self.starts = 0  # the address is removed; the next message gets a new one

    # -- the actor's receive -------------------------------------------------------------------------

    def receive(self, message: Any) -> None:
        now = self.world.now
        if isinstance(message, MessagesPersisted | StoreFailed | SessionCreated):
            self.acknowledged(message.token)
        match message:
            case Loaded():
                self.on_loaded(message)
            case SessionCreated():
                pass
            case _ if self.state is None:
                self.stash.append(message)
            case StartTurn(text=text, turn_id=turn_id, policy=policy):
                self.feed(UserInput(turn_id=turn_id, text=text, policy=policy, now=now))
            case CancelTurn(reason=reason, turn_id=turn_id):
                self.feed(Cancel(reason=reason, turn_id=turn_id, now=now))
            case Outcome():
                self.on_wait(message)
            case MessagesPersisted(token=token):
                self.feed(Persisted(token=token, now=now))
            case StoreFailed(token=token, error=error):
                turn = self.state.turn
                if not (turn is not None and turn.phase == "persist_user" and token == turn.token):
                    # As SessionActor: memory and store disagree, so restart from the store.
                    self.crash(f"write {token!r} was not stored")
                    return
                self.feed(PersistFailed(token=token, error=error, now=now))
                self.world.store.reopen(self.session_id)  # as SessionActor: handled in place
                # (A failed CreateSession fails the running turn too: it is the session's write.)
                if turn is not None and self.state.turn is not turn and token != "create" and not token.startswith(f"{turn.turn_id}/"):
                    self.world.checker.violate(
                        "misattributed_failure", self.session_id, f"turn {turn.turn_id} was ended by the failed write {token!r} of another turn", now
                    )
            case TimerMessage(token=token) if token == ACK_CHECK:
                self.check_acks()
            case TimerMessage(idle_generation=generation) if generation >= 0:
                turn_idle = self.state.turn is None and not self.state.queued
                if generation == self.idle_generation and turn_idle:
                    self.passivate()
            case TimerMessage(token=token):
                self.handles.pop(token, None)
                self.feed(TimerFired(token=token, now=now))

    # -- writes and their acknowledgements (as SessionActor.write / acknowledged / check_acks) -----------

    def write(self, messages: tuple[ChatMessage, ...] | None, token: str, prompt: str = "") -> None:
        world = self.world
        incarnation = self.current
        assert incarnation is not None
        self.writes.append((world.now, token))
        world.store.submit(self.session_id, messages, token, incarnation, prompt)
        if not self.ack_check_armed:
            self.ack_check_armed = True
            world.send_after(incarnation, STORE_ACK_TIMEOUT, TimerMessage(token=ACK_CHECK))

    def acknowledged(self, token: str) -> None:
        for index, (_, pending) in enumerate(self.writes):
            if pending == token:
                del self.writes[index]
                return

    def check_acks(self) -> None:
        self.ack_check_armed = False
        if not self.writes:
            return
        sent, token = self.writes[0]
        age = self.world.now - sent
        if age >= STORE_ACK_TIMEOUT:
            self.crash(f"the store did not answer write {token!r}")
            return
        incarnation = self.current
        assert incarnation is not None
        self.ack_check_armed = True
        self.world.send_after(incarnation, max(STORE_ACK_TIMEOUT - age, STORE_ACK_TIMEOUT / 30), TimerMessage(token=ACK_CHECK))

    def publish(self, event: SessionEvent) -> None:
        world = self.world
        self.seq += 1
        event = msgspec.structs.replace(event, seq=self.seq, session_id=self.session_id)
        self.open_turns.note(event)
        if world.record:
            world.note(f"{self.session_id} emits {show(event)}")
        checker = world.checker
        checker.event(self.session_id, event, world.now, subscriber=self)
        if isinstance(event, UserMessageSaved):
            checker.user_message_durable(self.session_id, event.turn_id, world.store.user_texts.get(self.session_id, ()), world.now)
        if self.client is not None:
            self.client.on_event(event)

    # -- loading and recovery (as SessionActor.on_loaded) ------------------------------------------------

    def on_loaded(self, loaded: Loaded) -> None:
        world = self.world
        incarnation = self.current
        assert incarnation is not None
        if loaded.prompt is None:
            prompt = f"You are the simulated agent of session {self.session_id}."
            self.write(None, "create", prompt)
            self.state = SessionState(session_id=self.session_id, system_prompt=prompt)
            self.recover((), 0)
        else:
            messages = loaded.messages
            if self.bug == "skip_recovery_sanitize":
                transcript, settled = tuple(messages), 0
            else:
                transcript, settled = sanitize(messages)
            self.state = SessionState(session_id=self.session_id, system_prompt=loaded.prompt, transcript=transcript)
            if settled:
                synthetic = tuple(m for m in transcript if m not in messages)
                self.write(synthetic, "recover")
                if self.bug == "rerun_tools":
                    for message in synthetic:
                        if message.tool_call_id is not None:
                            world.checker.tool_ran(self.session_id, message.tool_call_id, world.now)
                            world.start_tool(incarnation, message.tool_call_id, self.config.tool_timeout)
            self.recover(transcript, settled)
        stash, self.stash = self.stash, []
        for message in stash:
            if self.current is not incarnation:
                break
            self.receive(message)
        if self.current is incarnation:
            self.arm_idle_timer()

    def recover(self, transcript: tuple[ChatMessage, ...], settled: int) -> None:
        """As SessionActor.recover: the same pure plan, from this world's open turns."""
        plan = plan_recovery(
            seen=self.open_turns.seen,
            open_turns=self.open_turns.snapshot(),
            transcript_open=bool(transcript) and transcript[-1].role in ("user", "tool"),
            settled=settled,
            policy=self.recovery,
        )
        if plan.announce:
            self.publish(SessionRecovered(settled_calls=settled, resumed=plan.resume is not None))
        for turn_id in plan.fail:
            self.publish(TurnFailed(turn_id=turn_id, error=RESTART_FAILED, kind="restarted"))
        if plan.resume is not None:
            self.resumes += 1
            self.feed(Resume(turn_id=plan.resume or f"{self.session_id}-resumed{self.resumes}", now=self.world.now))

    # -- the machine and its effects (as SessionActor.feed / execute) ---------------------------------------

    def feed(self, event: MachineInput) -> None:
        assert self.state is not None
        self.state, effects = step(self.state, event, self.config)
        for effect in effects:
            self.execute(effect)
        if self.state.turn is None:
            self.arm_idle_timer()
            transcript = self.state.transcript
            if transcript is not self.checked:  # checked once per version of the transcript
                self.checked = transcript
                self.world.checker.idle_transcript(self.session_id, transcript, self.world.now)

    def execute(self, effect: MachineEffect) -> None:
        world = self.world
        incarnation = self.current
        assert incarnation is not None and self.state is not None
        if world.record and not isinstance(effect, Emit):
            world.note(f"{self.session_id} does {show(effect)}")
        match effect:
            case Emit(event=event):
                self.publish(event)
            case Persist(token=token, messages=messages):
                if self.bug == "drop_settle" and "/settle/" in token:
                    world.note(f"{self.session_id}: planted bug: settle write {token!r} dropped")
                    return
                self.write(messages, token)
            case CallModel(token=token, messages=messages, use_tools=use_tools, timeout=timeout):
                checker = world.checker
                checker.model_called(self.session_id, messages, world.now)
                turn_id = token.split("/", 1)[0]
                checker.user_message_durable(self.session_id, turn_id, world.store.user_texts.get(self.session_id, ()), world.now, rule="model_before_ack")
                wait_id, entry = world.start_model(incarnation, use_tools, timeout)
                self.track(wait_id, entry, "model", token)
            case RunTool(call_id=call_id, timeout=timeout):
                durable = call_id in world.store.call_ids.get(self.session_id, ())
                world.checker.tool_ran(self.session_id, call_id, world.now, write_ahead=durable)
                wait_id, entry = world.start_tool(incarnation, call_id, timeout)
                self.track(wait_id, entry, "tool", call_id)
            case CancelModel(token=key) | CancelTool(call_id=key) | CancelTimer(token=key):
                pending = self.handles.pop(key, None)
                if pending is not None:
                    wait_id, entry = pending
                    world.cancel(entry)
                    if wait_id:
                        incarnation.cancelled_waits.add(wait_id)
                        self.waits.pop(wait_id, None)
            case StartTimer(token=token, delay=delay):
                self.handles[token] = (0, world.send_after(incarnation, delay, TimerMessage(token=token)))

    def track(self, wait_id: int, entry: int, kind: str, key: str) -> None:
        self.waits[wait_id] = (kind, key)
        self.handles[key] = (wait_id, entry)

    def on_wait(self, finished: Outcome) -> None:
        entry = self.waits.pop(finished.wait_id, None)
        if entry is None:
            return  # cancelled on purpose; the machine has moved on
        kind, key = entry
        self.handles.pop(key, None)
        now = self.world.now
        value = finished.value
        if kind == "model":
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
        elif finished.status == "ok" and isinstance(value, tuple):
            self.feed(ToolDone(call_id=key, content=value[0], ok=value[1], now=now))
        elif finished.status == "timeout":
            self.feed(ToolDone(call_id=key, content=f"[error] the tool did not finish in time and was stopped ({finished.error})", ok=False, now=now))
        else:
            self.feed(ToolDone(call_id=key, content=f"[error] the tool failed: {finished.error or finished.status}", ok=False, now=now))

    def arm_idle_timer(self) -> None:
        self.idle_generation += 1
        world = self.world
        if world.dice.fault("crash", "passivate", world.plan.crashes.passivate):
            incarnation = self.current
            assert incarnation is not None
            delay = world.dice.uniform("crash", 0.05, 2.0)
            world.send_after(incarnation, delay, TimerMessage(token="idle", idle_generation=self.idle_generation))
