"""A simulated session: the session interpreter the runtime runs, over the simulated world.

:class:`SimSession` is two things. It is the session's port in the world (store writes go to
:class:`~._sim_world.SimStore`, model calls and tools are simulated waits, timers are heap
entries, events go to the invariant checker and the client), and the part of its
supervisor (crash, restart within the session supervisor's intensity, passivation and
rehydration on demand) with the supervision events the kernel publishes, in its order.
Every session decision is made by the same ``SessionHost`` the session actor runs.

The person at the other end is :class:`~._sim_client.SimClient`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from protocols import ChatMessage, KeyLeased, LeaseKey, ReportKey, StartTurn, Token, WaitFinished
from protocols._session import ContextCompressed, SessionEvent, TurnCompleted, TurnStarted, UserMessageSaved
from protocols._store import AppendMessages, CreateSession, MessagesPersisted

from ..agent._machine import CallModel, Emit, MachineConfig, MachineEffect, Persist, RunTool, SessionState
from ..agent._recovery import OpenTurns
from ..agent._sanitize import sanitize
from ..agent._session_core import Loaded, Sanitizer
from ..agent._session_host import SessionHost
from ..agent._session_port import HostConfig, Write
from ..agent._session_timers import IdleTimer
from ..agent._turn_state import Compressing, PersistingSegment
from ._sim_memory import MemoryBug
from ._sim_pool import PoolBug
from ._sim_review import ReviewBug
from ._sim_supervisor import Incarnation, SimSupervised
from ._sim_trace import show
from ._sim_world import World

if TYPE_CHECKING:
    from ._sim_client import SimClient

CompressionBug = Literal["half_segment", "compressed_before_commit", "split_summary_pair"]
"""Compression bugs a test plants on purpose (with a plan that compresses, such as ``long``):

- ``half_segment``: the store commits a segment write in two transactions, its second half 0.5 s later.
- ``compressed_before_commit``: the session says ``ContextCompressed`` when it sends the segment write, not once it is committed.
- ``split_summary_pair``: a summary request leaves out the last tool result of the middle (a planner whose cut splits a call from its result).
"""
PlantedBug = Literal["drop_settle", "rerun_tools", "skip_recovery_sanitize", "ack_before_commit"] | PoolBug | CompressionBug | ReviewBug | MemoryBug
"""Bugs a test plants on purpose, to prove the checker catches them (the pool's: ``PoolBug``; compression's: ``CompressionBug``;
background reviews': ``ReviewBug``; memory providers': ``MemoryBug``):

- ``drop_settle``: synthetic results that settle a cancelled or failed turn are never written (the store answers as if they were).
- ``rerun_tools``: a recovering session runs the calls it finds unanswered again.
- ``skip_recovery_sanitize``: a recovering session keeps the transcript as loaded.
- ``ack_before_commit``: the store acknowledges a write when it arrives, not when committed.
"""


class SimHandle:
    __slots__ = ("entry", "wait_id")

    def __init__(self, wait_id: int, entry: int) -> None:
        self.wait_id, self.entry = wait_id, entry


class SimSession(SimSupervised):
    """The session's supervisor, its hub and its port, in the simulated world."""

    def __init__(
        self, world: World, session_id: str, config: MachineConfig, *, bug: PlantedBug | None = None, load_s: float = 0.005, restart_s: float = 0.001
    ) -> None:
        super().__init__(world, session_id, restart_s)
        sanitizer: Sanitizer = (lambda messages: (tuple(messages), 0)) if bug == "skip_recovery_sanitize" else sanitize
        self.config = HostConfig(session_id=session_id, model="sim", machine=config, recovery=world.plan.workload.recovery, sanitizer=sanitizer)
        self.bug, self.load_s = bug, load_s
        world.pool.bug = bug  # the pool acts on its own planted bugs (PoolBug) only
        self.client: SimClient | None = None
        self.seq = 0
        self.open_turns = OpenTurns()
        """As the session's hub: it outlives incarnations in this world."""
        self.checked: tuple[Any, ...] = ()
        self.interrupted: tuple[tuple[str, ...], int] | None = None
        """What the last process start settled in this session (``_sim_process``)."""

    def process_started(self, interrupted: tuple[tuple[str, ...], int] | None) -> None:
        self.interrupted = interrupted
        if interrupted is not None or self.mailbox:
            self.start(False)  # its client reconnects (or retries what it sent meanwhile)

    def new_host(self) -> SessionHost:
        return EagerCompressedHost(self.config, self) if self.bug == "compressed_before_commit" else SessionHost(self.config, self)

    def crash(self, reason: str) -> None:
        self._count_phase("crash")
        self._down()
        super().crash(reason)

    def process_died(self) -> None:
        self._count_phase("death")
        self._down()
        super().process_died()
        self.open_turns = OpenTurns()  # the hub lived in the dead process's memory

    def _down(self) -> None:
        """The actor dies or stops: its reviews end, its turn memory goes."""
        if self.world.reviews is not None:
            self.world.reviews.session_down(self.session_id)
        if self.world.memory is not None:
            self.world.memory.session_down(self.current)

    def _count_phase(self, what: str) -> None:
        """Count a crash (or process death) that lands inside a compression pass."""
        state = self.current.host.state if self.current is not None else None
        phase = state.turn.phase if state is not None and state.turn is not None else None
        if isinstance(phase, Compressing):
            self.world.checker.counts[f"{what}_compressing"] += 1
        elif isinstance(phase, PersistingSegment):
            self.world.checker.counts[f"{what}_persisting_segment"] += 1

    def _crash_soon(self, latest: float) -> None:
        """The ``compressing`` crash fault: an ``InjectCrash`` reaches this incarnation before ``latest``."""
        world, crashes = self.world, self.world.plan.crashes
        if self.crashes < crashes.max_per_session and world.dice.fault("crash", "compressing", crashes.compressing):
            world.at(world.dice.uniform("crash", world.now, latest), self._inject_crash, self.current)

    def _inject_crash(self, incarnation: Incarnation | None) -> None:
        if incarnation is not None and incarnation is self.current and self.crashes < self.world.plan.crashes.max_per_session:
            self.crash("InjectedCrash: chaos (mid-compression)")

    def load(self, incarnation: Incarnation) -> None:
        # As SessionActor: lift the fence, and load only after the store committed what was sent before (a barrier).
        world = self.world
        world.store.reopen(self.session_id)
        world.at(max(world.now, world.store.free_at) + world.dice.uniform("session", 0.0005, self.load_s), self._load_done, incarnation)

    def _load_done(self, incarnation: Incarnation) -> None:
        if incarnation is self.current:
            prompt, messages, turns = self.world.store.load(self.session_id)
            if prompt is None:
                loaded = Loaded(exists=False, prompt=f"You are the simulated agent of session {self.session_id}.")
            else:
                running = tuple(t for t, status in turns.items() if status == "running")
                settled = self.interrupted if not self.open_turns.seen else None  # told once, as SessionActor
                loaded = Loaded(exists=True, prompt=prompt, messages=tuple(messages), known_turns=tuple(turns), running=running, interrupted=settled)
                if self.world.store.checked:
                    self.world.checker.compression.loaded(self.session_id, messages, self.world.now)
            self.handle(incarnation, loaded, from_address=False)
            state = incarnation.host.state
            if self.world.store.checked and incarnation is self.current and state is not None:
                self.world.checker.compression.recovered(self.session_id, state.transcript, self.world.now)

    # -- the port (what SessionActor does with the kernel, done with the world) -----------------------

    @property
    def me(self) -> Incarnation | None:
        return self.current

    def now(self) -> float:
        return self.world.now

    def new_turn_id(self) -> str:
        return f"{self.session_id}-resumed{self.world.new_wait()}"

    def wall(self) -> float:
        return self.world.now

    def tell_store(self, command: Write) -> None:
        world, incarnation = self.world, self.current
        assert incarnation is not None
        if world.record:
            world.note(f"{self.session_id} does {show(command)}")
        if type(command) is CreateSession:
            world.store.submit(self.session_id, None, command.token, incarnation, command.system_prompt or "")
        elif type(command) is AppendMessages:
            if self.bug == "drop_settle" and isinstance(command.token, Token) and command.token.step == "settle":
                world.note(f"{self.session_id}: planted bug: settle write {command.token} dropped")
                world.store.reply(incarnation, MessagesPersisted(session_id=self.session_id, token=command.token))
                return
            world.store.submit(self.session_id, command.messages, command.token, incarnation, mark=command.turn, segment=command.segment)
            if command.segment is not None and world.plan.crashes.compressing:
                self._crash_soon(world.store.free_at)  # before it commits
            if self.bug == "rerun_tools" and command.token == Token(step="recover"):
                for message in command.messages:
                    world.checker.tool_ran(self.session_id, message.tool_call_id or "", world.now)
                    world.start_tool(incarnation, message.tool_call_id or "", self.config.machine.tool_timeout)
        else:
            raise NotImplementedError(f"the simulator does not model {type(command).__name__}")

    def reopen_writes(self) -> None:
        self.world.store.reopen(self.session_id)

    def lease(self, provider: str, request: LeaseKey) -> None:  # answered to ``request.reply_to``: this incarnation
        self.world.pool.tell(request, self.session_id)

    def report(self, provider: str, outcome: ReportKey) -> None:
        self.world.pool.tell(outcome, self.session_id)

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> SimHandle:
        world, checker = self.world, self.world.checker
        if world.record:
            world.note(f"{self.session_id} does {show(effect)} on {key.key_id}")
        summary = effect.token.step == "compress"
        if summary:
            if self.bug == "split_summary_pair":
                effect = _split_pair(effect)
            checker.compression.summary_requested(self.session_id, effect.token, effect.messages, world.now)
            if world.plan.crashes.compressing:
                self._crash_soon(world.now + world.plan.workload.model_s)  # while the summary is asked for
        incarnation, memory = self.current, world.memory
        assert incarnation is not None
        after, prefetch = 0.0, None
        sent: Sequence[ChatMessage] = effect.messages
        if memory is not None and not summary:  # the turn's recalled memory, fetched by its first call (``_sim_memory``)
            after, sent, prefetch = memory.prefetch(self, incarnation, effect)
        checker.model_called(self.session_id, sent, world.now)
        durable = world.store.user_texts.get(self.session_id, ())
        checker.user_message_durable(self.session_id, effect.turn_id, durable, world.now, rule="model_before_ack")
        prompt = sent if world.plan.workload.context_length else ()
        wait_id, entry = world.start_model(incarnation, effect.use_tools, effect.timeout, key, prompt, summary=summary, after=after)
        if prefetch is not None and memory is not None:
            memory.started(self, incarnation, prefetch, wait_id, effect.timeout)
        return SimHandle(wait_id, entry)

    def start_tool(self, effect: RunTool, turn_id: str) -> SimHandle:
        world = self.world
        if world.record:
            world.note(f"{self.session_id} does {show(effect)}")
        durable = effect.call_id in world.store.call_ids.get(self.session_id, ())
        world.checker.tool_ran(self.session_id, effect.call_id, world.now, write_ahead=durable)
        assert self.current is not None
        return SimHandle(*world.start_tool(self.current, effect.call_id, effect.timeout))

    def after(self, delay: float, message: object) -> SimHandle:
        assert self.current is not None
        return SimHandle(0, self.world.send_after(self.current, delay, message))

    def cancel(self, handle: SimHandle) -> None:
        self.world.cancel(handle.entry)
        if handle.wait_id and self.current is not None:
            self.current.cancelled_waits.add(handle.wait_id)

    def publish(self, event: SessionEvent) -> None:
        world = self.world
        self.seq += 1
        event = msgspec.structs.replace(event, seq=self.seq, session_id=self.session_id)
        self.open_turns.note(event)
        if world.record:
            world.note(f"{self.session_id} emits {show(event)}")
        checker = world.checker
        checker.event(self.session_id, event, world.now, subscriber=self)
        if world.reviews is not None:
            world.reviews.observe(self, event)
        if world.memory is not None and (type(event) is TurnStarted or (type(event) is TurnCompleted and event.text)):
            world.memory.told("turn_start" if type(event) is TurnStarted else "sync")  # as SessionActor.publish tells them
        if type(event) is UserMessageSaved:
            checker.user_message_durable(self.session_id, event.turn_id, world.store.user_texts.get(self.session_id, ()), world.now)
        if self.client is not None:
            self.client.on_event(event)

    def reload(self, why: str) -> None:
        self.crash(why)

    def passivate(self) -> None:
        self._down()
        self.stopped_normally()

    # -- background reviews (``_sim_review``) --------------------------------------------------------

    def tell(self, message: Any) -> None:
        reviews = self.world.reviews
        if reviews is not None:
            reviews.told(self, message)
            end = reviews.ends_at(self.session_id) if self.bug == "review_blocks_turn" and type(message) is StartTurn else None
            if end is not None:  # planted: the turn waits for the review
                self.world.at(end, super().tell, message)
                return
        super().tell(message)

    def handle(self, incarnation: Incarnation, message: Any, *, from_address: bool) -> None:
        world = self.world
        if world.reviews is not None and from_address and type(message) is StartTurn:
            world.checker.reviews.turn_received(self.session_id, message.turn_id, world.now)
        if world.memory is not None and type(message) is WaitFinished and message.tag == "model":
            world.checker.memory.model_outcome(self.session_id, message, world.now)
        SimSupervised.handle(self, incarnation, message, from_address=from_address)

    def idle(self, generation: int, state: SessionState) -> None:
        world = self.world
        if state.turn is None and state.transcript is not self.checked:  # once per version of the transcript
            self.checked = state.transcript
            world.checker.idle_transcript(self.session_id, state.transcript, world.now)
            if world.memory is not None:
                world.checker.memory.transcript(self.session_id, state.transcript, world.now)
        if world.dice.fault("crash", "passivate", world.plan.crashes.passivate):
            assert self.current is not None
            world.send_after(self.current, world.dice.uniform("crash", 0.05, 2.0), IdleTimer(generation=generation))


class EagerCompressedHost(SessionHost):
    """The planted bug ``compressed_before_commit``: a machine that says ``ContextCompressed`` as
    it sends the segment write (before the commit), and not again when the commit comes."""

    def execute(self, effect: MachineEffect) -> None:
        if isinstance(effect, Emit) and isinstance(effect.event, ContextCompressed):
            return
        super().execute(effect)
        if isinstance(effect, Persist) and effect.segment is not None:
            token, segment = effect.token, effect.segment
            event = ContextCompressed(
                turn_id=token.turn_id,
                tokens_before=segment.tokens_before,
                tokens_after=segment.tokens_after,
                summarised=segment.summarised,
                segment=token.attempt,
            )
            self.port.publish(event)


def _split_pair(effect: CallModel) -> CallModel:
    """The planted bug ``split_summary_pair``: the summary request without the middle's last tool result."""
    *system, body = effect.messages
    text = body.content or ""
    cut = text.rfind("\n\n[result of ")
    if cut < 0:
        return effect
    return msgspec.structs.replace(effect, messages=(*system, msgspec.structs.replace(body, content=text[:cut])))
