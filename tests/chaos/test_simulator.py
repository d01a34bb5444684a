"""The deterministic simulator: thousands of seeded sessions keep the invariants, failures replay exactly.

The tests marked ``xfail(strict=True)`` are findings: sweeps that break an invariant in the
current session code (``actors/agent/_session.py`` / ``_machine.py``). Each reason names a
seed that shows it (``hermes chaos replay SEED --plan ...``); when the code is fixed the
test passes, strict xfail turns that into a failure, and the marker must go.
"""

from __future__ import annotations

import functools

import msgspec
import pytest

from actors.agent import _machine, _session_host
from actors.agent._session_host import SessionHost
from actors.chaos._faults import calm_plan, client_retries_plan, crash_plan, default_plan, passivate_plan, store_busy_plan
from actors.chaos._sim import SimOptions, SimResult, SweepResult, replay, shrink, simulate, sweep
from protocols._faults import FaultPlan

PASSIVATE = passivate_plan()
STORE_BUSY = store_busy_plan()
CLIENT_RETRIES = client_retries_plan()


@functools.cache
def _swept(plan: FaultPlan, seeds: int) -> SweepResult:
    return sweep(range(seeds), plan)


def _broken(result: SweepResult, rule: str, detail: str = "") -> list[int]:
    return [f.seed for f in result.failures if any(v.rule == rule and detail in v.detail for v in f.violations)]


def test_the_simulator_runs_the_session_actors_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every input the simulated sessions handle goes through the one ``SessionHost``, and the
    machine it steps is the runtime's (``tests/agent/test_session_host.py`` shows the actor
    runs the same class)."""
    fed: list[str] = []
    real_feed = SessionHost.feed

    def feed(self: SessionHost, event: object) -> None:
        fed.append(type(self.port).__name__)
        real_feed(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionHost, "feed", feed)
    result = simulate(7)
    assert result.ok and result.counts["sessions"] > 0
    assert len(fed) > 10 and set(fed) == {"SimSession"}
    assert _session_host.step is _machine.step


def test_two_thousand_seeded_sessions_under_the_default_plan_keep_every_invariant() -> None:
    result = _swept(default_plan(), 2000)
    assert [simulate(f.seed).violations for f in result.failures[:3]] == []
    counts = result.counts
    # Not vacuous: faults were injected and every way a turn ends happened many times.
    assert result.sessions == 2000 and counts["faults"] > 10_000
    assert min(counts["completed"], counts["failed"], counts["cancelled"], counts["rejected"], counts["queued"]) > 100
    assert counts["tool_runs"] > 3000


def test_several_sessions_per_seed_sharing_one_store_keep_every_invariant() -> None:
    plan = msgspec.structs.replace(default_plan(), workload=msgspec.structs.replace(default_plan().workload, sessions=4))
    result = sweep(range(200), plan)
    assert result.failures == () and result.sessions == 800


def test_a_calm_plan_completes_every_turn_it_neither_cancels_nor_rejects() -> None:
    result = sweep(range(300), calm_plan())
    counts = result.counts
    assert result.failures == ()
    assert counts.get("failed", 0) == 0 and counts["completed"] + counts["cancelled"] == counts["turns"]


def test_a_seed_replays_to_the_same_trace_and_the_same_verdict() -> None:
    for seed in (3, 14):
        first, again = replay(seed, crash_plan()), replay(seed, crash_plan())
        assert first.trace == again.trace and len(first.trace) > 10
        assert first.violations == again.violations and first.injected == again.injected
    assert replay(3, crash_plan()).trace != replay(4, crash_plan()).trace


def test_a_planted_bug_that_reruns_tools_after_a_crash_is_caught_and_replays_exactly_from_its_seed() -> None:
    options = SimOptions(bug="rerun_tools", trace=False)
    found = sweep(range(300), crash_plan(), options=options)
    caught = [f for f in found.failures if any(v.rule == "tool_ran_twice" for v in f.violations)]
    assert caught, "the checker missed a tool that ran twice"
    seed = caught[0].seed
    again = replay(seed, crash_plan(), options=options)
    assert again.violations == caught[0].violations
    [twice] = [v for v in again.violations if v.rule == "tool_ran_twice"]
    call_id = twice.detail.split()[2]
    assert sum(f"RunTool {call_id} " in text for _, _, text in again.trace) == 1  # once by the machine...
    assert any("CRASH" in text for _, _, text in again.trace)  # ...and again by the planted recovery
    assert simulate(seed, crash_plan()).violations != again.violations  # the bug, not the seed, breaks it


def test_a_planted_bug_that_drops_the_settle_step_is_caught_without_any_crash() -> None:
    found = sweep(range(300), default_plan(), options=SimOptions(bug="drop_settle", trace=False))
    rules = {v.rule for f in found.failures for v in f.violations}
    assert "durable_unpaired" in rules


def test_a_planted_acknowledgement_before_commit_is_caught_at_the_acknowledgement() -> None:
    result = simulate(0, calm_plan(), options=SimOptions(bug="ack_before_commit"))
    assert result.violations[0].rule == "ack_not_durable"


def test_shrinking_keeps_the_broken_rule_with_fewer_faults_and_its_mask_replays_it() -> None:
    options = SimOptions(bug="rerun_tools")
    original = next(r for r in (simulate(s, crash_plan(), options=options) for s in range(300)) if not r.ok)
    small: SimResult = shrink(original, options=options)
    assert small.violations[0].rule == original.violations[0].rule
    assert len(small.injected) <= len(original.injected) and small.mask
    again = replay(original.seed, crash_plan(), options=options, mask=small.mask)
    assert again.violations == small.violations and again.trace == small.trace


# -- findings ------------------------------------------------------------------------------------


def test_a_crash_never_loses_a_queued_turn() -> None:
    assert _broken(_swept(crash_plan(), 1500), "turn_never_ended", "was queued") == []


def test_a_crash_before_the_user_message_is_stored_still_ends_the_turn() -> None:
    assert _broken(_swept(crash_plan(), 1500), "turn_never_ended", "lost when its session crashed") == []


def test_a_recovery_never_fails_a_turn_that_had_already_ended() -> None:
    assert _broken(_swept(crash_plan(), 1500), "spurious_recovery") + _broken(_swept(PASSIVATE, 500), "spurious_recovery") == []


def test_a_recovery_never_gives_a_call_a_second_result() -> None:
    assert _broken(_swept(crash_plan(), 1500), "durable_unpaired", "stray or repeated") == []


def test_a_failed_store_write_never_leaves_a_call_unpaired_in_the_store() -> None:
    # Was a finding (seeds 230 and 467 of this plan): a lost store reply went unnoticed, and
    # a recovery stored results after the next user message, where they were not found.
    # Now an unanswered write restarts the session after store_ack_timeout, and the
    # sanitizer finds a result up to the next message that calls the same id.
    assert _broken(_swept(STORE_BUSY, 1000), "durable_unpaired") == []


def test_a_write_that_depends_on_a_refused_one_is_never_stored() -> None:
    # Was a finding (seeds 10542, 10638, 10841): the assistant message asking for two calls
    # was refused, the refusal arrived late, and the settle write with their results landed.
    # Now the store fences the session after a refused transcript write until it reloads.
    assert _broken(sweep(range(10_500, 10_900), STORE_BUSY), "durable_unpaired") == []


def test_a_late_store_failure_of_one_turn_never_fails_the_next() -> None:
    assert _broken(_swept(STORE_BUSY, 1000), "misattributed_failure") == []


def test_a_retried_start_turn_with_the_same_turn_id_runs_once() -> None:
    assert _broken(_swept(CLIENT_RETRIES, 300), "turn_started_twice") == []
