"""A simulated session: the session interpreter the runtime runs, over the simulated world.

:class:`SimSession` is two things. It is the session's port in the world (store writes go to
:class:`~._sim_world.SimStore`, model calls and tools are simulated waits, timers are heap
entries, events go to the invariant checker and the client), and the part of its
supervisor (crash, restart within the session supervisor's intensity, passivation and
rehydration on demand) with the supervision events the kernel publishes, in its order.
Every session decision is made by the same ``SessionHost`` the session actor runs. What its
effects do in the world is in ``_sim_effects``, its load in ``_sim_load``, the bugs a test
plants in it in ``_sim_bugs``.

The person at the other end is :class:`~._sim_client.SimClient`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from protocols import KeyLeased, LeaseKey, ReportKey, StartTurn, WaitFinished
from protocols._session import SessionEvent, TurnCompleted, TurnStarted, UserMessageSaved

from ..agent._machine import CallModel, MachineConfig, RunTool, SessionState
from ..agent._recovery import OpenTurns
from ..agent._session_host import SessionHost
from ..agent._session_port import HostConfig
from ..agent._session_timers import IdleTimer
from ._sim_bugs import EagerCompressedHost, PlantedBug, planted_sanitizer
from ._sim_compress_crashes import count_phase
from ._sim_effects import SimHandle, start_model_call, start_tool_call, submit_write
from ._sim_load import start_load
from ._sim_supervisor import Incarnation, SimSupervised
from ._sim_trace import show
from ._sim_world import World

if TYPE_CHECKING:
    from ._sim_client import SimClient


class SimSession(SimSupervised):
    """The session's supervisor, its hub and its port, in the simulated world."""

    def __init__(
        self, world: World, session_id: str, config: MachineConfig, *, bug: PlantedBug | None = None, load_s: float = 0.005, restart_s: float = 0.001
    ) -> None:
        super().__init__(world, session_id, restart_s)
        sanitizer = planted_sanitizer(bug)
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
        count_phase(self, "crash")
        self._down()
        super().crash(reason)

    def process_died(self) -> None:
        count_phase(self, "death")
        self._down()
        super().process_died()
        self.open_turns = OpenTurns()  # the hub lived in the dead process's memory

    def _down(self) -> None:
        """The actor dies or stops: its reviews end, its turn memory goes."""
        if self.world.reviews is not None:
            self.world.reviews.session_down(self.session_id)
        if self.world.memory is not None:
            self.world.memory.session_down(self.current)

    def load(self, incarnation: Incarnation) -> None:
        start_load(self, incarnation)

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

    tell_store = submit_write  # (the function itself, not a method that calls it: every write comes here)

    def reopen_writes(self) -> None:
        self.world.store.reopen(self.session_id)

    def lease(self, provider: str, request: LeaseKey) -> None:  # answered to ``request.reply_to``: this incarnation
        self.world.pool.tell(request, self.session_id)

    def report(self, provider: str, outcome: ReportKey) -> None:
        self.world.pool.tell(outcome, self.session_id)

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> SimHandle:
        return start_model_call(self, effect, key)

    def start_tool(self, effect: RunTool, turn_id: str) -> SimHandle:
        return start_tool_call(self, effect)

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

    def observe(self, message: Any, from_address: bool) -> None:
        world = self.world
        if world.reviews is not None and from_address and type(message) is StartTurn:
            world.checker.reviews.turn_received(self.session_id, message.turn_id, world.now)
        if world.memory is not None and type(message) is WaitFinished and message.tag == "model":
            world.checker.memory.model_outcome(self.session_id, message, world.now)

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
