"""The nudge planner (pure): when a turn's end forks a memory, skill or combined review."""

from __future__ import annotations

from actors.agent._nudges import (
    NudgeCounters,
    NudgeSettings,
    ReviewPlan,
    TurnFacts,
    earlier_user_turns,
    opens_user_turn,
    plan_after_turn,
    seeded,
    turn_facts,
)
from protocols import ChatMessage, ToolCall
from protocols._session import TurnCompleted, TurnFailed

TOOLS = frozenset({"memory", "skill_manage", "skill_view", "skills_list", "terminal"})


def turn(iterations: int = 1, used: frozenset[str] = frozenset(), *, answered: bool = True, user: bool = True) -> TurnFacts:
    return TurnFacts(user_turn=user, iterations=iterations, tools_used=used, answered=answered)


def run(settings: NudgeSettings, turns: list[TurnFacts], tools: frozenset[str] = TOOLS) -> list[ReviewPlan | None]:
    counters, plans = NudgeCounters(), []
    for facts in turns:
        counters, plan = plan_after_turn(counters, facts, settings, tools)
        plans.append(plan)
    return plans


def test_a_memory_review_every_ten_user_turns_by_default() -> None:
    plans = run(NudgeSettings(), [turn() for _ in range(20)])
    assert [i + 1 for i, p in enumerate(plans) if p is not None] == [10, 20]
    assert all(p is None or p.kind == "combined" for p in plans)  # one call a turn: ten iterations too
    plans = run(NudgeSettings(skill_interval=0), [turn() for _ in range(10)])
    assert plans[-1] == ReviewPlan(review_memory=True, review_skills=False)


def test_no_memory_review_before_the_minimum_number_of_turns() -> None:
    plans = run(NudgeSettings(memory_interval=2, min_turns=6, skill_interval=0), [turn() for _ in range(8)])
    assert [i + 1 for i, p in enumerate(plans) if p is not None] == [6, 8]


def test_a_skill_review_after_ten_tool_iterations_and_skill_manage_resets_the_count() -> None:
    settings = NudgeSettings(memory_interval=0)
    assert [p is not None for p in run(settings, [turn(4), turn(4), turn(2)])] == [False, False, True]
    assert [p is not None for p in run(settings, [turn(4), turn(5, frozenset({"skill_manage"})), turn(8)])] == [False, False, False]


def test_using_the_memory_tool_restarts_the_memory_period() -> None:
    settings = NudgeSettings(memory_interval=3, min_turns=0, skill_interval=0)
    plans = run(settings, [turn(), turn(used=frozenset({"memory"})), turn(), turn(), turn()])
    assert [p is not None for p in plans] == [False, False, False, False, True]


def test_both_due_at_once_is_one_combined_review_with_the_memory_and_skill_tools_only() -> None:
    plans = run(NudgeSettings(memory_interval=2, min_turns=2, skill_interval=3), [turn(2), turn(1)])
    plan = plans[1]
    assert plans[0] is None and plan is not None and plan.kind == "combined"
    assert plan.tools(TOOLS) == {"memory", "skill_manage", "skill_view", "skills_list"}
    assert ReviewPlan(review_memory=False, review_skills=True).tools(TOOLS) == {"skill_manage", "skill_view", "skills_list"}


def test_a_turn_without_an_answer_forks_no_review_and_compress_turns_are_not_user_turns() -> None:
    settings = NudgeSettings(memory_interval=1, min_turns=0, skill_interval=0)
    assert run(settings, [turn(answered=False), turn(user=False), turn()]) == [None, None, ReviewPlan(review_memory=True, review_skills=False)]


def test_off_and_missing_tools_never_review() -> None:
    assert run(NudgeSettings.OFF, [turn(20) for _ in range(20)]) == [None] * 20
    assert run(NudgeSettings(min_turns=0), [turn(20) for _ in range(20)], tools=frozenset({"terminal"})) == [None] * 20


def test_a_reloaded_session_keeps_its_place_in_the_period() -> None:
    settings = NudgeSettings(memory_interval=4, min_turns=0, skill_interval=0)
    counters = seeded(7, settings)
    assert (counters.user_turns, counters.turns_since_memory) == (7, 3)
    _, plan = plan_after_turn(counters, turn(), settings, TOOLS)
    assert plan is not None and plan.kind == "memory"


def test_a_turn_counts_as_a_user_turn_unless_it_compresses_or_carries_only_tool_results() -> None:
    assert opens_user_turn("hello") and not opens_user_turn("/compress now") and not opens_user_turn("")


def test_a_turn_facts_come_from_its_terminal_event() -> None:
    answered = turn_facts(TurnCompleted(turn_id="t", text="done", iterations=3), True, {"memory"})
    assert answered == TurnFacts(user_turn=True, iterations=3, tools_used=frozenset({"memory"}), answered=True)
    paused = turn_facts(TurnCompleted(turn_id="t", text="x", tool_calls=(ToolCall(id="c", name="f", arguments="{}"),)), True, set())
    assert not paused.answered
    failed = turn_facts(TurnFailed(turn_id="t", error="boom"), False, set())
    assert failed == TurnFacts(user_turn=False, iterations=0, tools_used=frozenset(), answered=False)


def test_a_new_incarnation_seeds_with_the_user_turns_before_the_one_that_ended() -> None:
    transcript = tuple(ChatMessage(role=role, content="x") for role in ("user", "assistant", "user", "assistant"))
    assert earlier_user_turns(transcript, True) == 1 and earlier_user_turns(transcript, False) == 2
    assert earlier_user_turns((), True) == 0
