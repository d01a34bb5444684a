"""Hook faults in the simulator: a plugin's pre_tool_call hook that raises, hangs, answers
garbage or is slow is skipped by the dispatcher's own rules, costs at most its deadline, and
decides nothing; the ``hooks`` preset keeps every invariant (its sweep is in test_sweeps)."""

from __future__ import annotations

import collections

from actors.chaos._faults import Dice, load_plan
from actors.chaos._invariants import Invariants
from actors.chaos._sim import replay
from actors.chaos._sim_hooks import draw_hook_call
from protocols import HookFaults


def test_each_hook_fault_is_skipped_for_its_reason_within_the_deadline_and_never_blocks() -> None:
    reasons: collections.Counter[str | None] = collections.Counter()
    costs = []
    for seed in range(300):
        dice = Dice(seed)
        call = draw_hook_call(dice, HookFaults(raises=0.2, hang=0.2, garbage=0.3, slow=0.4, slow_max_s=20.0, deadline_s=10.0))
        reasons[call.skipped] += 1
        costs.append(call.cost_s)
        assert call.blocked is None  # neither a fault nor garbage blocks a call
        if call.skipped == "timeout":
            assert call.cost_s == 10.0
    assert set(reasons) == {None, "timeout", "raised", "flood"}
    assert max(costs) == 10.0 and min(costs) < 0.002


def test_the_checker_flags_a_hook_past_its_deadline_or_a_skipped_hook_that_decided() -> None:
    checker = Invariants(turn_timeout=60.0)
    checker.hook_called("s", "call_1", 10.0, 10.0, "timeout", None, 1.0)
    assert checker.violations == []
    checker.hook_called("s", "call_2", 10.5, 10.0, None, None, 2.0)
    checker.hook_called("s", "call_3", 0.1, 10.0, "raised", "no", 3.0)
    assert [v.rule for v in checker.violations] == ["hook_overran", "hook_fault_decided"]


def test_hook_faults_reach_the_simulated_sessions_and_every_invariant_holds() -> None:
    plan = load_plan("hooks")
    kinds: collections.Counter[str] = collections.Counter()
    skipped_lines = 0
    for seed in range(60):
        result = replay(seed, plan)
        assert result.ok, [v.describe() for v in result.violations]
        kinds.update(fault.split("#")[0] for fault in result.faults if fault.startswith("hooks:"))
        skipped_lines += sum("hook pre_tool_call" in text for _, _, text in result.trace)
    assert set(kinds) == {"hooks:raise", "hooks:hang", "hooks:garbage", "hooks:slow"}, kinds
    assert skipped_lines > 0
