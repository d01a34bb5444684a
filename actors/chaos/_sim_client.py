"""The simulated person at the other end of a session: messages, busy policies, cancels.

:class:`SimClient` draws its script from the ``workload`` stream of the dice (each message
beyond the first, each mid-turn send and each cancel is a maskable decision, so shrinking
can drop client actions too), sends the first message at once, the next one either a
moment later (mid-turn) or when the previous turn ended, and gives up waiting for a turn
that never shows its end after the turn deadline plus ten seconds.
"""

from __future__ import annotations

from typing import NamedTuple

from protocols._session import TERMINAL_EVENTS, BusyPolicy, CancelTurn, SessionEvent, StartTurn, TurnRejected

from ._sim_session import SimSession
from ._sim_world import World

_TURN_ENDS = frozenset((TurnRejected, *TERMINAL_EVENTS))
"""What the client waits for before it sends the next message (events are final structs: looked up
by exact type, cheaper than ``isinstance`` against each)."""


class MessageSpec(NamedTuple):
    """One user message a simulated client sends (a named tuple: a seed draws a few, and a frozen
    dataclass costs a ``object.__setattr__`` per field to make)."""

    turn_id: str
    text: str
    policy: BusyPolicy | None
    mid_turn: bool
    """Sent ``think`` seconds after the previous message, not after its turn ended."""
    think: float
    cancel_after: float | None
    """Seconds after sending it, the client cancels (None: never)."""
    cancel_any: bool
    """The cancel names no turn (whatever runs), instead of this message's turn."""


class SimClient:
    """Sends a session its messages, cancels some, and waits for each turn to end."""

    def __init__(self, world: World, session: SimSession) -> None:
        self.world = world
        self.session = session
        session.client = self
        self.specs = self._draw()
        self.sent = [False] * len(self.specs)
        self.index = {spec.turn_id: i for i, spec in enumerate(self.specs)}
        self.fallbacks: dict[int, int] = {}

    def _draw(self) -> list[MessageSpec]:
        dice, workload = self.world.dice, self.world.plan.workload
        sid = self.session.session_id
        count = workload.min_messages + dice.below("workload", workload.max_messages - workload.min_messages + 1)
        specs: list[MessageSpec] = []
        for i in range(count):
            mid_turn = dice.fault("workload", "mid_turn", workload.mid_turn)
            policy = dice.choice("workload", workload.policies)
            cancel = dice.fault("workload", "cancel", workload.cancel)
            cancel_after = dice.uniform("workload", 0.0, 2 * workload.model_s + workload.tool_s)
            cancel_any = dice.below("workload", 2) == 0
            think = dice.uniform("workload", 0.0, 2 * workload.model_s if mid_turn else 1.0)
            keep = i == 0 or dice.fault("workload", "message", 1.0)
            if keep:
                turn_id = f"{sid}-t{i}"
                specs.append(
                    MessageSpec(turn_id, f"message {i} of {sid}", policy, mid_turn and bool(specs), think, cancel_after if cancel else None, cancel_any)
                )
        return specs

    def begin(self) -> None:
        self.world.at(self.world.now, self.send, 0)

    def send(self, i: int) -> None:
        if self.sent[i]:
            return
        self.sent[i] = True
        world, spec = self.world, self.specs[i]
        entry = self.fallbacks.pop(i, None)
        if entry is not None:
            world.cancel(entry)
        world.deliver("user", 0.0, self.session.tell, StartTurn(text=spec.text, turn_id=spec.turn_id, policy=spec.policy))
        if spec.cancel_after is not None:
            cancel = CancelTurn(reason="cancelled by the simulated user", turn_id="" if spec.cancel_any else spec.turn_id)
            world.at(world.now + spec.cancel_after, world.deliver, "cancel", 0.0, self.session.tell, cancel)
        if i + 1 < len(self.specs):
            following = self.specs[i + 1]
            if following.mid_turn:
                world.at(world.now + following.think, self.send, i + 1)
            else:
                # If this turn's end never shows (a lost message), carry on anyway.
                wait = world.plan.workload.turn_timeout_s + 10.0
                self.fallbacks[i + 1] = world.at(world.now + wait, self.send, i + 1)

    def on_event(self, event: SessionEvent) -> None:
        if type(event) not in _TURN_ENDS:
            return
        i = self.index.get(event.turn_id)
        if i is None or i + 1 >= len(self.specs) or self.sent[i + 1]:
            return
        following = self.specs[i + 1]
        if not following.mid_turn:
            self.world.at(self.world.now + following.think, self.send, i + 1)
