"""Background reviews in the simulator: when a session forks one, how it ends, what it may not do.

A session's events are counted as ``SessionEvents.count_for_nudges`` counts them, and the
decision is the runtime's own: :func:`~actors.agent._nudges.plan_after_turn` at the plan's
intervals (``ReviewFaults``), then :func:`~actors.agent._nudges.admit_review` (one review per
session at a time); counters are seeded per incarnation with :func:`~actors.agent._nudges.seeded`
from the loaded transcript, as a restarted actor does. A review runs beside the session
(another session in the runtime: here a heap entry) and ends one way of four, drawn from the
plan (stream ``reviews``): it saves and ends ``ok``; its model call fails at once; its child
crashes part way; it hangs and its deadline stops it. Each end is a ``ReviewFinished`` on the
user's stream (``ok`` or not). The review's child session stores its prompt and, when it
ends ``ok``, its answer, in its own session. When the session's actor dies or passivates its
waits are cancelled, the review's with them: it ends then, with no event.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from protocols import ChatMessage, ReviewFinished, SessionEvent, StartTurn, ToolStarted, TurnStarted
from protocols._session import TERMINAL_EVENTS

from ..agent._nudges import (
    MEMORY_TOOL,
    SKILL_TOOL,
    NudgeCounters,
    NudgeSettings,
    ReviewKind,
    admit_review,
    earlier_user_turns,
    opens_user_turn,
    plan_after_turn,
    seeded,
    turn_facts,
)
from ..agent._review_prompts import review_prompt
from ._sim_world import TOOL_NAMES

if TYPE_CHECKING:
    from ._sim_session import SimSession
    from ._sim_supervisor import Incarnation
    from ._sim_world import World

ReviewBug = Literal["review_overlap", "review_no_deadline", "review_blocks_turn", "review_writes_user_session"]
"""Review bugs a test plants on purpose (with the ``review`` preset):

- ``review_overlap``: a review due while one runs starts anyway (no ``admit_review``).
- ``review_no_deadline``: a hung review is stopped only long after its deadline.
- ``review_blocks_turn``: a session holds a StartTurn that arrives while its review runs until the review ends.
- ``review_writes_user_session``: a review stores its messages in the user's session instead of its own.
"""
AVAILABLE = (*TOOL_NAMES, MEMORY_TOOL, SKILL_TOOL)
"""The tools the simulated sessions have, as the nudge planner sees them."""


@dataclasses.dataclass(slots=True)
class _Review:
    review_id: str
    turn_id: str
    kind: ReviewKind
    incarnation: Incarnation
    entry: int = 0
    ends: float = 0.0


class SimReviews:
    """Every session's nudge counters and running reviews, in one world."""

    def __init__(self, world: World) -> None:
        self.world = world
        faults = self.faults = world.plan.reviews
        self.settings = NudgeSettings(memory_interval=faults.memory_interval, min_turns=faults.min_turns, skill_interval=faults.skill_interval)
        self.counters: dict[str, tuple[Incarnation, NudgeCounters]] = {}
        self.facts: dict[tuple[str, str], tuple[bool, set[str]]] = {}
        self.running: dict[str, list[_Review]] = {}
        self.bug: ReviewBug | None = None

    def observe(self, session: SimSession, event: SessionEvent) -> None:
        """One event the session published (its nudge counting, as the session actor's)."""
        sid = session.session_id
        if isinstance(event, TurnStarted):
            self.facts[sid, event.turn_id] = (opens_user_turn(event.text), set())
        elif isinstance(event, ToolStarted) and (sid, event.turn_id) in self.facts:
            self.facts[sid, event.turn_id][1].add(event.name)
        elif isinstance(event, TERMINAL_EVENTS) and (sid, event.turn_id) in self.facts:
            user_turn, used = self.facts.pop((sid, event.turn_id))
            incarnation = session.current
            state = incarnation.host.state if incarnation is not None else None
            if incarnation is None or state is None:
                return
            known = self.counters.get(sid)
            if known is None or known[0] is not incarnation:  # a new actor seeds its counters from the transcript
                counters = seeded(earlier_user_turns(state.transcript, user_turn), self.settings)
            else:
                counters = known[1]
            counters, due = plan_after_turn(counters, turn_facts(event, user_turn, used), self.settings, AVAILABLE)
            self.counters[sid] = (incarnation, counters)
            mine = self.running.setdefault(sid, [])
            plan = due if self.bug == "review_overlap" else admit_review(due, len(mine))
            if plan is not None:
                self._start(session, _Review(review_id=f"{sid}.review-{counters.user_turns}", turn_id=event.turn_id, kind=plan.kind, incarnation=incarnation))

    def _start(self, session: SimSession, review: _Review) -> None:
        world, faults, dice = self.world, self.faults, self.world.dice
        sid = session.session_id
        self.running[sid].append(review)
        world.checker.reviews.started(sid, review.review_id, world.now, faults.deadline_s)
        world.note(f"{sid}: review {review.review_id} ({review.kind}) forked after {review.turn_id}")
        self._write(sid, review, ChatMessage(role="user", content=f"{review_prompt(review.kind)}\n[{review.review_id}]"))  # durable before its turn
        work = dice.uniform("reviews", 0.01, max(0.01, faults.work_max_s))
        if dice.fault("reviews", "model_error", faults.model_error):
            end, ok, summary = dice.uniform("reviews", 0.001, 0.05), False, "the review failed: simulated HTTP 500"
        elif dice.fault("reviews", "crash", faults.crash):
            end, ok, summary = dice.uniform("reviews", 0.0, work), False, "the review failed: InjectedCrash: chaos (review child)"
        elif dice.fault("reviews", "hang", faults.hang):
            late = 10.0 if self.bug == "review_no_deadline" else 1.0
            end, ok, summary = faults.deadline_s * late, False, f"the review ran past its {faults.deadline_s:g} s deadline and was stopped"
        else:
            end, ok, summary = min(work, faults.deadline_s), True, "background review: nothing to save"
        review.ends = world.now + end
        review.entry = world.at(review.ends, self._finished, session, review, ok, summary)

    def _finished(self, session: SimSession, review: _Review, ok: bool, summary: str) -> None:
        world, sid = self.world, session.session_id
        self.running[sid].remove(review)
        world.checker.reviews.ended(sid, review.review_id, world.now, "ok" if ok else "failed")
        if ok:
            self._write(sid, review, ChatMessage(role="assistant", content=f"{summary} [{review.review_id}]"))
        if review.incarnation is session.current:
            session.publish(ReviewFinished(turn_id=review.turn_id, review_session_id=review.review_id, kind=review.kind, summary=summary, ok=ok))

    def _write(self, session_id: str, review: _Review, message: ChatMessage) -> None:
        """The review's child session stores a message of its own (its session, never the user's)."""
        target = session_id if self.bug == "review_writes_user_session" else review.review_id
        self.world.checker.reviews.wrote(session_id, review.review_id, message)
        self.world.store.commit_now(target, (message,))

    def session_down(self, session_id: str) -> None:
        """The session's actor died or stopped: its waits, the reviews among them, are cancelled."""
        world = self.world
        for review in self.running.pop(session_id, []):
            world.cancel(review.entry)
            world.checker.reviews.ended(session_id, review.review_id, world.now, "cancelled")

    def ends_at(self, session_id: str) -> float | None:
        """When the session's running reviews will have ended (for the planted ``review_blocks_turn``)."""
        ends = [r.ends for r in self.running.get(session_id, [])]
        return max(ends) if ends else None

    def told(self, session: SimSession, message: object) -> None:
        if type(message) is StartTurn and session.current is not None and self.running.get(session.session_id):
            self.world.checker.reviews.turn_told(session.session_id, message.turn_id, self.world.now)
