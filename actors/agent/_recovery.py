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

KNOWN_LIMIT = 256
"""Turn ids a session's stream remembers (as ``_machine.RECENT_TURNS``)."""
_ANNOUNCE = frozenset({TurnStarted, TurnQueued, TurnRejected})
"""The events a turn id first appears in."""
_END = frozenset({TurnCompleted, TurnFailed, TurnCancelled, TurnRejected})
"""The events that close a turn."""


class OpenTurns:
    """Turns announced on a session's stream that have not ended yet, in order."""

    def __init__(self) -> None:
        self.seen = False
        self._open: dict[str, bool] = {}
        """turn id -> started (False: only queued)."""
        self._known: dict[str, None] = {}
        """Every turn id announced on the stream, the latest ``KNOWN_LIMIT`` (insertion order)."""

    def note(self, event: SessionEvent) -> None:
        self.seen = True
        kind = type(event)  # events are final structs: one type lookup instead of five isinstance checks
        if kind not in _ANNOUNCE and kind not in _END:
            return  # deltas, tools, saves: most of a stream
        if kind in _ANNOUNCE and event.turn_id not in self._known:
            self._known[event.turn_id] = None  # a turn id appears first in one of these
            if len(self._known) > KNOWN_LIMIT:
                del self._known[next(iter(self._known))]
        if kind is TurnStarted:
            self._open[event.turn_id] = True
        elif kind is TurnQueued:
            self._open.setdefault(event.turn_id, False)
        elif event.turn_id:  # one of _END
            self._open.pop(event.turn_id, None)

    def snapshot(self) -> tuple[tuple[str, bool], ...]:
        return tuple(self._open.items())

    def known(self) -> tuple[str, ...]:
        """Turn ids this stream has announced (started, queued, ended or rejected): a restarted
        session never runs one of them again."""
        return tuple(self._known)


@dataclasses.dataclass(frozen=True)
class RecoveryPlan:
    announce: bool
    """Publish ``SessionRecovered``."""
    resume: str | None
    """Continue this turn (its user message is stored) with a model call."""
    fail: tuple[str, ...]
    """Fail these turns (``""``: the unknown open turn found in the transcript)."""


def plan_recovery(
    *,
    seen: bool,
    open_turns: tuple[tuple[str, bool], ...],
    transcript_open: bool,
    settled: int,
    policy: Literal["resume", "fail"],
    stored: tuple[str, ...] | None = None,
) -> RecoveryPlan:
    """``stored``: the turns the store shows running, when it records turns (None: an older
    store, where only the transcript's end hints at an open turn)."""
    if seen:
        running = [turn_id for turn_id, started in open_turns if started]
        queued = [turn_id for turn_id, started in open_turns if not started]
        resume = running[0] if running and transcript_open and policy == "resume" else None
        fail = tuple(t for t in running if t != resume) + tuple(queued)
        return RecoveryPlan(announce=bool(settled or open_turns), resume=resume, fail=fail)
    if stored is not None:  # the store names the open turns
        if policy == "resume" and stored and transcript_open:
            return RecoveryPlan(announce=True, resume=stored[-1], fail=stored[:-1])
        return RecoveryPlan(announce=bool(settled or stored), resume=None, fail=stored)
    if policy == "resume" and transcript_open:
        return RecoveryPlan(announce=True, resume="", fail=())
    return RecoveryPlan(announce=bool(settled or transcript_open), resume=None, fail=("",) if transcript_open else ())
