"""Crashes that land inside a compression pass, in the simulator.

The ``compressing`` crash fault (``CrashFaults.compressing``) sends an ``InjectCrash`` to a
session while its summary call is in flight or before its segment write commits
(:func:`crash_soon`, from the session's effects); every crash and process death is counted by
the compression phase it lands in (:func:`count_phase`), so a sweep shows it reached them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agent._turn_state import Compressing, PersistingSegment
from ._sim_supervisor import Incarnation

if TYPE_CHECKING:
    from ._sim_session import SimSession


def count_phase(session: SimSession, what: str) -> None:
    """Count a crash (or process death) that lands inside a compression pass."""
    state = session.current.host.state if session.current is not None else None
    phase = state.turn.phase if state is not None and state.turn is not None else None
    if isinstance(phase, Compressing):
        session.world.checker.counts[f"{what}_compressing"] += 1
    elif isinstance(phase, PersistingSegment):
        session.world.checker.counts[f"{what}_persisting_segment"] += 1


def crash_soon(session: SimSession, latest: float) -> None:
    """The ``compressing`` crash fault: an ``InjectCrash`` reaches this incarnation before ``latest``."""
    world, crashes = session.world, session.world.plan.crashes
    if session.crashes < crashes.max_per_session and world.dice.fault("crash", "compressing", crashes.compressing):
        world.at(world.dice.uniform("crash", world.now, latest), _inject_crash, session, session.current)


def _inject_crash(session: SimSession, incarnation: Incarnation | None) -> None:
    if incarnation is not None and incarnation is session.current and session.crashes < session.world.plan.crashes.max_per_session:
        session.crash("InjectedCrash: chaos (mid-compression)")
