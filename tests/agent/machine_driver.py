"""Helpers to drive the pure turn machine in tests."""

from __future__ import annotations

from typing import Any

from actors.agent._machine import (
    MachineConfig,
    MachineEffect,
    MachineInput,
    SessionState,
    step,
)
from actors.agent._plan import ToolTraits
from protocols import ToolCall

TRAITS = {
    "read_file": ToolTraits(read_only=True, path_argument="path"),
    "write_file": ToolTraits(path_argument="path"),
    "terminal": ToolTraits(),
}


class Driver:
    """Feeds inputs one at a time and keeps every effect for assertions."""

    def __init__(self, config: MachineConfig | None = None) -> None:
        self.config = config or MachineConfig(traits=TRAITS)
        self.state = SessionState(session_id="s1", system_prompt="You are a test agent.")
        self.effects: list[MachineEffect] = []

    def feed(self, event: MachineInput) -> list[MachineEffect]:
        self.state, effects = step(self.state, event, self.config)
        self.effects.extend(effects)
        return effects

    def answer(self, reply: MachineInput) -> list[MachineEffect]:
        """Feed a final model reply, then the ack of its durable answer (the turn ends there)."""
        from actors.agent._machine import Persist, Persisted

        effects = self.feed(reply)
        acked = [p for p in self.of(Persist, effects) if p.acked]
        return effects + (self.feed(Persisted(token=acked[0].token)) if acked else [])

    def of(self, kind: type[Any], effects: list[MachineEffect] | None = None) -> list[Any]:
        return [e for e in (self.effects if effects is None else effects) if isinstance(e, kind)]


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def events(effects: list[MachineEffect]) -> list[Any]:
    """The session events among ``effects``, in order."""
    from actors.agent._machine import Emit

    return [e.event for e in effects if isinstance(e, Emit)]
