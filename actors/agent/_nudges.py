"""Nudges: when a session asks for a background review of what it just did; pure.

Hermes keeps two counters per agent: user turns since the memory was last saved, and model
calls (tool-calling iterations) since a skill was last saved. A memory nudge is due every
``memory.nudge_interval`` user turns (default 10; the session must have had at least
``memory.flush_min_turns`` user turns, default 6), a skill nudge every
``skills.creation_nudge_interval`` iterations (default 10). Using the memory tool resets the
first counter, ``skill_manage`` the second. A nudge adds nothing to the user's conversation:
it is the decision to fork a review session after a turn that ended with an answer
(:mod:`._review`), whose prompt says what to look for. Delegated, review and cron sessions
have no nudges (``NudgeSettings.OFF``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import ClassVar, Literal

from protocols import ChatMessage
from protocols._session import TurnCancelled, TurnCompleted, TurnFailed

MEMORY_TOOL = "memory"
SKILL_TOOL = "skill_manage"
REVIEW_ITERATIONS = 8
"""A review session's model calls (Hermes's ``max_iterations=8`` for the review agent)."""
REVIEW_TIMEOUT = 300.0
"""Seconds a review may run before it is cancelled (its own deadline, never the user's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NudgeSettings:
    """``memory.nudge_interval`` / ``memory.flush_min_turns`` / ``skills.creation_nudge_interval``."""

    memory_interval: int = 10
    """User turns between two memory reviews; 0: never."""
    min_turns: int = 6
    """User turns a session must have had before its first memory review."""
    skill_interval: int = 10
    """Tool-calling iterations between two skill reviews; 0: never."""
    review_iterations: int = REVIEW_ITERATIONS
    review_timeout: float = REVIEW_TIMEOUT

    OFF: ClassVar[NudgeSettings]

    @property
    def enabled(self) -> bool:
        return self.memory_interval > 0 or self.skill_interval > 0


NudgeSettings.OFF = NudgeSettings(memory_interval=0, skill_interval=0)


@dataclasses.dataclass(frozen=True, slots=True)
class NudgeCounters:
    user_turns: int = 0
    """User turns of the session so far (seeded from the stored transcript)."""
    turns_since_memory: int = 0
    iters_since_skill: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class TurnFacts:
    """What a finished turn did, as the nudges count it."""

    user_turn: bool
    """Opened by a user message (not ``/compress``, not a client's tool results)."""
    iterations: int
    """Model calls the turn made."""
    tools_used: frozenset[str]
    answered: bool
    """It completed with a final answer (not failed, cancelled or paused for client tools)."""


ReviewKind = Literal["memory", "skills", "combined"]


@dataclasses.dataclass(frozen=True, slots=True)
class ReviewPlan:
    review_memory: bool
    review_skills: bool

    @property
    def kind(self) -> ReviewKind:
        if self.review_memory and self.review_skills:
            return "combined"
        return "memory" if self.review_memory else "skills"

    def tools(self, available: Collection[str]) -> frozenset[str]:
        """The tools a review of this kind may call: the skill tools, and the memory tool for a memory review."""
        wanted = {SKILL_TOOL, "skill_view", "skills_list"} | ({MEMORY_TOOL} if self.review_memory else set())
        return frozenset(name for name in available if name in wanted)


def plan_after_turn(counters: NudgeCounters, facts: TurnFacts, settings: NudgeSettings, available: Collection[str]) -> tuple[NudgeCounters, ReviewPlan | None]:
    """Count ``facts`` and say whether a review is due (``available``: the session's tool names)."""
    if not settings.enabled:
        return counters, None
    user_turns, since_memory, since_skill = counters.user_turns, counters.turns_since_memory, counters.iters_since_skill
    review_memory = review_skills = False
    if facts.user_turn:
        user_turns += 1
        if settings.memory_interval > 0 and MEMORY_TOOL in available:
            since_memory += 1
            if since_memory >= settings.memory_interval and user_turns >= settings.min_turns:
                review_memory, since_memory = True, 0
    if MEMORY_TOOL in facts.tools_used:
        since_memory = 0
    # skill_manage in the turn resets the count; the answer's own call counts after it.
    since_skill = 1 if SKILL_TOOL in facts.tools_used else since_skill + facts.iterations
    if facts.answered and settings.skill_interval > 0 and SKILL_TOOL in available and since_skill >= settings.skill_interval:
        review_skills, since_skill = True, 0
    counters = NudgeCounters(user_turns=user_turns, turns_since_memory=since_memory, iters_since_skill=since_skill)
    if not facts.answered or not (review_memory or review_skills):
        return counters, None
    return counters, ReviewPlan(review_memory=review_memory, review_skills=review_skills)


def seeded(user_turns: int, settings: NudgeSettings) -> NudgeCounters:
    """The counters of a session loaded with ``user_turns`` stored user turns (a restart does not restart the period)."""
    interval = settings.memory_interval
    return NudgeCounters(user_turns=user_turns, turns_since_memory=user_turns % interval if interval > 0 else 0)


def admit_review(plan: ReviewPlan | None, running: int) -> ReviewPlan | None:
    """One review per session at a time: a review due while ``running`` ones run is dropped (its
    counters were reset all the same), so reviews never pile up behind a slow or hung one."""
    return plan if plan is not None and running == 0 else None


def opens_user_turn(text: str) -> bool:
    """Whether a turn that starts with ``text`` counts as a user turn (``/compress`` and a client's tool results do not)."""
    return bool(text) and not text.startswith("/compress")


def turn_facts(ended: TurnCompleted | TurnFailed | TurnCancelled, user_turn: bool, used: Collection[str]) -> TurnFacts:
    """A turn's facts from its terminal event, whether it opened as a user turn, and the tools it called."""
    answered = isinstance(ended, TurnCompleted) and bool(ended.text) and not ended.tool_calls
    iterations = ended.iterations if isinstance(ended, TurnCompleted) else 0
    return TurnFacts(user_turn=user_turn, iterations=iterations, tools_used=frozenset(used), answered=answered)


def earlier_user_turns(transcript: Sequence[ChatMessage], user_turn: bool) -> int:
    """The user turns stored before the turn that just ended (its own message is in ``transcript``
    when it was a user turn): what a new incarnation seeds its counters with (``seeded``)."""
    return max(0, sum(1 for m in transcript if m.role == "user") - (1 if user_turn else 0))
