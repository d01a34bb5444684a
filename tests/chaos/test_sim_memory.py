"""An external memory provider in the simulator: the ``review`` preset keeps its rules, and each rule can fail."""

from __future__ import annotations

import msgspec
import pytest

from actors.agent._memory_turn import TurnMemory, first_call_of_turn, recalled, turn_query, with_block
from actors.chaos._chaos_cli import main
from actors.chaos._faults import load_plan
from actors.chaos._sim import SimOptions, format_result, replay, sweep
from actors.chaos._sim_memory import MemoryBug
from actors.memory import missed, prefetch_result
from actors.memory._tree import MEMORY_INTENSITY
from protocols import ChatMessage, ProviderFaults
from protocols._memory import ProviderReply

PLANTED: dict[MemoryBug, tuple[int, str]] = {
    "provider_fails_call": (0, "memory_changed_turn"),
    "prefetch_no_deadline": (0, "prefetch_past_deadline"),
    "skip_unreported": (0, "memory_skip_reported"),
    "prefetch_every_call": (0, "memory_skip_reported"),
    "block_in_transcript": (0, "memory_block_in_transcript"),
}
"""Planted bug -> a seed of the ``review`` preset that it breaks, and the rule that catches it."""


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_planted_memory_bug_is_caught_on_a_seed_that_passes_without_it(bug: MemoryBug) -> None:
    seed, rule = PLANTED[bug]
    plan = load_plan("review")
    clean = replay(seed, plan)
    assert clean.ok, format_result(clean, plan_name="review")
    assert clean.counts["prefetches"] > 0 and clean.counts["prefetch_skipped"] > 0
    broken = replay(seed, plan, options=SimOptions(bug=bug))
    assert [v.rule for v in broken.violations][:1] == [rule], format_result(broken, plan_name="review", bug=bug)


def test_the_review_workload_has_a_provider_that_answers_is_late_hangs_fails_and_restarts() -> None:
    result = sweep(range(300), load_plan("review"))
    assert result.failures == ()
    counts = result.counts
    assert counts["reviews"] > 0  # reviews and providers in one workload
    assert counts["memory_blocks"] > 0  # answered in time: the block went into the request
    assert counts["skipped_timeout"] > 0 and counts["skipped_error"] > 0  # late or hung; raised or crashed
    assert counts["prefetch_skipped"] == counts["skipped_timeout"] + counts["skipped_error"] + counts.get("skipped_unavailable", 0)
    assert counts["syncs"] > 0 and counts["turn_starts"] > 0 and counts["provider_restarts"] > 0


def test_a_provider_that_keeps_crashing_is_given_up_and_turns_go_on_without_it() -> None:
    review = load_plan("review")
    plan = msgspec.structs.replace(
        review, providers=ProviderFaults(enabled=True, crash=0.9), workload=msgspec.structs.replace(review.workload, min_messages=6, max_messages=8)
    )
    result = sweep(range(50), plan)
    assert result.failures == ()
    assert result.counts["provider_restarts"] > MEMORY_INTENSITY.max_restarts
    assert result.counts["skipped_unavailable"] > 0  # past the intensity /memory gave up: no actor at the address
    assert result.counts["completed"] > 0


def test_sim_prints_provider_counts_in_its_summary_line() -> None:
    import io

    out, err = io.StringIO(), io.StringIO()
    assert main(["sim", "--plan", "review", "--seeds", "20"], out=out, err=err) == 0, out.getvalue()
    line = next(line for line in out.getvalue().splitlines() if "prefetches" in line)
    assert "reviews" in line and "prefetch_skipped" in line and "memory_blocks" in line and "provider_restarts" in line


def test_the_prefetch_decisions_the_simulator_shares_with_the_session() -> None:
    memo = TurnMemory()
    assert first_call_of_turn(memo, "t1") and not first_call_of_turn(memo, "t1") and first_call_of_turn(memo, "t2")
    messages = [ChatMessage(role="system", content="sys"), ChatMessage(role="user", content="where is my key?")]
    assert turn_query(messages) == "where is my key?"
    ok = prefetch_result("store", ProviderReply(provider="store", text="under the mat"))
    failed = prefetch_result("store", ProviderReply(provider="store", ok=False, text="boom"))
    assert (ok.outcome, failed.outcome, prefetch_result("x", None).outcome, missed("x", 0.5).outcome) == ("ok", "error", "unavailable", "timeout")
    block, events = recalled([ok, missed("slow", 0.5)], "t1")
    assert "<memory-context>" in block and "under the mat" in block
    assert [(e.turn_id, e.provider, e.reason) for e in events] == [("t1", "slow", "timeout")]
    sent = with_block(messages, block)
    assert sent[-1].content is not None and sent[-1].content.startswith("where is my key?\n\n<memory-context>")
    assert messages[-1].content == "where is my key?"  # the request only: the messages themselves are untouched
    assert with_block(messages, "") is messages
