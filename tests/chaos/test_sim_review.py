"""Background reviews in the simulator: the ``review`` preset keeps its rules, and each rule can fail."""

from __future__ import annotations

import pytest

from actors.agent._nudges import ReviewPlan, admit_review
from actors.chaos._faults import load_plan
from actors.chaos._sim import SimOptions, format_result, replay, sweep
from actors.chaos._sim_review import ReviewBug

PLANTED: dict[ReviewBug, tuple[int, str]] = {
    "review_overlap": (0, "review_overlap"),
    "review_no_deadline": (17, "review_past_deadline"),
    "review_blocks_turn": (0, "review_delayed_turn"),
    "review_writes_user_session": (0, "review_in_user_transcript"),
}
"""Planted bug -> a seed of the ``review`` preset that it breaks, and the rule that catches it."""


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_planted_review_bug_is_caught_on_a_seed_that_passes_without_it(bug: ReviewBug) -> None:
    seed, rule = PLANTED[bug]
    plan = load_plan("review")
    clean = replay(seed, plan)
    assert clean.ok, format_result(clean, plan_name="review")
    assert clean.counts["reviews"] > 0
    broken = replay(seed, plan, options=SimOptions(bug=bug))
    assert [v.rule for v in broken.violations][:1] == [rule], format_result(broken, plan_name="review", bug=bug)


def test_the_review_workload_forks_reviews_that_end_every_way_and_turns_arrive_while_they_run() -> None:
    result = sweep(range(300), load_plan("review"))
    assert result.failures == ()
    counts = result.counts
    assert counts["reviews"] == counts["reviews_ok"] + counts["reviews_failed"] + counts["reviews_cancelled"]
    assert counts["reviews_ok"] > 0 and counts["reviews_failed"] > 0 and counts["reviews_cancelled"] > 0
    assert counts["turns_during_review"] > 0  # the "never delays the next turn" rule is exercised


def test_a_review_due_while_one_runs_is_dropped() -> None:
    plan = ReviewPlan(review_memory=True, review_skills=False)
    assert admit_review(plan, 0) is plan
    assert admit_review(plan, 1) is None
    assert admit_review(None, 0) is None
