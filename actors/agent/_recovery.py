"""What a restarted session does about turns that were open: pure, shared with the simulator.

Two sources of knowledge. In the same process the session's hub outlives the actor and
knows which turns never ended (:class:`OpenTurns`): that is exact. After a process restart
the hub is new, and only the stored transcript is left: a transcript that ends in a user or
tool message is taken as an open turn (it may have ended failed or cancelled; terminal
events are not stored).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from protocols._session import SessionEvent, TurnCancelled, TurnCompleted, TurnFailed, TurnQueued, TurnRejected, TurnStarted


class OpenTurns:
    """Turns announced on a session's stream that have not ended yet, in order."""

    def __init__(self) -> None:
        self.seen = False
        self._open: dict[str, bool] = {}
        """turn id -> started (False: only queued)."""

    def note(self, event: SessionEvent) -> None:
        self.seen = True
        if isinstance(event, TurnStarted):
            self._open[event.turn_id] = True
        elif isinstance(event, TurnQueued):
            self._open.setdefault(event.turn_id, False)
        elif isinstance(event, TurnCompleted | TurnFailed | TurnCancelled | TurnRejected) and event.turn_id:
            self._open.pop(event.turn_id, None)

    def snapshot(self) -> tuple[tuple[str, bool], ...]:
        return tuple(self._open.items())


@dataclasses.dataclass(frozen=True)
class RecoveryPlan:
    announce: bool
    """Publish ``SessionRecovered``."""
    resume: str | None
    """Continue this turn (its user message is stored) with a model call."""
    fail: tuple[str, ...]
    """Fail these turns (``""``: the unknown open turn found in the transcript)."""


def plan_recovery(
    *, seen: bool, open_turns: tuple[tuple[str, bool], ...], transcript_open: bool, settled: int, policy: Literal["resume", "fail"]
) -> RecoveryPlan:
    if seen:
        running = [turn_id for turn_id, started in open_turns if started]
        queued = [turn_id for turn_id, started in open_turns if not started]
        resume = running[0] if running and transcript_open and policy == "resume" else None
        fail = tuple(t for t in running if t != resume) + tuple(queued)
        return RecoveryPlan(announce=bool(settled or open_turns), resume=resume, fail=fail)
    if policy == "resume" and transcript_open:
        return RecoveryPlan(announce=True, resume="", fail=())
    return RecoveryPlan(announce=bool(settled or transcript_open), resume=None, fail=("",) if transcript_open else ())
