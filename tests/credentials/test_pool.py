"""The credential pool actor in a real runtime with a real store file: leases and reports
through messages, debounced saves, crashes and restarts that lose nothing and count nothing
twice, refresh commands, reloads. Every wait is a reply read with a deadline."""

from __future__ import annotations

import time
from pathlib import Path

from actors.credentials import KeySpec, decode_state, pool_path
from actors.store import StoreWriter
from actors.store._credentials_rows import read_pool_state
from protocols import GetStoreStatistics, InjectCrash, LeaseKey, NoKeyAvailable, ReloadPool, ReportKey, SavePoolState, StoreStatistics
from supervisor import ChildSpec
from tests.conftest import DEADLINE, Probe

from .pool_kit import SECRETS, StartRuntime, hold, leased, provider, row, start_pools, status, take


def test_leases_rotate_away_from_a_key_the_report_benched_until_none_is_left(start_runtime: StartRuntime, tmp_path: Path) -> None:
    _, pool = start_pools(start_runtime, tmp_path / "state.db", [provider()])
    first = leased(pool, "l1")
    assert (first.key_id, first.api_key, first.provider) == ("a", SECRETS["a"], "openai")
    assert SECRETS["a"] not in repr(first)
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=False, kind="rate_limit", status=429, cooldown=60.0))
    second = leased(pool, "l2")
    assert (second.key_id, second.api_key) == ("b", SECRETS["b"])
    pool.tell(ReportKey(lease_id="l2", key_id="b", ok=True, input_tokens=120, output_tokens=30))
    assert leased(pool, "l3").key_id == "b"
    shown = status(pool)
    assert (row(shown, "a").condition, row(shown, "a").failures, row(shown, "a").last_status) == ("cooling", 1, 429)
    assert (row(shown, "b").granted, row(shown, "b").successes, row(shown, "b").in_flight, row(shown, "b").input_tokens) == (2, 1, 1, 120)

    before = time.time()
    pool.tell(ReportKey(lease_id="l3", key_id="b", ok=False, kind="billing", status=402, cooldown=3600.0))
    none = take(pool, "l4")
    assert isinstance(none, NoKeyAvailable)
    assert before - 1 + 60 <= none.until <= time.time() + 60  # a is back first
    assert none.kind == "rate_limit"
    assert "a (…1111) rate limited (HTTP 429)" in none.reason and "b (…2222)" in none.reason
    assert not any(secret in none.reason for secret in SECRETS.values())


def test_a_crash_of_the_pool_keeps_its_state_and_reports_sent_meanwhile_count_once(start_runtime: StartRuntime, tmp_path: Path) -> None:
    runtime, pool = start_pools(start_runtime, tmp_path / "state.db", [provider()])
    assert leased(pool, "l1").key_id == "a"
    assert leased(pool, "l2").key_id == "a"
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=False, kind="rate_limit", status=429, cooldown=600.0))
    pool.tell(InjectCrash(reason="test"))
    # Told while the pool restarts: the address keeps them for the next incarnation.
    pool.tell(ReportKey(lease_id="l2", key_id="a", ok=True, input_tokens=10))
    pool.tell(ReportKey(lease_id="l2", key_id="a", ok=True, input_tokens=10))
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=False, kind="rate_limit", status=429, cooldown=600.0))
    shown = status(pool)
    assert runtime.lookup(pool_path("openai")).statistics().incarnation == 2
    a = row(shown, "a")
    assert (a.condition, a.granted, a.successes, a.failures, a.input_tokens, a.in_flight) == ("cooling", 2, 1, 1, 10, 0)
    assert leased(pool, "l3").key_id == "b"


def test_a_whole_restart_on_the_same_store_keeps_cooldowns_usage_and_leases_in_flight(start_runtime: StartRuntime, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first, pool = start_pools(start_runtime, db, [provider()])
    assert leased(pool, "l1").key_id == "a"
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=False, kind="auth", status=401, cooldown=600.0))
    assert leased(pool, "l2").key_id == "b"  # still in flight when the process stops
    assert leased(pool, "l3").key_id == "b"
    pool.tell(ReportKey(lease_id="l3", key_id="b", ok=True, output_tokens=7))
    status(pool)
    assert first.stop(timeout=DEADLINE)

    _, pool = start_pools(start_runtime, db, [provider()])
    shown = status(pool)
    a, b = row(shown, "a"), row(shown, "b")
    assert (a.condition, a.kind, a.status, a.failures) == ("cooling", "auth", 401, 1)
    assert (b.granted, b.successes, b.in_flight, b.output_tokens) == (2, 1, 1, 7)
    pool.tell(ReportKey(lease_id="l2", key_id="b", ok=True))  # granted by the dead process
    pool.tell(ReportKey(lease_id="l3", key_id="b", ok=True, output_tokens=7))  # reported already
    # Granted by a process that died before saving: counted once, its cooldown applies.
    pool.tell(ReportKey(lease_id="ghost", key_id="b", ok=False, kind="rate_limit", status=429, cooldown=30.0))
    pool.tell(ReportKey(lease_id="ghost", key_id="b", ok=False, kind="rate_limit", status=429, cooldown=30.0))
    b = row(status(pool), "b")
    assert (b.granted, b.successes, b.failures, b.in_flight, b.output_tokens, b.condition) == (3, 2, 1, 0, 7, "cooling")
    assert isinstance(take(pool, "l4"), NoKeyAvailable)


def test_usage_waits_for_the_debounce_a_cooldown_is_saved_at_once_and_saves_in_between_coalesce(start_runtime: StartRuntime, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    saves = Probe()
    runtime, pool = start_pools(start_runtime, db, [provider()], saves=saves, save_delay=3600.0)
    status(pool)  # loaded
    gate = hold(runtime.lookup("/store"))
    for n in range(3):
        lease_id = f"ok{n}"
        assert leased(pool, lease_id).key_id == "a"
        pool.tell(ReportKey(lease_id=lease_id, key_id="a", ok=True, input_tokens=1))
    pool.tell(ReportKey(lease_id="ok0", key_id="a", ok=False, kind="rate_limit", cooldown=60.0))  # a repeat: nothing
    status(pool)
    assert saves.drain() == []  # usage alone waits (save_delay is an hour here)
    assert leased(pool, "bad").key_id == "a"
    pool.tell(ReportKey(lease_id="bad", key_id="a", ok=False, kind="rate_limit", status=429, cooldown=60.0))
    assert leased(pool, "worse").key_id == "b"
    pool.tell(ReportKey(lease_id="worse", key_id="b", ok=False, kind="overloaded", status=529, cooldown=5.0))
    status(pool)  # both cooldowns handled while the first save waits in the held writer
    gate.release.set()

    first = saves.get()
    assert isinstance(first, SavePoolState)
    saved = decode_state(first.state)
    assert saved.keys["a"].cooling_until > 0 and saved.keys["a"].successes == 3
    assert saved.keys["b"].cooling_until == 0.0  # the second bench waited for this save's answer
    second = saves.get()
    both = decode_state(second.state)
    assert both.keys["a"].cooling_until > 0 and both.keys["b"].cooling_until > 0 and both.keys["b"].failures == 1
    status(pool)
    assert isinstance(runtime.lookup("/store").ask(GetStoreStatistics()), StoreStatistics)
    assert saves.drain() == []
    text = read_pool_state(db, "openai")
    assert text is not None and decode_state(text) == both
    assert not any(secret in text for secret in SECRETS.values())


def test_a_refresh_command_runs_once_for_concurrent_leases_and_again_after_an_auth_failure(start_runtime: StartRuntime, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = f'echo run >> "{runs}"; n=$(wc -l < "{runs}"); echo "tok-$((n))-abcdefgh"'
    _, pool = start_pools(start_runtime, None, [provider(KeySpec(key_id="a", api_key="", refresh_command=command))])
    replies = Probe()
    pool.tell(ReportKey(lease_id="none", key_id="zz", ok=True))  # a key the pool does not have: harmless
    for lease_id in ("l1", "l2"):
        pool.tell(LeaseKey(lease_id=lease_id, reply_to=replies))
    answers = [replies.get(), replies.get()]
    assert [(a.lease_id, a.api_key) for a in answers] == [("l1", "tok-1-abcdefgh"), ("l2", "tok-1-abcdefgh")]
    assert runs.read_text().count("run") == 1
    pool.tell(ReportKey(lease_id="l1", key_id="a", ok=False, kind="auth", status=401, cooldown=300.0))
    again = leased(pool, "l3")
    assert again.api_key == "tok-2-abcdefgh"
    assert runs.read_text().count("run") == 2
    assert row(status(pool), "a").condition == "available"


def test_a_lease_waiting_for_a_refresh_is_answered_by_the_next_incarnation_after_a_crash(start_runtime: StartRuntime, tmp_path: Path) -> None:
    go = tmp_path / "go"
    # The fake refresh command waits for the test's go (a file), as a slow token service would.
    command = f'while [ ! -e "{go}" ]; do sleep 0.01; done; echo tok-abcdefgh'
    runtime, pool = start_pools(
        start_runtime, tmp_path / "state.db", [provider(KeySpec(key_id="a", api_key="", refresh_command=command))], refresh_timeout=DEADLINE
    )
    replies = Probe()
    pool.tell(LeaseKey(lease_id="l1", reply_to=replies))
    assert row(status(pool), "a").condition == "refreshing"  # l1 waits in the pool
    pool.tell(InjectCrash(reason="test"))
    assert row(status(pool), "a").condition == "refreshing"  # the next incarnation refreshes again
    assert runtime.lookup(pool_path("openai")).statistics().incarnation == 2
    go.touch()
    answer = replies.get()
    assert (answer.lease_id, answer.api_key) == ("l1", "tok-abcdefgh")  # without the hand-on, never answered
    assert replies.drain() == []


def test_a_refresh_command_that_fails_answers_no_key_with_its_reason(start_runtime: StartRuntime) -> None:
    _, pool = start_pools(start_runtime, None, [provider(KeySpec(key_id="a", api_key="", refresh_command="exit 3"))])
    before = time.time()
    answer = take(pool, "l1")
    assert isinstance(answer, NoKeyAvailable)
    assert "refresh command exited with status 3" in answer.reason and answer.kind == "refresh"
    assert before + 59 <= answer.until <= time.time() + 60
    assert row(status(pool), "a").condition == "cooling"


def test_a_reload_lifts_auth_benches_adds_keys_and_outlives_a_crash(start_runtime: StartRuntime, tmp_path: Path) -> None:
    _, pool = start_pools(start_runtime, tmp_path / "state.db", [provider()])
    for lease_id, key_id in (("l1", "a"), ("l2", "b")):
        assert leased(pool, lease_id).key_id == key_id
        pool.tell(ReportKey(lease_id=lease_id, key_id=key_id, ok=False, kind="auth", status=401, cooldown=300.0))
    assert isinstance(take(pool, "l3"), NoKeyAvailable)
    pool.tell(ReloadPool(spec=provider(KeySpec(key_id="c", api_key="sk-charlie-secret-3333"), KeySpec(key_id="a", api_key="sk-alpha-fixed-4444"))))
    answer = leased(pool, "l4")
    assert (answer.key_id, answer.api_key) == ("c", "sk-charlie-secret-3333")
    pool.tell(InjectCrash(reason="test"))
    shown = status(pool)
    assert [k.key_id for k in shown.keys] == ["c", "a"]
    assert row(shown, "a").condition == "available" and row(shown, "c").in_flight == 1


def test_a_new_pool_starts_from_the_state_its_provider_saved_in_the_store(start_runtime: StartRuntime, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    runtime = start_runtime([ChildSpec(id="store", actor=StoreWriter, args=(str(db),))])
    replies = Probe()
    saved = '{"version":1,"keys":{"b":{"cooling_until":9999999999.0,"why":{"kind":"billing","status":402},"failures":4}}}'
    runtime.lookup("/store").tell(SavePoolState(provider="openai", state=saved, saved_at=1.0, token="t", reply_to=replies))
    assert replies.get().token == "t"
    assert runtime.stop(timeout=DEADLINE)
    _, pool = start_pools(start_runtime, db, [provider()])
    shown = status(pool)
    assert (row(shown, "b").condition, row(shown, "b").failures, row(shown, "a").condition) == ("cooling", 4, "available")
