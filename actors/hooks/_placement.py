"""Where a plugin's callbacks run, pure: the shared lane, a lane of its own, or nowhere.

Plugins that have always answered well share one lane (one thread): a call to five of them is
one hand-off there and one back, their callbacks run one after the other in alphabetical order.
A plugin leaves the shared lane for good the first time it misbehaves: a callback that runs
past ``SHARED_BUDGET`` (slow: the others would wait behind it), raises, floods, or misses the
call's deadline. It then runs on a lane of its own (a thread the plugin's actor owns), as every
plugin did before. Gateway hooks always have their own lane: their handlers are often slow (a
``BOOT.md`` routine runs an agent turn).

A plugin that hangs leaves its thread stuck in its callback (Python cannot stop a thread):
the lane is abandoned and the plugin reloaded on a fresh one. Abandoned threads that are
still stuck are bounded: at ``MAX_STUCK_LANES`` of them the plugin is disabled, not reloaded.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

SHARED_BUDGET = 0.005
"""Seconds one callback may run in the shared lane; past that the lane is handed over to it
(the others go on a fresh shared lane) and the plugin runs on a lane of its own from then on."""
MAX_STUCK_LANES = 3
"""Abandoned lanes of one plugin whose thread is still stuck in its callback; at this many the
plugin is disabled (no reload: each reload would leak one more thread)."""

Place = Literal["shared", "own", "off"]
Fault = Literal["timeout", "raised", "flood"]


@dataclasses.dataclass(frozen=True, slots=True)
class Standing:
    """What placement needs to know of a plugin."""

    gateway: bool
    loaded: bool
    """Its actor has loaded it (before that its calls wait on its own lane for the load)."""
    behaved: bool = True
    """It has never been slow, raised, flooded or missed a deadline."""
    disabled: str | None = None


def place(standing: Standing) -> Place:
    """Where the plugin's next call runs."""
    if standing.disabled is not None:
        return "off"
    if standing.gateway or not standing.loaded or not standing.behaved:
        return "own"
    return "shared"


def stalled(running_for: float, budget: float = SHARED_BUDGET) -> bool:
    """Whether a callback running in the shared lane holds it too long: the lane is handed over."""
    return running_for >= budget


def still_behaved(behaved: bool, fault: Fault | None, took: float, budget: float = SHARED_BUDGET) -> bool:
    """After an answer (or its absence): whether the plugin may stay on (or join) the shared lane."""
    return behaved and fault is None and took < budget


def after_fault(hung: bool, stuck_lanes: int, cap: int = MAX_STUCK_LANES) -> tuple[Literal["reload", "disable"], str | None]:
    """What follows a fault: reload the plugin on a fresh lane of its own, or, when it ``hung``
    and ``stuck_lanes`` (its abandoned threads still stuck, this call's one included) reached
    ``cap``, disable it."""
    if hung and stuck_lanes >= cap:
        return "disable", (
            f"disabled: it hung in {stuck_lanes} calls whose threads are still stuck (the cap is {cap}); fix the plugin, then restart hermes to load it again"
        )
    return "reload", None


def budget_for(deadline: float, budget: float = SHARED_BUDGET) -> float:
    """The shared lane's budget for a call with ``deadline``: a quarter of it at most, so a
    plugin that hangs in the shared lane is found while the others still have time to answer."""
    return min(budget, deadline / 4)
