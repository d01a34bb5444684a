"""Where a plugin's calls run (``_placement``, pure): shared lane, own lane, or disabled."""

from __future__ import annotations

from actors.hooks._placement import MAX_STUCK_LANES, SHARED_BUDGET, Standing, after_fault, budget_for, place, stalled, still_behaved


def test_a_loaded_well_behaved_plugin_shares_the_lane_and_anything_else_has_its_own() -> None:
    assert place(Standing(gateway=False, loaded=True)) == "shared"
    assert place(Standing(gateway=False, loaded=False)) == "own"  # its calls wait for the load on its own lane
    assert place(Standing(gateway=False, loaded=True, behaved=False)) == "own"
    assert place(Standing(gateway=True, loaded=True)) == "own"  # gateway handlers are often slow
    assert place(Standing(gateway=False, loaded=True, disabled="hung")) == "off"


def test_slow_raising_flooding_or_late_leaves_the_shared_lane_for_good() -> None:
    assert still_behaved(True, None, 0.0001, 0.005)
    assert not still_behaved(True, None, 0.005, 0.005)  # slow: the others would wait behind it
    assert not still_behaved(True, "raised", 0.0, 0.005)
    assert not still_behaved(True, "flood", 0.0, 0.005)
    assert not still_behaved(True, "timeout", 0.0, 0.005)
    assert not still_behaved(False, None, 0.0, 0.005)  # no way back


def test_a_callback_holding_the_shared_lane_past_the_budget_gets_it_handed_over() -> None:
    assert not stalled(0.004, 0.005)
    assert stalled(0.005, 0.005)
    assert budget_for(10.0) == SHARED_BUDGET
    assert budget_for(0.004) == 0.001  # a quarter of a short deadline: the others still have time


def test_a_plugin_is_reloaded_until_its_stuck_threads_reach_the_cap_then_disabled() -> None:
    assert after_fault(True, MAX_STUCK_LANES - 1) == ("reload", None)
    action, why = after_fault(True, MAX_STUCK_LANES)
    assert action == "disable" and why is not None and f"hung in {MAX_STUCK_LANES} calls" in why and "restart hermes" in why
    assert after_fault(False, 99) == ("reload", None)  # raising or flooding leaks no thread
