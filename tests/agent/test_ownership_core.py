"""The cluster lease of one session incarnation (pure): grants, renewals, failures, fences, not_owner turns."""

from __future__ import annotations

import math

from actors.agent._machine import SessionState, Turn
from actors.agent._ownership_core import Lease, after_failed, granted, lapsed, not_owner_failures, rejections, renews, to_release, write_fence
from actors.agent._turn_state import Calling
from protocols import Token
from protocols._leases import Fence
from protocols._session import CompressContext, StartTurn, SwitchModel


def test_a_grant_fences_with_its_epoch_and_holds_a_ttl_after_it_was_asked() -> None:
    lease = granted(Lease(asked=100.0), "n1", 3, 30.0)
    assert lease.fence == Fence(node_id="n1", epoch=3) and lease.until == 130.0
    assert not lapsed(lease, 130.0) and lapsed(lease, 130.5)
    assert not lapsed(Lease(), 1e12)  # not in cluster mode, or before any grant: never lapsed
    assert Lease().until == math.inf


def test_only_a_granted_lease_not_lost_is_renewed_and_released() -> None:
    held = granted(Lease(), "n1", 1, 30.0)
    assert not renews(Lease()) and renews(held) and not renews(Lease(fence=held.fence, lost=True))
    assert to_release(held) == held.fence and to_release(Lease()) is None
    assert to_release(Lease(fence=held.fence, lost=True)) is None  # a lost lease is another node's: never released


def test_an_unanswered_acquire_gives_up_an_unanswered_renewal_tries_again_and_a_lost_lease_ignores_both() -> None:
    held = granted(Lease(), "n1", 1, 30.0)
    assert after_failed(Lease()) == "give_up"
    assert after_failed(held) == "retry"
    assert after_failed(Lease(lost=True)) == after_failed(Lease(fence=held.fence, lost=True)) == "ignore"


def test_a_write_carries_the_lease_fence_or_epoch_zero_before_any_grant() -> None:
    assert write_fence(Lease(), "n1") == Fence(node_id="n1", epoch=0)
    assert write_fence(granted(Lease(), "n1", 7, 30.0), "n1") == Fence(node_id="n1", epoch=7)


def test_a_refused_lease_rejects_each_waiting_turn_naming_the_owner_and_a_bounded_wait() -> None:
    stash = [StartTurn(text="a", turn_id="t1"), StartTurn(text="b"), SwitchModel(model="m"), StartTurn(text="c", turn_id="t2")]
    rejected = rejections("s1", stash, "n2", expires_at=1020.0, wall=1000.0, ttl=30.0)
    assert [r.turn_id for r in rejected] == ["t1", "t2"]
    assert rejected[0].owner == "n2" and rejected[0].retry_after == 20.0 and "node n2" in rejected[0].reason
    assert rejections("s1", stash, "", expires_at=2000.0, wall=1000.0, ttl=30.0)[0].retry_after == 30.0  # at most the ttl
    unnamed = rejections("s1", stash, "", expires_at=900.0, wall=1000.0, ttl=30.0)[0]
    assert unnamed.retry_after == 1.0 and "another node" in unnamed.reason  # at least a second


def test_before_the_load_every_asked_and_every_left_open_turn_fails_not_owner_once() -> None:
    stash = [StartTurn(text="a", turn_id="t1"), CompressContext(turn_id="c1"), StartTurn(text="b")]
    failed = not_owner_failures("s1", "refused", None, True, stash, ["t0", "t1"])
    assert [f.turn_id for f in failed] == ["t0", "t1", "c1"]
    assert all(f.kind == "not_owner" and "retry the request" in f.error for f in failed)


def test_after_the_load_only_a_turn_a_refused_write_ended_fails_not_owner() -> None:
    turn = Turn(turn_id="t9", phase=Calling(token=Token(step="model", turn_id="t9")), deadline=60.0)
    running = SessionState(session_id="s1", system_prompt="", turn=turn)
    assert [f.turn_id for f in not_owner_failures("s1", "fenced", running, False, [], ["t9"])] == ["t9"]
    assert not_owner_failures("s1", "fenced", running, True, [], ["t9"]) == []  # still alive: its cancel settles it
    assert not_owner_failures("s1", "fenced", SessionState(session_id="s1", system_prompt=""), False, [], []) == []
