"""A plugin's ``pre_tool_call`` hook in the simulator: what each tool call's hook costs and decides.

The hook's behaviour is drawn from the plan's ``HookFaults`` (stream ``hooks``); what the
dispatcher makes of the answer is decided by the real dispatcher's pure rules
(``actors.hooks._decide``: ``skip_reason``, ``hook_cost``, ``first_block``). The cost is added
to the tool call's wait, before the tool runs, so the tool timeout bounds hook and tool
together, as in the runtime.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from protocols._faults import HookFaults

from ..hooks._decide import MAX_ANSWER_CHARS, Answer, first_block, hook_cost, skip_reason
from ._faults import Dice

GARBAGE: tuple[Any, ...] = (42, [1, 2], {"decision": "maybe"}, {"action": None}, b"\x00\xff", 3.5)
"""Answers that are no decision: never a block, never a fault."""


@dataclasses.dataclass(frozen=True, slots=True)
class HookCall:
    cost_s: float
    """What the call waited for the plugin (at most the deadline)."""
    skipped: str | None
    """Why the plugin was skipped (``timeout`` / ``raised`` / ``flood``), None if its answer was used."""
    blocked: str | None
    """The block message, when the answer blocked the tool (a garbage answer never does)."""


def draw_hook_call(dice: Dice, faults: HookFaults) -> HookCall:
    """One ``pre_tool_call`` of a plugin whose behaviour the plan's faults draw."""
    latency = dice.stream("hooks").uniform(0.0, 0.002)
    answer: tuple[tuple[Any, ...], str | None] = ((None,), None)
    if dice.fault("hooks", "raise", faults.raises):
        answer = ((), "RuntimeError: the simulated hook raised")
    elif dice.fault("hooks", "hang", faults.hang):
        latency = math.inf
    elif dice.fault("hooks", "garbage", faults.garbage):
        rng = dice.stream("hooks")
        value = "g" * (MAX_ANSWER_CHARS + 1) if rng.random() < 0.5 else rng.choice(GARBAGE)
        answer = ((value,), None)
    elif dice.fault("hooks", "slow", faults.slow):
        latency = dice.stream("hooks").uniform(0.0, faults.slow_max_s)
    answered = latency <= faults.deadline_s
    reason = skip_reason(answer if answered else None)
    block = first_block([Answer("sim-plugin", v) for v in answer[0]]) if reason is None else None
    return HookCall(cost_s=hook_cost(latency, faults.deadline_s), skipped=reason, blocked=str(block.value) if block is not None else None)
