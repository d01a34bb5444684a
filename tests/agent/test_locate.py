"""Where a node serves a request for a session (``actors.agent._locate``), pure: any lease row and
nodes table, read at one instant, gives exactly one answer, and it never sends a request to a
node that is not live nor serves here a session another live node holds live."""

from __future__ import annotations

import hypothesis
from hypothesis import strategies as st

from actors.agent._locate import Forward, Local, TakeOver, Unavailable, forward_until, live_nodes, locate, node_is_live, retry_unreachable
from protocols._leases import LeaseRecord, NodeRecord

NODES = ("me", "b", "c")
TTL = 6.0
NOW = 1_000.0

leases = st.none() | st.builds(
    LeaseRecord,
    session_id=st.just("s"),
    node_id=st.sampled_from(NODES),
    epoch=st.integers(min_value=1, max_value=5),
    expires_at=st.floats(min_value=NOW - 20, max_value=NOW + 20),
)
node_rows = st.dictionaries(
    st.sampled_from(NODES),
    st.tuples(st.floats(min_value=NOW - 20, max_value=NOW), st.sampled_from(("", "http://10.0.0.2:8642"))),
)


@hypothesis.given(leases, node_rows)
@hypothesis.settings(max_examples=500, deadline=None)
def test_every_lease_and_nodes_table_gives_one_safe_answer(lease: LeaseRecord | None, rows: dict[str, tuple[float, str]]) -> None:
    nodes = {n: NodeRecord(node_id=n, address=address, heartbeat_at=at) for n, (at, address) in rows.items()}
    where = locate(lease, nodes, "me", NOW, TTL)
    held_live_elsewhere = lease is not None and lease.node_id != "me" and lease.expires_at > NOW
    owner = nodes.get(lease.node_id) if lease is not None else None
    owner_live = node_is_live(owner, NOW, TTL)
    match where:
        case Forward(node_id=node_id, address=address):
            assert lease is not None and node_id == lease.node_id != "me" and held_live_elsewhere and owner_live and address
            # A forward is read again at a later instant, and no later than the first at which
            # the session could be served elsewhere were the owner to stop now.
            assert owner is not None
            again = forward_until(lease, owner, TTL)
            assert NOW < again == min(lease.expires_at, owner.heartbeat_at + TTL)
            assert not isinstance(locate(lease, nodes, "me", again, TTL), Forward)
        case Local():
            assert not held_live_elsewhere  # never two nodes serving one live lease
            assert lease is None or lease.node_id == "me" or lease.expires_at <= NOW
        case TakeOver(previous=previous, epoch=epoch):
            assert lease is not None and (previous, epoch) == (lease.node_id, lease.epoch) and previous != "me" and owner is not None and not owner_live
        case Unavailable(retry_after=after):
            assert held_live_elsewhere and after > 0 and (owner is None or (owner_live and not owner.address))


def test_the_four_answers() -> None:
    lease = LeaseRecord(session_id="s", node_id="b", epoch=3, expires_at=NOW + 4)
    beat = {"b": NodeRecord(node_id="b", address="http://b:1", heartbeat_at=NOW - 1)}
    assert locate(None, {}, "me", NOW, TTL) == Local("the session has no lease")
    assert isinstance(locate(LeaseRecord(session_id="s", node_id="me", epoch=1, expires_at=NOW - 100), {}, "me", NOW, TTL), Local)
    assert locate(lease, beat, "me", NOW, TTL) == Forward(node_id="b", address="http://b:1")
    silent = {"b": NodeRecord(node_id="b", address="http://b:1", heartbeat_at=NOW - TTL)}  # a ttl without a beat: gone
    assert locate(lease, silent, "me", NOW, TTL) == TakeOver(previous="b", epoch=3)
    released = LeaseRecord(session_id="s", node_id="b", epoch=3, expires_at=NOW)
    assert isinstance(locate(released, beat, "me", NOW, TTL), Local)  # b let it go and lives on
    nameless = {"b": NodeRecord(node_id="b", address="", heartbeat_at=NOW)}
    unreachable = locate(lease, nameless, "me", NOW, TTL)
    assert isinstance(unreachable, Unavailable) and "advertise_address" in unreachable.reason and unreachable.retry_after == 4
    assert isinstance(locate(lease, {}, "me", NOW, TTL), Unavailable)  # held live by a node that never beat
    assert [n.node_id for n in live_nodes({**beat, "c": NodeRecord(node_id="c", address="", heartbeat_at=NOW - 7)}, NOW, TTL)] == ["b"]


def test_an_unreachable_owner_is_retried_when_the_session_may_be_taken_over_at_most_a_third_of_a_ttl_later() -> None:
    assert retry_unreachable(2.3, 10.0) == 3  # its lease or heartbeat ends in 2.3 s: retry then (whole seconds, rounded up)
    assert retry_unreachable(0.2, 10.0) == 1 and retry_unreachable(-1.0, 10.0) == 1  # at least a second
    assert retry_unreachable(25.0, 30.0) == 10  # a restarted owner beats again within a third of the ttl
    assert retry_unreachable(float("inf"), 9.0) == 3
