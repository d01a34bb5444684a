"""Context compression in the simulator: segments in the simulated store, the ``long`` plan, and its checks.

Issue 15's acceptance: a crash mid-compression resumes on the old segment or on the new one,
never half of each. The simulated store keeps segments as the real one does (a segment write is
one commit; a load reads the newest segment); the ``long`` plan compresses several times a
session while summary calls fail and crashes land inside compression passes; each new rule of
``_compress_checks`` is shown able to fail by a bug planted on purpose. Sweeps stay at a few
hundred seeds (a ``long`` seed costs about 7 ms of CPU).
"""

from __future__ import annotations

import functools

import msgspec
import pytest

from actors.agent._compress import SUMMARY_PREFIX
from actors.chaos._faults import calm_plan, long_plan
from actors.chaos._invariants import Invariants
from actors.chaos._sim import SimOptions, SweepResult, machine_config, replay, sweep
from actors.chaos._sim_bugs import PlantedBug
from actors.chaos._sim_world import World
from protocols import ChatMessage, Token
from protocols._faults import FaultPlan, StoreFaults
from protocols._session import ContextCompressed
from protocols._store import MessagesPersisted, SegmentStart, StoreFailed

LONG = long_plan()


@functools.cache
def _swept(plan: FaultPlan, seeds: int, bug: PlantedBug | None = None) -> SweepResult:
    return sweep(range(seeds), plan, options=SimOptions(bug=bug, trace=False))


def _rules(result: SweepResult) -> set[str]:
    return {v.rule for f in result.failures for v in f.violations}


def _message(n: int) -> ChatMessage:
    return ChatMessage(role="user" if n % 2 == 0 else "assistant", content=f"message {n}")


class Inbox:
    """Stands for a session incarnation: the store tells it its replies."""

    def __init__(self) -> None:
        self.session = self
        self.got: list[object] = []

    def on_message(self, incarnation: object, message: object) -> None:
        self.got.append(message)


def _store_with(plan: FaultPlan, messages: int) -> tuple[World, Inbox]:
    world, inbox = World(0, plan), Inbox()
    world.store.checked = True  # as in a plan that compresses
    world.store.submit("s0", None, Token(step="create"), inbox, "prompt")
    world.store.submit("s0", tuple(_message(n) for n in range(messages)), Token(step="seed"), inbox)
    world.run(100)
    return world, inbox


# -- the simulated store keeps segments ----------------------------------------------------------


def test_a_segment_write_starts_the_newest_segment_in_one_commit_and_the_old_messages_stay() -> None:
    world, inbox = _store_with(calm_plan(), 6)
    compressed = (_message(0), ChatMessage(role="assistant", content=f"{SUMMARY_PREFIX}\n\nnotes"), _message(5))
    world.store.submit("s0", compressed, Token(step="segment", turn_id="t1", attempt=1), inbox, segment=SegmentStart(summary="[summary]"))
    _, before, _ = world.store.load("s0")
    assert len(before) == 6, "until it commits, a load reads the old segment"
    world.run(100)
    world.store.submit("s0", (_message(6),), Token(step="reply", turn_id="t1"), inbox)
    world.run(100)
    _, after, _ = world.store.load("s0")
    assert after == [*compressed, _message(6)], "a load reads the newest segment and what came after it, only"
    assert len(world.store.durable["s0"]) == 10 and world.store.originals("s0") == [_message(n) for n in range(7)]
    assert all(type(r) is MessagesPersisted for r in inbox.got[1:])
    world.checker.compression.loaded("s0", after, world.now)
    assert world.checker.violations == []


@pytest.mark.parametrize("fault", ["busy", "process_death"])
def test_a_segment_write_that_fails_or_dies_with_the_process_leaves_the_old_segment_whole(fault: str) -> None:
    plan = msgspec.structs.replace(calm_plan(), store=StoreFaults(busy=1.0)) if fault == "busy" else calm_plan()
    world, inbox = _store_with(calm_plan(), 6)
    world.plan = plan
    compressed = (_message(0), ChatMessage(role="assistant", content=f"{SUMMARY_PREFIX}\n\nnotes"), _message(5))
    world.store.submit("s0", compressed, Token(step="segment", turn_id="t1", attempt=1), inbox, segment=SegmentStart())
    if fault == "process_death":
        world.store.epoch += 1  # what the process's death does to commits not made yet
    world.run(100)
    _, messages, _ = world.store.load("s0")
    assert messages == [_message(n) for n in range(6)] and "s0" not in world.store.live
    assert (type(inbox.got[-1]) is StoreFailed) if fault == "busy" else world.checker.counts["segment_writes_lost"] == 1
    world.checker.compression.loaded("s0", messages, world.now)
    assert world.checker.violations == []


def test_the_checker_catches_a_load_that_reads_half_of_a_new_segment() -> None:
    checker = Invariants(turn_timeout=60.0)
    old = tuple(_message(n) for n in range(6))
    checker.compression.committed("s0", old, Token(step="seed"), False, None, 0.0)
    new = (_message(0), ChatMessage(role="assistant", content=f"{SUMMARY_PREFIX}\n\nnotes"), _message(5))
    checker.compression.committed("s0", new, Token(step="segment", turn_id="t1", attempt=1), True, None, 1.0)
    checker.compression.loaded("s0", list(new[:2]), 2.0)
    checker.compression.loaded("s0", list(old), 2.0)
    assert [v.rule for v in checker.violations] == ["loaded_mixed_segments", "loaded_mixed_segments"]


def test_the_checker_catches_a_summary_request_that_splits_a_call_from_its_result() -> None:
    checker = Invariants(turn_timeout=60.0)
    whole = "[user]\nread it\n\n[assistant]\n[calls read_file, call c1] {}\n\n[result of read_file, call c1]\ntext"
    split = "[user]\nread it\n\n[assistant]\n[calls read_file, call c1] {}\n[calls terminal, call c2] {}\n\n[result of read_file, call c1]\ntext"
    for n, text in enumerate((whole, split)):
        token = Token(step="compress", turn_id=f"t{n}", attempt=1)
        checker.compression.summary_requested("s0", token, (ChatMessage(role="system", content="notes"), ChatMessage(role="user", content=text)), 0.0)
    [violation] = checker.violations
    assert violation.rule == "summary_split_pair" and "['c2'] without their result" in violation.detail


def test_the_checker_catches_context_compressed_before_its_commit_and_twice() -> None:
    checker = Invariants(turn_timeout=60.0)
    event = ContextCompressed(turn_id="t1", tokens_before=10, tokens_after=5, summarised=3, segment=1)
    checker.compression.committed("s0", tuple(_message(n) for n in range(6)), Token(step="seed"), False, None, 0.0)
    checker.compression.announced("s0", event, 0.5)
    new = (_message(0), ChatMessage(role="assistant", content=f"{SUMMARY_PREFIX}\n\nnotes"), _message(4), _message(5))
    checker.compression.committed("s0", new, Token(step="segment", turn_id="t1", attempt=1), True, None, 1.0)
    checker.compression.announced("s0", event, 1.0)
    checker.compression.announced("s0", event, 1.5)
    assert [(v.rule, v.at) for v in checker.violations] == [("compressed_before_commit", 0.5), ("compressed_before_commit", 1.5)]


# -- the long plan --------------------------------------------------------------------------------


def test_the_long_plan_compresses_with_the_runtimes_settings_fitted_to_a_small_window() -> None:
    config = machine_config(LONG)
    assert config.compression is not None and config.context_length == 6_000 and config.tools_size.chars > 0
    assert machine_config(calm_plan()).compression is None, "the other presets do not compress"


def test_sessions_of_the_long_plan_compress_several_times_and_crashes_land_inside_compression_passes() -> None:
    result = _swept(LONG, 300)
    assert result.failures == (), [f.violations[0].describe() for f in result.failures]
    counts = result.counts
    assert counts["segments"] >= 2 * result.sessions and counts["summary_calls"] >= result.sessions, counts
    assert 0 < counts["compressions"] <= counts["segments"], "said after commits only"
    assert counts["crash_compressing"] > 0, "crashes with a summary call in flight"
    assert counts["crash_persisting_segment"] > 0, "crashes with the segment write not yet answered"
    assert counts["process_deaths"] > 0 and counts["restarts"] > 0


def test_a_process_that_dies_with_a_segment_write_uncommitted_resumes_on_the_old_segment() -> None:
    # Every commit slow, the process dies in every run: some deaths land on a segment write not yet committed.
    plan = msgspec.structs.replace(LONG, store=StoreFaults(slow_commit=1.0, slow_commit_max_s=0.3), crashes=msgspec.structs.replace(LONG.crashes, process=1.0))
    result = _swept(plan, 200)
    assert result.failures == (), [f.violations[0].describe() for f in result.failures]
    assert result.counts["segment_writes_lost"] > 0, result.counts


# -- planted bugs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bug", "rule"),
    [
        ("half_segment", "loaded_mixed_segments"),
        ("compressed_before_commit", "compressed_before_commit"),
        ("split_summary_pair", "summary_split_pair"),
    ],
)
def test_a_planted_compression_bug_is_caught_by_its_rule_and_replays_from_its_seed(bug: PlantedBug, rule: str) -> None:
    result = _swept(LONG, 60, bug)
    assert rule in _rules(result), (bug, _rules(result))
    seed = next(f.seed for f in result.failures if any(v.rule == rule for v in f.violations))
    again = replay(seed, LONG, options=SimOptions(bug=bug))
    assert any(v.rule == rule for v in again.violations)
    assert replay(seed, LONG).ok, "the bug, not the seed, breaks it"
