"""The lease decisions (``actors.store._lease``), pure: any history of acquires, renewals and
releases by three nodes on a moving clock keeps one live holder at most, epochs that only grow,
and a superseded fence refused for ever."""

from __future__ import annotations

import hypothesis
from hypothesis import strategies as st

from actors.store._lease import Refusal, check_fence, decide_acquire, decide_release, decide_renew, is_live
from protocols._leases import Fence, LeaseRecord

NODES = ("a", "b", "c")

step = st.tuples(
    st.sampled_from(("acquire", "renew", "release", "write")),
    st.sampled_from(NODES),
    st.floats(min_value=0, max_value=20),  # how far the store's clock moves first
    st.floats(min_value=0.5, max_value=30),  # ttl
)


@hypothesis.given(st.lists(step, max_size=60))
@hypothesis.settings(max_examples=300, deadline=None)
def test_any_history_keeps_one_holder_rising_epochs_and_superseded_fences_refused(history: list[tuple[str, str, float, float]]) -> None:
    lease: LeaseRecord | None = None
    now = 0.0
    held: dict[str, int] = {}  # what each node believes it holds: its last granted epoch
    superseded: set[tuple[str, int]] = set()
    for action, node, advance, ttl in history:
        now += advance
        before = lease
        if action == "acquire":
            decided = decide_acquire(lease, "s", node, now, ttl)
            if isinstance(decided, Refusal):
                assert is_live(lease, now) and lease is not None and lease.node_id != node
            else:
                lease, held[node] = decided, decided.epoch
        elif action == "renew" and node in held:
            renewed = decide_renew(lease, "s", node, held[node], now, ttl)
            if not isinstance(renewed, Refusal):
                assert renewed.epoch == held[node]
                lease = renewed
        elif action == "release" and node in held:
            lease = decide_release(lease, node, held[node], now) or lease
        elif action == "write" and node in held:
            accepted = check_fence(lease, "s", Fence(node_id=node, epoch=held[node]), now) is None
            assert accepted == (lease is not None and (lease.node_id, lease.epoch) == (node, held[node]) and lease.expires_at > now)
        if before is not None and lease is not None:
            assert lease.epoch >= before.epoch
            if (lease.node_id, lease.epoch) != (before.node_id, before.epoch):
                assert lease.epoch == before.epoch + 1
                superseded.add((before.node_id, before.epoch))
        for old_node, old_epoch in superseded:  # a lost tenancy never writes again
            assert check_fence(lease, "s", Fence(node_id=old_node, epoch=old_epoch), now) is not None


def test_a_renewal_keeps_the_epoch_and_a_lapse_then_acquire_raises_it() -> None:
    first = decide_acquire(None, "s", "a", 100.0, 10.0)
    assert first == LeaseRecord(session_id="s", node_id="a", epoch=1, expires_at=110.0)
    assert isinstance(first, LeaseRecord)
    assert decide_renew(first, "s", "a", 1, 105.0, 10.0) == LeaseRecord(session_id="s", node_id="a", epoch=1, expires_at=115.0)
    lapsed = decide_renew(first, "s", "a", 1, 110.0, 10.0)
    assert isinstance(lapsed, Refusal) and "ended 0.0 s ago" in lapsed.reason
    again = decide_acquire(first, "s", "a", 111.0, 10.0)
    assert isinstance(again, LeaseRecord) and again.epoch == 2
    nameless = decide_acquire(None, "s", "", 0.0, 10.0)
    assert isinstance(nameless, Refusal) and "cluster.node_id" in nameless.reason
