"""The credential pool's pure core: strategies, cooldowns, exactly-once reports, reload,
refresh, and the snapshot. No actor, no clock: time is the ``now`` each call is given."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.credentials import (
    LEASE_TTL,
    REFRESH_RETRY,
    SETTLED_CHUNK,
    SETTLED_KEEP,
    Cooling,
    Granted,
    KeySpec,
    Pending,
    PoolState,
    ProviderSpec,
    Strategy,
    bench_changed,
    decode_state,
    encode_state,
    lease,
    needs_refresh,
    refreshed,
    refreshing,
    reload,
    report,
    restore,
    settled_lease_ids,
    snapshot,
)
from protocols import ReportKey, to_json

NOW = 1_700_000_000.0
SECRETS = {"a": "sk-alpha-secret-1111", "b": "sk-bravo-secret-2222", "c": "sk-charlie-secret-3333"}


def provider(strategy: Strategy = "fill_first", *keys: KeySpec) -> ProviderSpec:
    if not keys:
        keys = tuple(KeySpec(key_id=k, api_key=v) for k, v in SECRETS.items())
    return ProviderSpec(name="openai", base_url="http://127.0.0.1:1/v1", model="m", keys=keys, strategy=strategy)


def grant(state: PoolState, spec: ProviderSpec, lease_id: str, now: float = NOW) -> tuple[PoolState, str]:
    state, outcome = lease(state, spec, lease_id, now)
    assert isinstance(outcome, Granted), outcome
    return state, outcome.key_id


def failed(lease_id: str, key_id: str, kind: str = "rate_limit", status: int | None = 429, cooldown: float | None = 60.0) -> ReportKey:
    return ReportKey(lease_id=lease_id, key_id=key_id, ok=False, kind=kind, status=status, cooldown=cooldown)


def ok(lease_id: str, key_id: str, tokens: int = 0) -> ReportKey:
    return ReportKey(lease_id=lease_id, key_id=key_id, ok=True, input_tokens=tokens, output_tokens=tokens // 2)


# -- strategies ------------------------------------------------------------------------------


def test_fill_first_keeps_granting_the_first_key_by_priority_while_it_works() -> None:
    spec = provider(
        "fill_first",
        KeySpec(key_id="a", api_key=SECRETS["a"], priority=1),
        KeySpec(key_id="b", api_key=SECRETS["b"], priority=0),
        KeySpec(key_id="c", api_key=SECRETS["c"], priority=0),
    )
    state = restore(None, spec)
    picked = []
    for n in range(4):
        state, key_id = grant(state, spec, f"l{n}")
        picked.append(key_id)
    assert picked == ["b", "b", "b", "b"]  # priority 0 first, then configured order
    state = report(state, spec, failed("l0", "b"), NOW)
    state, key_id = grant(state, spec, "l9")
    assert key_id == "c"
    state, key_id = grant(state, spec, "l10", now=NOW + 61)
    assert key_id == "b"  # back after its cooldown


def test_round_robin_continues_after_the_last_granted_key_and_skips_a_cooling_one() -> None:
    spec = provider("round_robin")
    state = restore(None, spec)
    picked = []
    for n in range(4):
        state, key_id = grant(state, spec, f"l{n}")
        picked.append(key_id)
    assert picked == ["a", "b", "c", "a"]
    state = report(state, spec, failed("l1", "b"), NOW)
    state, first = grant(state, spec, "l5")
    state, second = grant(state, spec, "l6")
    assert (first, second) == ("c", "a")


def test_random_is_decided_by_the_lease_id_and_reaches_every_usable_key() -> None:
    spec = provider("random")
    fresh = restore(None, spec)
    _, once = grant(fresh, spec, "lease-42")
    _, again = grant(fresh, spec, "lease-42")
    assert once == again
    seen = {grant(fresh, spec, f"lease-{n}")[1] for n in range(64)}
    assert seen == {"a", "b", "c"}
    benched = report(report(fresh, spec, failed("x", "a"), NOW), spec, failed("y", "c"), NOW)
    assert {grant(benched, spec, f"lease-{n}")[1] for n in range(64)} == {"b"}


def test_least_used_picks_the_key_granted_least_counting_leases_still_in_flight() -> None:
    spec = provider("least_used")
    state = restore(None, spec)
    picked = []
    for n in range(3):
        state, key_id = grant(state, spec, f"l{n}")  # none reported: all in flight
        picked.append(key_id)
    assert picked == ["a", "b", "c"]  # ties by order
    state = report(state, spec, ok("l0", "a"), NOW)
    state = report(state, spec, ok("l1", "b"), NOW)
    state, key_id = grant(state, spec, "l3")
    assert key_id == "a"  # all at one grant again: order decides
    state, key_id = grant(state, spec, "l4")
    assert key_id == "b"


# -- cooldowns --------------------------------------------------------------------------------


def test_when_every_key_cools_the_answer_says_which_and_when_the_first_is_back() -> None:
    spec = provider()
    state = restore(None, spec)
    state = report(state, spec, failed("l1", "a", "auth", 401, 300.0), NOW)
    state = report(state, spec, failed("l2", "b", "rate_limit", 429, 42.0), NOW)
    state = report(state, spec, failed("l3", "c", "billing", 402, 3600.0), NOW)
    state, outcome = lease(state, spec, "l4", NOW + 2)
    assert isinstance(outcome, Cooling)
    assert (outcome.until, outcome.kind) == (NOW + 42, "rate_limit")
    assert "all 3 keys" in outcome.why
    assert "b (…2222) rate limited (HTTP 429), back in 40 s" in outcome.why
    assert "the first is back in 40 s" in outcome.why
    assert "HTTP 401" in outcome.why and "HTTP 402" in outcome.why
    assert not any(secret in outcome.why for secret in SECRETS.values())
    state, key_id = grant(state, spec, "l5", now=NOW + 42)
    assert key_id == "b"


def test_a_cooldown_never_shortens_a_longer_one_and_none_benches_nothing() -> None:
    spec = provider()
    state = restore(None, spec)
    state = report(state, spec, failed("l1", "a", "billing", 402, 3600.0), NOW)
    state = report(state, spec, failed("l2", "a", "rate_limit", 429, 60.0), NOW + 10)
    assert state.keys["a"].cooling_until == NOW + 3600
    assert state.keys["a"].why is not None and state.keys["a"].why.kind == "billing"
    state = report(state, spec, failed("l3", "b", "bad_request", 400, None), NOW)
    assert state.keys["b"].cooling_until == 0.0
    assert state.keys["b"].failures == 1 and state.keys["b"].last_status == 400
    assert state.keys["a"].failures == 2


def test_a_pool_without_keys_says_so_and_expects_none_back() -> None:
    spec = provider("fill_first", *())
    spec = dataclasses.replace(spec, keys=())
    _, outcome = lease(restore(None, spec), spec, "l1", NOW)
    assert isinstance(outcome, Cooling)
    assert (outcome.until, outcome.kind) == (0.0, "")
    assert "no API key configured" in outcome.why


# -- exactly once ----------------------------------------------------------------------------


def test_a_second_report_of_a_lease_changes_nothing() -> None:
    spec = provider()
    state, key_id = grant(restore(None, spec), spec, "l1")
    state = report(state, spec, ok("l1", key_id, tokens=100), NOW)
    again = report(state, spec, failed("l1", key_id, cooldown=600.0), NOW)
    assert again is state
    key = state.keys["a"]
    assert (key.granted, key.successes, key.failures, key.input_tokens, key.output_tokens) == (1, 1, 0, 100, 50)
    assert state.in_flight == {}


def test_a_report_of_a_lease_the_state_never_saw_counts_once_and_benches_its_key() -> None:
    spec = provider()
    state = restore(None, spec)  # the incarnation that granted "ghost" died before saving
    state = report(state, spec, failed("ghost", "b", "rate_limit", 429, 120.0), NOW)
    key = state.keys["b"]
    assert (key.granted, key.failures, key.cooling_until) == (1, 1, NOW + 120)
    assert report(state, spec, failed("ghost", "b", cooldown=900.0), NOW) is state


def test_asking_again_with_a_granted_lease_id_answers_the_same_key_without_counting() -> None:
    spec = provider("round_robin")
    state, first = grant(restore(None, spec), spec, "l1")
    state, outcome = lease(state, spec, "l1", NOW)
    assert outcome == Granted(key_id=first, again=True)
    assert state.keys[first].granted == 1
    state = report(state, spec, ok("l1", first), NOW)
    state, outcome = lease(state, spec, "l1", NOW)  # a duplicate request after the report
    assert outcome == Granted(key_id=first, again=True)
    assert state.in_flight == {}


def test_settled_lease_ids_are_bounded_and_stale_leases_stop_counting_as_in_flight() -> None:
    spec = provider()
    state = restore(None, spec)
    for n in range(SETTLED_KEEP + 10):
        state = report(state, spec, ok(f"l{n}", "a"), NOW)
    remembered = settled_lease_ids(state)  # the oldest chunk went when the cap was passed
    assert SETTLED_KEEP - SETTLED_CHUNK < len(remembered) <= SETTLED_KEEP
    assert remembered[0] == f"l{SETTLED_KEEP + 10 - len(remembered)}" and remembered[-1] == f"l{SETTLED_KEEP + 9}"
    assert report(state, spec, ok(remembered[0], "a"), NOW) is state  # still remembered: counted once
    assert report(state, spec, ok("l5", "a"), NOW) is not state  # forgotten: counted again
    state, _ = grant(state, spec, "old")
    state, _ = grant(state, spec, "new", now=NOW + LEASE_TTL + 1)
    assert list(state.in_flight) == ["new"]
    assert report(state, spec, failed("old", "a", cooldown=60.0), NOW + LEASE_TTL + 2) is state


# -- configuration ----------------------------------------------------------------------------


def test_reload_drops_removed_keys_starts_new_ones_fresh_and_lifts_auth_benches_only() -> None:
    spec = provider()
    state = restore(None, spec)
    state = report(state, spec, failed("l1", "a", "auth", 401, 300.0), NOW)
    state = report(state, spec, failed("l2", "b", "rate_limit", 429, 60.0), NOW)
    state = report(state, spec, ok("l3", "c"), NOW)
    new_spec = provider(
        "fill_first", KeySpec(key_id="a", api_key="sk-fixed-9999"), KeySpec(key_id="b", api_key=SECRETS["b"]), KeySpec(key_id="d", api_key="sk-delta-4444")
    )
    state = reload(state, new_spec)
    assert list(state.keys) == ["a", "b", "d"]
    assert state.keys["a"].cooling_until == 0.0 and state.keys["a"].failures == 1
    assert state.keys["b"].cooling_until == NOW + 60
    assert state.keys["d"].granted == 0
    state, key_id = grant(state, new_spec, "l4")
    assert key_id == "a"


def test_restore_keeps_cooldowns_and_usage_but_refreshes_every_refreshable_key_again() -> None:
    spec = provider("fill_first", KeySpec(key_id="a", api_key="", refresh_command="print-token"), KeySpec(key_id="b", api_key=SECRETS["b"]))
    state = restore(None, spec)
    state = refreshed(refreshing(state, "a"), "a", True, NOW)
    state, _ = grant(state, spec, "l1")
    state = report(state, spec, failed("l2", "b", cooldown=600.0), NOW)
    state = refreshing(state, "a")
    text = encode_state(state)
    assert all(secret not in text for secret in SECRETS.values())
    again = restore(decode_state(text), spec)
    assert again.keys["a"].stale and not again.keys["a"].refreshing
    assert again.keys["a"].granted == 1 and list(again.in_flight) == ["l1"]
    assert again.keys["b"].cooling_until == NOW + 600
    fewer = restore(decode_state(text), dataclasses.replace(spec, keys=spec.keys[1:]))
    assert list(fewer.keys) == ["b"]


# -- refresh ----------------------------------------------------------------------------------


def test_one_refresh_at_a_time_per_key_and_leases_meanwhile_take_another_key_or_wait() -> None:
    spec = provider("fill_first", KeySpec(key_id="a", api_key="", refresh_command="print-token"), KeySpec(key_id="b", api_key=SECRETS["b"]))
    state = restore(None, spec)
    assert needs_refresh(state, spec, NOW) == ("a",)
    state = refreshing(state, "a")
    assert needs_refresh(state, spec, NOW) == ()
    state, key_id = grant(state, spec, "l1")
    assert key_id == "b"
    state = report(state, spec, failed("l1", "b"), NOW)
    state, outcome = lease(state, spec, "l2", NOW)
    assert outcome == Pending(refreshing=("a",))
    state = refreshed(state, "a", True, NOW)
    assert needs_refresh(state, spec, NOW) == ()
    state, key_id = grant(state, spec, "l2")
    assert key_id == "a"


def test_a_failed_refresh_benches_the_key_and_it_is_refreshed_again_later() -> None:
    spec = provider("fill_first", KeySpec(key_id="a", api_key="", refresh_command="print-token"))
    state = refreshed(refreshing(restore(None, spec), "a"), "a", False, NOW, message="its refresh command exited with status 3")
    state, outcome = lease(state, spec, "l1", NOW)
    assert isinstance(outcome, Cooling) and outcome.until == NOW + REFRESH_RETRY
    assert "exited with status 3" in outcome.why
    assert needs_refresh(state, spec, NOW + 1) == ()
    assert needs_refresh(state, spec, NOW + REFRESH_RETRY) == ("a",)


def test_an_auth_failure_of_a_refreshable_key_refreshes_it_at_once_and_success_lifts_the_bench() -> None:
    spec = provider("fill_first", KeySpec(key_id="a", api_key="sk-configured-0000", refresh_command="print-token"))
    state = refreshed(refreshing(restore(None, spec), "a"), "a", True, NOW)
    state, _ = grant(state, spec, "l1")
    state = report(state, spec, failed("l1", "a", "auth", 401, 300.0), NOW)
    assert state.keys["a"].stale and state.keys["a"].cooling_until == NOW + 300
    assert needs_refresh(state, spec, NOW) == ("a",)  # the auth bench does not wait
    state = refreshed(refreshing(state, "a"), "a", True, NOW + 1)
    state, key_id = grant(state, spec, "l2", now=NOW + 1)
    assert key_id == "a"


# -- views ------------------------------------------------------------------------------------


def test_the_snapshot_shows_keys_by_name_and_last_four_never_the_secret() -> None:
    spec = provider("fill_first", *(KeySpec(key_id=k, api_key=v, label=f"{k}-label") for k, v in SECRETS.items()))
    state = restore(None, spec)
    state, _ = grant(state, spec, "l1")
    state = report(state, spec, failed("l0", "b", "rate_limit", 429, 60.0), NOW)
    status = snapshot(state, spec, NOW + 10)
    text = to_json(status).decode() + repr(status)
    assert not any(secret in text for secret in SECRETS.values())
    rows = {row.key_id: row for row in status.keys}
    assert rows["a"].shown == "a-label (…1111)" and rows["a"].in_flight == 1 and rows["a"].condition == "available"
    assert rows["b"].condition == "cooling" and rows["b"].cooling_until == NOW + 60
    assert rows["b"].why == "rate limited (HTTP 429), back in 50 s"
    assert (status.available, status.in_flight, status.strategy) == (2, 1, "fill_first")
    later = snapshot(state, spec, NOW + 61)
    assert later.available == 3 and later.keys[1].why == ""


def test_only_a_change_of_a_bench_or_of_the_keys_asks_for_a_prompt_save() -> None:
    spec = provider()
    state = restore(None, spec)
    granted, _ = grant(state, spec, "l1")
    counted = report(granted, spec, ok("l1", "a"), NOW)
    assert not bench_changed(state, granted) and not bench_changed(granted, counted)
    assert bench_changed(counted, report(counted, spec, failed("l2", "b"), NOW))
    assert bench_changed(state, reload(state, dataclasses.replace(spec, keys=spec.keys[:2])))


def test_a_saved_state_round_trips_and_garbage_is_refused() -> None:
    spec = provider()
    state, _ = grant(restore(None, spec), spec, "l1")
    state = report(state, spec, failed("l1", "a"), NOW)
    assert decode_state(encode_state(state)) == state
    with pytest.raises(msgspec.ValidationError):
        decode_state('{"keys": 3}')


def test_a_state_saved_in_the_first_layout_still_loads_with_its_benches_and_usage() -> None:
    spec = provider()
    first_layout = (
        '{"version": 1, "keys": {"a": {"cooling_until": %s, "granted": 4, "successes": 3, "failures": 1}},'
        ' "in_flight": {}, "settled": [{"lease_id": "l1", "key_id": "a"}], "last_granted": "a"}'
    ) % (NOW + 60)
    state = restore(decode_state(first_layout), spec)
    assert state.version == 2 and settled_lease_ids(state) == []
    assert state.keys["a"].cooling_until == NOW + 60 and state.keys["a"].granted == 4
    assert decode_state(encode_state(state)) == state


# -- properties -------------------------------------------------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("lease"), st.integers(0, 30)),
    st.tuples(st.just("report"), st.integers(0, 30), st.booleans(), st.sampled_from([None, 0.0, 5.0, 60.0, 300.0])),
    st.tuples(st.just("ghost"), st.integers(0, 30), st.sampled_from(["a", "b", "c"]), st.sampled_from([None, 30.0])),
    st.tuples(st.just("wait"), st.floats(0.0, 120.0)),
)


@settings(max_examples=300)
@given(strategy=st.sampled_from(["fill_first", "round_robin", "random", "least_used"]), steps=st.lists(_STEP, max_size=80))
def test_no_key_is_granted_while_benched_and_usage_counts_each_reported_lease_once(strategy: Strategy, steps: list[tuple[object, ...]]) -> None:
    spec = provider(strategy)
    state = restore(None, spec)
    now = NOW
    holder: dict[str, str] = {}
    """lease id -> key, as granted"""
    counted: dict[str, str] = {}
    """lease id -> key, for each lease id reported (first report only)"""
    ghosts: dict[str, int] = {"a": 0, "b": 0, "c": 0}
    for step in steps:
        match step:
            case ("lease", int(n)):
                before = state
                state, outcome = lease(state, spec, f"l{n}", now)
                if isinstance(outcome, Granted) and not outcome.again:
                    key = before.keys[outcome.key_id]
                    assert key.cooling_until <= now and not key.stale and not key.refreshing
                    assert f"l{n}" not in holder and f"l{n}" not in counted
                    holder[f"l{n}"] = outcome.key_id
                elif isinstance(outcome, Cooling):
                    assert all(k.cooling_until > now for k in state.keys.values())
                    assert outcome.until == min(k.cooling_until for k in state.keys.values())
            case ("report", int(n), bool(success), cooldown) if f"l{n}" in holder:
                lease_id = f"l{n}"
                state = report(state, spec, ok(lease_id, "a") if success else failed(lease_id, "a", cooldown=cooldown), now)  # type: ignore[arg-type]
                counted.setdefault(lease_id, holder[lease_id])
            case ("ghost", int(n), str(key_id), cooldown):
                lease_id = f"g{n}"
                state = report(state, spec, failed(lease_id, key_id, cooldown=cooldown), now)  # type: ignore[arg-type]
                if lease_id not in counted:
                    counted[lease_id] = key_id
                    ghosts[key_id] += 1
            case ("wait", float(seconds)):
                now += seconds
    for key_id, key in state.keys.items():
        reported = sum(1 for k in counted.values() if k == key_id)
        assert key.successes + key.failures == reported
        assert key.granted == sum(1 for k in holder.values() if k == key_id) + ghosts[key_id]
    assert set(state.in_flight) == set(holder) - set(counted)
