"""The simulated credential pool: per-key model faults, pool crashes, and the invariants that watch them.

The pool is an actor in the simulated world (``actors/chaos/_sim_pool.py``): leases and reports
reach it after a hop, it saves its state as the real pool does, and it crashes. A crash never
loses a lease (what is told meanwhile waits for the next incarnation) and never counts a lease
twice (the core's exactly-once rule, also for a lease the restarted pool does not know). Each
new invariant is shown able to fail by a bug planted on purpose.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import pytest

from actors._errors import UsageError
from actors.chaos._faults import Dice, calm_plan, keys_plan, parse_plan
from actors.chaos._invariants import Invariants
from actors.chaos._sim import SimOptions, SweepResult, replay, simulate, sweep
from actors.chaos._sim_bugs import PlantedBug
from actors.chaos._sim_world import World
from actors.credentials._pool_core import KeyState, settled_lease_ids
from protocols import KeyLeased, LeaseKey, NoKeyAvailable, ReportKey
from protocols._faults import CrashFaults, FaultPlan, KeyFaults, ModelFaults

KEYS = keys_plan()


@functools.cache
def _swept(plan: FaultPlan, seeds: int, bug: PlantedBug | None = None) -> SweepResult:
    return sweep(range(seeds), plan, options=SimOptions(bug=bug, trace=False))


def _rules(result: SweepResult) -> set[str]:
    return {v.rule for f in result.failures for v in f.violations}


def _with(plan: FaultPlan, *, keys: tuple[KeyFaults, ...] | None = None, **crashes: Any) -> FaultPlan:
    model = plan.model if keys is None else msgspec.structs.replace(plan.model, key_faults=keys)
    return msgspec.structs.replace(plan, model=model, crashes=msgspec.structs.replace(plan.crashes, **crashes))


# -- the pool alone, in a world --------------------------------------------------------------------


class Inbox:
    """Stands for a session incarnation: the pool tells it its answers."""

    def __init__(self) -> None:
        self.session = self
        self.got: list[Any] = []

    def on_message(self, incarnation: Any, message: Any) -> None:
        self.got.append(message)


def _world(plan: FaultPlan, mask: tuple[str, ...] = ()) -> World:
    return World(0, plan, mask=frozenset(mask))


def test_a_lease_is_answered_after_a_hop_and_its_report_counted_once() -> None:
    world, inbox = _world(calm_plan()), Inbox()
    world.pool.tell(LeaseKey(lease_id="a", session_id="s0", reply_to=inbox), "s0")
    assert inbox.got == []  # not at once: the message travels
    world.run(100)
    [leased] = inbox.got
    assert isinstance(leased, KeyLeased) and leased.key_id == "key-1"
    report = ReportKey(lease_id="a", key_id="key-1", ok=True, input_tokens=5)
    world.pool.tell(report, "s0")
    world.pool.tell(report, "s0")  # a repeated report changes nothing
    world.run(100)
    key = world.pool.core.state.keys["key-1"]
    assert (key.granted, key.successes, key.failures, key.input_tokens) == (1, 1, 0, 5)
    assert world.checker.finish(world.now) == []


@pytest.mark.parametrize("lost", [False, True])
def test_a_lease_granted_before_a_crash_and_reported_after_it_counts_once(lost: bool) -> None:
    # The pool crashes on the report (its first crash draw is masked: the lease goes through).
    # Its last save lands or is lost; either way the report counts the lease once: as a lease
    # in flight when the grant was saved, as an unknown lease (grant included) when it was not.
    plan = _with(calm_plan(), pool=1.0, max_per_pool=1, pool_save_lost=1.0 if lost else 0.0)
    world, inbox = _world(plan, mask=("pool:crash#1",)), Inbox()
    world.pool.tell(LeaseKey(lease_id="a", reply_to=inbox), "s0")
    world.run(100)
    world.pool.tell(ReportKey(lease_id="a", key_id="key-1", ok=False, kind="rate_limit", status=429, cooldown=60.0), "s0")
    world.pool.tell(LeaseKey(lease_id="b", reply_to=inbox), "s0")  # told while the pool restarts: waits for it
    world.run(100)
    assert world.pool.crashes == 1 and world.pool.incarnation == 2
    state = world.pool.core.state
    assert "a" not in state.in_flight and settled_lease_ids(state) == ["a"]
    first = state.keys["key-1"]
    assert (first.granted, first.failures) == (1, 1)  # the grant once, the outcome once
    assert first.cooling_until > world.now  # the report benched it...
    assert [type(m).__name__ for m in inbox.got] == ["KeyLeased", "KeyLeased"] and inbox.got[1].key_id == "key-2"  # ...so b gets another
    assert world.checker.finish(world.now) == []


def test_messages_told_while_the_pool_restarts_reach_the_next_incarnation_in_order() -> None:
    plan = _with(calm_plan(), pool=1.0, max_per_pool=2)
    world, inbox = _world(plan), Inbox()
    for name in "abc":
        world.pool.tell(LeaseKey(lease_id=name, reply_to=inbox), "s0")
    world.run(100)
    assert world.pool.crashes == 2
    assert [m.lease_id for m in inbox.got] == ["a", "b", "c"]
    assert world.checker.finish(world.now) == []


def test_every_key_benched_is_answered_no_key_with_the_kind_of_the_first_back() -> None:
    world, inbox = _world(calm_plan()), Inbox()
    for n, (kind, cooldown) in enumerate((("auth", 300.0), ("rate_limit", 2.0), ("billing", 3600.0)), start=1):
        world.pool.tell(LeaseKey(lease_id=f"l{n}", reply_to=inbox), "s0")
        world.run(100)
        key_id = inbox.got[-1].key_id
        world.pool.tell(ReportKey(lease_id=f"l{n}", key_id=key_id, ok=False, kind=kind, cooldown=cooldown), "s0")
    world.pool.tell(LeaseKey(lease_id="none", reply_to=inbox), "s0")
    world.run(100)
    refused = inbox.got[-1]
    assert isinstance(refused, NoKeyAvailable) and refused.kind == "rate_limit"
    assert refused.until == pytest.approx(world.now + 2.0, abs=0.01)


# -- per-key model faults ----------------------------------------------------------------------------------


def test_a_keys_faults_hit_only_calls_made_with_that_key_and_replay_with_the_seed() -> None:
    plan = _with(calm_plan(), keys=(KeyFaults(key_id="key-2", rate_limit=0.5, auth=0.3),))
    plan = msgspec.structs.replace(plan, model=msgspec.structs.replace(plan.model, key_faults=(*plan.model.key_faults, KeyFaults(key_id="key-1", auth=1.0))))
    result = replay(5, plan)
    faults = [text for _, _, text in result.trace if text.startswith("fault: key-")]
    assert faults and {text.split()[1] for text in faults} <= {"key-1", "key-2"}
    assert any("key-1 answered HTTP 401" in text for text in faults)  # the first key is refused at once...
    assert any(" on key-3" in text for _, _, text in result.trace)  # ...and the turns rotate past it
    again = replay(5, plan)
    assert again.trace == result.trace and again.injected == result.injected


def test_one_draw_picks_at_most_one_key_fault_and_a_mask_skips_exactly_it() -> None:
    kinds = (("auth", 0.2), ("billing", 0.1), ("rate_limit", 0.3))
    first = Dice(3)
    drawn = [first.pick("keys", kinds) for _ in range(200)]
    assert {d for d in drawn if d} == {"auth", "billing", "rate_limit"}
    assert 0.45 < sum(1 for d in drawn if d) / 200 < 0.75
    index = next(i for i, kind in enumerate(drawn) if kind)
    masked = Dice(3, mask={first.injected[0]})
    again = [masked.pick("keys", kinds) for _ in range(200)]
    assert again[index] is None and again[:index] + again[index + 1 :] == drawn[:index] + drawn[index + 1 :]
    assert masked.injected == first.injected[1:]


def test_key_faults_that_could_fail_a_call_twice_or_name_a_key_twice_are_refused() -> None:
    with pytest.raises(UsageError, match="must not exceed 1"):
        parse_plan('{"model": {"key_faults": [{"key_id": "key-1", "auth": 0.6, "rate_limit": 0.6}]}}')
    with pytest.raises(ValueError, match="more than once"):
        ModelFaults(key_faults=(KeyFaults(key_id="key-1"), KeyFaults(key_id="key-1")))
    with pytest.raises(UsageError, match="CrashFaults.pool is a probability"):
        parse_plan('{"crashes": {"pool": 2}}')
    assert CrashFaults().pool == 0.0 and ModelFaults().key_faults == ()


def test_when_every_key_is_refused_turns_fail_and_when_every_key_is_rate_limited_they_wait() -> None:
    refused = _with(calm_plan(), keys=tuple(KeyFaults(key_id=f"key-{n}", auth=1.0) for n in (1, 2, 3)))
    result = sweep(range(100), refused)
    assert result.failures == ()
    assert result.counts.get("completed", 0) == 0 and result.counts["failed"] > 100
    # Every key limited for a moment: a turn that finds none waits for the first back and goes on.
    limited = _with(calm_plan(), keys=tuple(KeyFaults(key_id=f"key-{n}", rate_limit=0.6, reset_hint=1.0, reset_max_s=0.5) for n in (1, 2, 3)))
    assert sweep(range(100), limited).failures == ()
    waited = 0
    for seed in range(50):
        lines = [text for _, _, text in replay(seed, limited).trace]
        refusals = [i for i, text in enumerate(lines) if text == "s0 <- NoKeyAvailable"]
        waited += any(text.startswith("s0 does CallModel") for i in refusals[:1] for text in lines[i:])
    assert waited >= 5


# -- the keys preset: not vacuous ----------------------------------------------------------------------


def test_the_keys_preset_crashes_the_pool_rotates_keys_and_keeps_every_invariant() -> None:
    # Not vacuous: the pool crashes often, and (see the planted bugs below) leases granted before
    # a crash are reported after it, both as leases the restarted pool knows and as ones it lost.
    result = _swept(KEYS, 300)
    assert result.failures == ()
    counts = result.counts
    assert counts["pool_crashes"] > 300 and counts["pool_restarts"] > counts["pool_crashes"] // 2
    assert counts["leases"] > 1500 and counts["completed"] > 300 and counts["failed"] > 200


def test_three_sessions_sharing_a_crashing_pool_of_bad_keys_keep_every_invariant() -> None:
    plan = msgspec.structs.replace(KEYS, workload=msgspec.structs.replace(KEYS.workload, sessions=3, max_messages=4))
    result = sweep(range(300), plan)
    assert result.failures == () and result.sessions == 900


def test_a_pool_that_crashes_on_nearly_every_message_loses_no_lease() -> None:
    plan = _with(KEYS, pool=0.9, max_per_pool=3, pool_save_lost=1.0)
    result = sweep(range(200), plan)
    assert result.failures == ()
    assert result.counts["pool_crashes"] >= 500


# -- each new invariant can fail ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bug", "rule"),
    [
        ("pool_drops_mailbox", "lease_unanswered"),
        ("grant_benched", "benched_key_granted"),
        ("forget_in_flight", "usage_double_counted"),
        ("drop_unknown_reports", "usage_uncounted"),
        ("reuse_lease", "model_key_not_leased"),
    ],
)
def test_a_planted_pool_bug_is_caught_by_its_invariant_and_replays_exactly(bug: PlantedBug, rule: str) -> None:
    found = _swept(KEYS, 200, bug)
    assert rule in _rules(found), f"the checker missed the planted bug {bug}"
    assert _rules(found) == {rule}  # and blames nothing else
    failure = next(f for f in found.failures if f.violations[0].rule == rule)
    again = replay(failure.seed, KEYS, options=SimOptions(bug=bug))
    assert again.violations == failure.violations
    assert simulate(failure.seed, KEYS).ok  # the bug, not the seed, breaks it


def _key(granted: int = 0, successes: int = 0, failures: int = 0) -> KeyState:
    return KeyState(granted=granted, successes=successes, failures=failures)


def test_the_checker_names_an_unanswered_lease_and_excuses_one_whose_process_died() -> None:
    checker = Invariants(turn_timeout=10, lease_bound=1.0)
    checker.pool.lease_sent("s1", "a", 0.0)
    checker.pool.lease_sent("s2", "b", 0.0)
    checker.pool.lease_sent("s1", "c", 0.5)
    checker.pool.answered("s1", "c", None, 0.0, None, 0.6)
    checker.advance(0.9)
    assert checker.violations == []
    checker.process_died("s2", {}, 0.95)
    checker.advance(1.5)
    assert [(v.rule, v.session_id) for v in checker.violations] == [("lease_unanswered", "s1")]


def test_the_checker_names_a_benched_grant_a_miscount_and_a_call_on_a_key_not_leased() -> None:
    checker = Invariants(turn_timeout=10)
    checker.pool.lease_sent("s1", "a", 0.0)
    checker.pool.answered("s1", "a", "key-1", 5.0, _key(granted=1), 1.0)  # benched until 5.0
    checker.pool.answered("s1", "a", "key-1", 9.0, _key(granted=1), 1.1)  # the same lease again: not a new grant
    checker.pool.reported("s1", ReportKey(lease_id="a", key_id="key-1", ok=True), {"key-1": _key(granted=1, successes=2)}, 2.0)
    checker.pool.reported("s1", ReportKey(lease_id="z", key_id="key-2", ok=True), {"key-2": _key()}, 2.0)
    checker.pool.model_key("s1", "a", "key-1", 3.0)
    checker.pool.model_key("s1", "a", "key-1", 3.1)
    checker.pool.model_key("s1", "q", "key-3", 3.2)
    assert [v.rule for v in checker.violations] == [
        "benched_key_granted",
        "usage_double_counted",
        "usage_uncounted",  # grants and outcomes of key-2 both short: named once
        "model_key_not_leased",
        "model_key_not_leased",
    ]


def test_a_return_to_the_saved_state_takes_back_exactly_what_came_after_the_save() -> None:
    checker = Invariants(turn_timeout=10)
    checker.pool.answered("s1", "a", "key-1", 0.0, _key(granted=1), 0.0)
    checker.pool.saved(checker.pool.mark())
    checker.pool.answered("s1", "b", "key-1", 0.0, _key(granted=2), 0.1)
    checker.pool.reported("s1", ReportKey(lease_id="a", key_id="key-1", ok=True), {"key-1": _key(granted=2, successes=1)}, 0.2)
    checker.pool.reverted({"key-1": _key(granted=1)}, 0.3)  # back to the save: a granted, not reported
    checker.pool.reported("s1", ReportKey(lease_id="b", key_id="key-1", ok=True), {"key-1": _key(granted=2, successes=1)}, 0.4)
    assert checker.violations == []
