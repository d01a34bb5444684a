"""A simulated session's address and supervisor: incarnations, crashes, restarts, passivation.

What the kernel does for a session actor, done in the simulated world: messages told to
the address wait in a restart buffer while no incarnation runs; a crash starts a new
incarnation after ``restart_s`` unless the session supervisor's intensity
(``SESSIONS_INTENSITY``) is exceeded; replies and wait outcomes addressed to a dead
incarnation are dropped; the supervision events are published in the kernel's order.
Each incarnation runs its own ``SessionHost``; the port it talks to is the subclass
(:class:`~._sim_session.SimSession`).
"""

from __future__ import annotations

import collections
from typing import Any

from protocols import ChildExited, ChildRestarted, ChildStarted, Escalated, Token
from protocols._store import StoreFailed

from ..agent._session_host import SessionHost
from ..agent._tree import SESSIONS_INTENSITY
from ._sim_trace import show
from ._sim_world import World


class Incarnation:
    """One life of a session actor: replies and wait outcomes are addressed to it."""

    __slots__ = ("cancelled_waits", "host", "number", "session", "waits_cancelled")

    def __init__(self, session: SimSupervised, number: int, host: SessionHost) -> None:
        self.session = session
        self.number = number
        self.host = host
        self.waits_cancelled = False
        """True once it died: its waits and timers are cancelled, nothing reaches it."""
        self.cancelled_waits: set[int] = set()


class SimSupervised:
    """A session's address and the part of its supervisor that restarts it."""

    def __init__(self, world: World, session_id: str, restart_s: float) -> None:
        self.world, self.session_id, self.path = world, session_id, f"/sessions/{session_id}"
        self.restart_s = restart_s
        self.current: Incarnation | None = None
        self.restarting = False
        self.mailbox: collections.deque[Any] = collections.deque()
        """Messages told to the address while no incarnation runs (the restart buffer)."""
        self.starts = self.crashes = 0
        self.restart_times: collections.deque[float] = collections.deque()
        self.restart_entry = 0
        """The heap entry of a restart not yet made (cancelled if the process dies first)."""

    def new_host(self) -> SessionHost:
        raise NotImplementedError

    def load(self, incarnation: Incarnation) -> None:
        """Start the incarnation's load (a simulated reader wait)."""
        raise NotImplementedError

    def tell(self, message: Any) -> None:
        """A message told to the session's address (a client's StartTurn / CancelTurn)."""
        if self.world.record:
            self.world.note(f"{self.session_id} <- {show(message)}")
        incarnation = self.current
        if incarnation is None:
            self.mailbox.append(message)
            if not self.restarting and not self.world.down:
                self.start(False)  # started, or rehydrated, on demand
            return
        self.handle(incarnation, message, True)

    def on_message(self, incarnation: Incarnation, message: Any) -> None:
        """A reply, wait outcome or timer addressed to one incarnation."""
        if incarnation is not self.current:
            return  # to a dead incarnation: dropped and counted by the real reactor
        if self.world.record:
            self.world.note(f"{self.session_id} <- {show(message)}")
        self.handle(incarnation, message, False)

    def observe(self, message: Any, from_address: bool) -> None:
        """What a plan's reviews or memory provider learn of a message before it is handled (a subclass's)."""

    def handle(self, incarnation: Incarnation, message: Any, from_address: bool) -> None:
        world = self.world
        if world.reviews is not None or world.memory is not None:  # (one test, not a call: every message comes here)
            self.observe(message, from_address)
        crashes = world.plan.crashes
        if crashes.session > 0 and self.crashes < crashes.max_per_session and world.dice.fault("crash", "session", crashes.session):
            if from_address:
                self.mailbox.appendleft(message)  # InjectCrash was ahead of it: the next incarnation gets it
            self.crash("InjectedCrash: chaos")
            return
        if type(message) is not StoreFailed:
            incarnation.host.receive(message)
            return
        turn = incarnation.host.state.turn if incarnation.host.state is not None else None
        incarnation.host.receive(message)
        if turn is not None and self.current is incarnation:
            after, token = incarnation.host.state, message.token
            if after is not None and after.turn is not turn and token != Token(step="create") and getattr(token, "turn_id", "") != turn.turn_id:
                world.checker.violate(
                    "misattributed_failure", self.session_id, f"turn {turn.turn_id} was ended by the failed write {token} of another turn", world.now
                )

    def start(self, restarted: bool) -> None:
        world = self.world
        self.starts += 1
        incarnation = self.current = Incarnation(self, self.starts, self.new_host())
        self.restarting = False
        event: Any = (
            ChildRestarted(path=self.path, incarnation=self.starts, restarts=self.starts - 1)
            if restarted
            else ChildStarted(path=self.path, incarnation=self.starts)
        )
        if world.record:
            world.note(f"{self.session_id}: {type(event).__name__} incarnation {self.starts}")
        world.checker.supervision(event, world.now)
        if restarted:  # the kernel publishes the exit that caused a restart after the restart itself
            world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts - 1, kind="crashed"), world.now)
        self.load(incarnation)
        while self.mailbox and self.current is incarnation:
            self.handle(incarnation, self.mailbox.popleft(), True)

    def die(self) -> None:
        assert self.current is not None
        self.current.waits_cancelled = True  # the reactor cancels every wait of a dead incarnation
        self.current = None

    def crash(self, reason: str) -> None:
        world, now = self.world, self.world.now
        self.crashes += 1
        world.note(f"{self.session_id}: CRASH ({reason})")
        self.die()
        self.restart_times.append(now)
        while self.restart_times and now - self.restart_times[0] > SESSIONS_INTENSITY.within:
            self.restart_times.popleft()
        if len(self.restart_times) > SESSIONS_INTENSITY.max_restarts:
            # The session supervisor gives up; its parent restarts it without its dynamic
            # children, whose addresses close: waiting messages are dead letters.
            world.checker.supervision(Escalated(path="/sessions", reason=f"{self.path} crashed too often"), now)
            world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts, kind="crashed"), now)
            self.mailbox.clear()
            self.starts = 0
            return
        self.restarting = True
        self.restart_entry = world.at(now + self.restart_s, self.start, True)

    def process_died(self) -> None:
        """Killed with the whole process: no exit runs, what only memory held is gone."""
        if self.current is not None or self.restarting:
            self.world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts, kind="crashed"), self.world.now)
        if self.current is not None:
            self.die()
        if self.restarting:
            self.world.cancel(self.restart_entry)
        self.mailbox.clear()
        self.restart_times.clear()
        self.restarting, self.starts = False, 0

    def stopped_normally(self) -> None:
        """Passivated: the address is removed; the next message gets a new one."""
        world = self.world
        world.note(f"{self.session_id}: passivated (idle)")
        self.die()
        world.checker.supervision(ChildExited(path=self.path, child_id=self.session_id, incarnation=self.starts, kind="normal"), world.now)
        self.starts = 0
