"""Fenced session ownership, on both backends: leases, their epochs, and writes fenced by them.

The writers are real :class:`StoreWriter` actors in real runtimes on a SQLite file or a real
Postgres database; the store's clock is a :class:`StoreClock` the test moves (no sleeps).
Two nodes are two writers on one store, each in its own runtime, as two processes would be.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from actors import Address
from actors.store import SCHEMA_VERSION, StoreReader, open_writer, settle_interrupted
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease, read_leases, read_nodes
from actors.store._settle import end_leases
from protocols import ChatMessage, ToolCall
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRecord, LeaseRefused, LeaseReleased, NodeHeartbeat, NodeSeen, ReleaseLease, RenewLease
from protocols._store import (
    AppendMessages,
    CreateSession,
    EndSession,
    GetStoreStatistics,
    MessagesPersisted,
    RemoveLastTurn,
    SessionCreated,
    StoreFailed,
    TurnMark,
    UpdateSessionTotals,
)
from supervisor import ChildSpec
from tests.store_kit import ControlledWriter, Hold, Replies, StartRuntime, hold, user

T0 = 1_000.0
TTL = 30.0


class StoreClock:
    """The store's clock, moved by the test (read from the writer's thread)."""

    def __init__(self, now: float = T0) -> None:
        self._now = now
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now


class Node:
    """One node: its own runtime and store writer on the shared store, and its own reply probe."""

    def __init__(self, start_runtime: StartRuntime, location: str, clock: StoreClock, node_id: str, busy_timeout: float = 2.0) -> None:
        options = {"clock": clock, "busy_timeout": busy_timeout}
        runtime = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(location,), kwargs=options)])
        self.store: Address[Any] = runtime.lookup("/store")
        self.replies = Replies()
        self.node_id = node_id

    def ask(self, command: Any) -> Any:
        self.store.tell(command)
        return self.replies.get()

    def acquire(self, session_id: str, ttl: float = TTL) -> Any:
        return self.ask(AcquireLease(session_id=session_id, node_id=self.node_id, ttl=ttl, token="a", reply_to=self.replies))

    def renew(self, session_id: str, epoch: int, ttl: float = TTL) -> Any:
        return self.ask(RenewLease(session_id=session_id, node_id=self.node_id, epoch=epoch, ttl=ttl, token="r", reply_to=self.replies))

    def release(self, session_id: str, epoch: int) -> Any:
        return self.ask(ReleaseLease(session_id=session_id, node_id=self.node_id, epoch=epoch, token="x", reply_to=self.replies))

    def fence(self, epoch: int) -> Fence:
        return Fence(node_id=self.node_id, epoch=epoch)

    def append(self, session_id: str, *messages: ChatMessage, epoch: int | None, turn: TurnMark | None = None) -> Any:
        fence = None if epoch is None else self.fence(epoch)
        return self.ask(AppendMessages(session_id=session_id, messages=messages, turn=turn, fence=fence, token="w", reply_to=self.replies))


def lease_of(location: str, session_id: str) -> LeaseRecord | None:
    db = open_store_reader(location)
    try:
        return read_lease(db, session_id)
    finally:
        db.close()


def granted(node: Node, session_id: str, epoch: int, expires_at: float) -> LeaseGranted:
    return LeaseGranted(session_id=session_id, node_id=node.node_id, epoch=epoch, expires_at=expires_at, token="a")


def test_a_lease_is_acquired_renewed_and_released_and_the_next_tenancy_has_a_higher_epoch(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a = Node(start_runtime, location, clock, "node-a")
    assert a.acquire("s1") == granted(a, "s1", 1, T0 + TTL)
    clock.set(T0 + 10)
    assert a.acquire("s1") == granted(a, "s1", 1, T0 + 10 + TTL)  # its own live lease: the same epoch
    clock.set(T0 + 20)
    renewed = a.renew("s1", 1)
    assert isinstance(renewed, LeaseGranted) and (renewed.epoch, renewed.expires_at) == (1, T0 + 20 + TTL)
    assert lease_of(location, "s1") == LeaseRecord(session_id="s1", node_id="node-a", epoch=1, expires_at=T0 + 20 + TTL)

    assert a.release("s1", 2) == LeaseReleased(session_id="s1", node_id="node-a", released=False, token="x")  # not its epoch
    assert a.release("s1", 1) == LeaseReleased(session_id="s1", node_id="node-a", released=True, token="x")
    assert lease_of(location, "s1") == LeaseRecord(session_id="s1", node_id="node-a", epoch=1, expires_at=T0 + 20)
    stale = a.renew("s1", 1)
    assert isinstance(stale, LeaseRefused) and "ended" in stale.reason and "acquire the lease again" in stale.reason
    assert a.acquire("s1") == granted(a, "s1", 2, T0 + 20 + TTL)  # a new tenancy: whatever epoch 1 sent is fenced

    bad = a.acquire("s2", ttl=0)
    assert isinstance(bad, LeaseRefused) and "positive number of seconds" in bad.reason and bad.owner == ""
    assert lease_of(location, "s2") is None


def test_a_second_node_is_refused_while_the_lease_is_live_and_takes_over_after_expiry_with_the_epoch_raised(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    assert a.acquire("s1") == granted(a, "s1", 1, T0 + TTL)
    clock.set(T0 + TTL - 0.5)
    refused = b.acquire("s1")
    assert isinstance(refused, LeaseRefused)
    assert (refused.owner, refused.epoch, refused.expires_at) == ("node-a", 1, T0 + TTL)
    assert "owned by node 'node-a'" in refused.reason
    not_mine = b.renew("s1", 1)
    assert isinstance(not_mine, LeaseRefused) and not_mine.owner == "node-a"

    clock.set(T0 + TTL)  # expired at its instant
    assert b.acquire("s1") == granted(b, "s1", 2, T0 + 2 * TTL)
    lost = a.renew("s1", 1)
    assert isinstance(lost, LeaseRefused) and (lost.owner, lost.epoch) == ("node-b", 2)
    assert a.release("s1", 1) == LeaseReleased(session_id="s1", node_id="node-a", released=False, token="x")
    again = a.acquire("s1")
    assert isinstance(again, LeaseRefused) and again.owner == "node-b"
    assert lease_of(location, "s1") == LeaseRecord(session_id="s1", node_id="node-b", epoch=2, expires_at=T0 + 2 * TTL)


def test_a_write_fenced_with_a_lost_epoch_is_refused_and_writes_nothing_while_the_new_owner_writes_on(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    assert isinstance(a.acquire("s1"), LeaseGranted)
    created = a.ask(CreateSession(session_id="s1", source="api", fence=a.fence(1), token="c", reply_to=a.replies))
    assert created == SessionCreated(session_id="s1", token="c")
    started = TurnMark(turn_id="t1", event="started")
    assert isinstance(a.append("s1", user("first"), epoch=1, turn=started), MessagesPersisted)

    # node-a pauses past its lease; node-b takes the session over.
    clock.set(T0 + TTL + 1)
    assert b.acquire("s1") == granted(b, "s1", 2, T0 + 2 * TTL + 1)

    # Everything node-a sends now, however it was built, is refused and changes nothing.
    stale_fence = Fence(node_id="node-b", epoch=2)
    late = a.append("s1", ChatMessage(role="assistant", content="late reply"), epoch=1, turn=TurnMark(turn_id="t1", event="completed"))
    assert isinstance(late, StoreFailed) and late.fenced == stale_fence and not late.retryable
    assert "leased to node 'node-b' at epoch 2" in late.error and "no longer owns the session" in late.error
    for command in (
        EndSession(session_id="s1", end_reason="user_exit", fence=a.fence(1), token="e", reply_to=a.replies),
        UpdateSessionTotals(session_id="s1", input_tokens=5, title="stolen", fence=a.fence(1), token="u", reply_to=a.replies),
        RemoveLastTurn(session_id="s1", fence=a.fence(1), token="r", reply_to=a.replies),
        # A CreateSession is fenced on the lease of the session it creates: this one has none.
        CreateSession(session_id="s1-child", source="api", parent_session_id="s1", fence=Fence(node_id="node-a", epoch=1), token="c", reply_to=a.replies),
    ):
        refused = a.ask(command)
        assert isinstance(refused, StoreFailed) and refused.command == type(command).__name__
    assert a.renew("s1", 1).owner == "node-b"

    # The new owner is not held back by the refusals of the old one.
    assert isinstance(
        b.append("s1", answer := ChatMessage(role="assistant", content="answered by b"), epoch=2, turn=TurnMark(turn_id="t1", event="completed")),
        MessagesPersisted,
    )
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == [user("first"), answer]
        session = reader.get_session("s1")
        assert session is not None and (session.ended_at, session.input_tokens, session.title, session.message_count) == (None, 0, None, 2)
        assert [(t.turn_id, t.status) for t in reader.load_turns("s1")] == [("t1", "completed")]
        assert reader.get_session("s1-child") is None

    # A lease that lapsed with nobody taking it over fences its holder too; an unfenced write is as before.
    clock.set(T0 + 3 * TTL)
    lapsed = b.append("s1", user("after the lease"), epoch=2)
    assert isinstance(lapsed, StoreFailed) and lapsed.fenced == stale_fence and "ended" in lapsed.error
    assert isinstance(b.append("s1", user("one process, no fence"), epoch=None), MessagesPersisted)


def test_a_takeover_waits_for_a_fenced_write_in_flight_so_the_new_owner_loads_after_it(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a = Node(start_runtime, location, clock, "node-a")
    b = Node(start_runtime, location, clock, "node-b", busy_timeout=0.2)
    assert isinstance(a.acquire("s1"), LeaseGranted)
    assert isinstance(a.ask(CreateSession(session_id="s1", source="api", fence=a.fence(1), token="c", reply_to=a.replies)), SessionCreated)
    assert isinstance(b.ask(NodeHeartbeat(node_id="node-b", reply_to=b.replies)), NodeSeen)  # node-b's writer is open before node-a holds the lock
    # node-a's fenced write checked and done, its transaction not committed yet (the writer is held right after it).
    first = hold(a.store)
    a.store.tell(AppendMessages(session_id="s1", messages=(user("in flight"),), fence=a.fence(1), token="w", reply_to=a.replies))
    second = Hold()
    a.store.tell(second)
    first.release.set()
    assert second.held.wait(10)
    clock.set(T0 + TTL + 1)  # the lease lapses meanwhile
    # The takeover cannot pass the write in flight: it waits for it (here past node-b's lock timeout).
    waited = b.acquire("s1")
    assert isinstance(waited, StoreFailed) and waited.retryable and waited.command == "AcquireLease"
    second.release.set()
    a.store.tell(GetStoreStatistics(reply_to=Replies()))  # a held writer commits at its next message
    assert isinstance(a.replies.get(), MessagesPersisted)
    assert b.acquire("s1") == granted(b, "s1", 2, T0 + 2 * TTL + 1)
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == [user("in flight")]


def acquire_at_once(a: Node, b: Node, sessions: list[str]) -> dict[str, LeaseGranted]:
    """Both nodes ask for every session, their writers released together; the one winner of each."""
    gates = [hold(a.store), hold(b.store)]
    for node in (a, b):
        for session_id in sessions:
            node.store.tell(AcquireLease(session_id=session_id, node_id=node.node_id, ttl=TTL, token=session_id, reply_to=node.replies))
    for gate in gates:  # both writers go at once, on their own connections
        gate.release.set()
    answers = {node.node_id: {r.token: r for r in (node.replies.get() for _ in sessions)} for node in (a, b)}
    winners = {}
    for session_id in sessions:
        pair = [answers[n][session_id] for n in ("node-a", "node-b")]
        wins = [r for r in pair if isinstance(r, LeaseGranted)]
        losses = [r for r in pair if isinstance(r, LeaseRefused)]
        assert len(wins) == 1 and len(losses) == 1, pair
        assert (losses[0].owner, losses[0].epoch) == (wins[0].node_id, wins[0].epoch)
        winners[session_id] = wins[0]
    return winners


def test_two_nodes_acquiring_the_same_sessions_at_once_get_exactly_one_owner_each(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    sessions = [f"s{i}" for i in range(50)]
    first = acquire_at_once(a, b, sessions)
    assert {w.epoch for w in first.values()} == {1}
    clock.set(T0 + TTL)  # every lease lapses: both nodes race to take each one over
    second = acquire_at_once(a, b, sessions)
    assert {w.epoch for w in second.values()} == {2}
    db = open_store_reader(location)
    try:
        assert {lease.session_id: (lease.node_id, lease.epoch) for lease in read_leases(db)} == {s: (w.node_id, 2) for s, w in second.items()}
    finally:
        db.close()


def test_node_heartbeats_record_each_nodes_address_on_the_stores_clock(start_runtime: StartRuntime, location: str) -> None:
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "node-a"), Node(start_runtime, location, clock, "node-b")
    assert a.ask(NodeHeartbeat(node_id="node-a", address="http://10.0.0.1:8642", token="h", reply_to=a.replies)) == NodeSeen(
        node_id="node-a", heartbeat_at=T0, token="h"
    )
    clock.set(T0 + 5)
    assert isinstance(b.ask(NodeHeartbeat(node_id="node-b", address="http://10.0.0.2:8642", reply_to=b.replies)), NodeSeen)
    clock.set(T0 + 7)
    assert isinstance(a.ask(NodeHeartbeat(node_id="node-a", address="http://10.0.0.9:8642", reply_to=a.replies)), NodeSeen)
    nameless = a.ask(NodeHeartbeat(node_id="", reply_to=a.replies))
    assert isinstance(nameless, StoreFailed) and "needs a node id" in nameless.error
    db = open_store_reader(location)
    try:
        assert [(n.node_id, n.address, n.heartbeat_at) for n in read_nodes(db)] == [
            ("node-a", "http://10.0.0.9:8642", T0 + 7),
            ("node-b", "http://10.0.0.2:8642", T0 + 5),
        ]
    finally:
        db.close()


def test_without_a_test_clock_leases_run_on_the_stores_own_clock(start_runtime: StartRuntime, location: str) -> None:
    import time

    runtime = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(location,))])
    store, replies = runtime.lookup("/store"), Replies()
    store.tell(AcquireLease(session_id="s1", node_id="node-a", ttl=TTL, reply_to=replies))
    lease = replies.get()
    # This machine's clock for a file, the server's for Postgres (on this machine too): the same, give or take.
    assert isinstance(lease, LeaseGranted) and abs(lease.expires_at - (time.time() + TTL)) < 600


def test_a_version_9_file_gains_empty_leases_and_nodes_tables(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    db.execute("DROP TABLE leases; DROP TABLE nodes; UPDATE schema_version SET version = 9")
    db.close()
    db = open_writer(path)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(10,)]
        assert db.execute("SELECT count(*) FROM leases").fetchall() == [(0,)] == db.execute("SELECT count(*) FROM nodes").fetchall()
    finally:
        db.close()


def test_settling_as_a_node_spares_the_sessions_another_nodes_live_lease_holds(start_runtime: StartRuntime, location: str) -> None:
    """A restarted ``--workers`` worker settles its dead predecessor's turns and lapsed ones, never a live sibling's."""
    clock = StoreClock()
    a, b = Node(start_runtime, location, clock, "host-w0"), Node(start_runtime, location, clock, "host-w1")
    for node, session, ttl in ((a, "live-elsewhere", TTL), (b, "own-dead", TTL), (a, "lapsed", 5.0)):
        assert isinstance(node.acquire(session, ttl=ttl), LeaseGranted)
        assert isinstance(node.ask(CreateSession(session_id=session, source="api", fence=node.fence(1), token="c", reply_to=node.replies)), SessionCreated)
        calls = (ToolCall(id=f"{session}-c", name="terminal", arguments="{}"),)
        opened = node.append(
            session, user("go"), ChatMessage(role="assistant", tool_calls=calls), epoch=1, turn=TurnMark(turn_id=f"{session}-t", event="started")
        )
        assert isinstance(opened, MessagesPersisted)

    report = settle_interrupted(location, result_text="unknown outcome", now=T0 + 10, node_id="host-w1")
    assert set(report.sessions) == {"own-dead", "lapsed"}
    with StoreReader(location) as reader:
        assert [t.status for t in reader.load_turns("live-elsewhere")] == ["running"]
        assert reader.load_messages("live-elsewhere")[-1].role == "assistant"  # its call is the live node's to answer
        for session in ("own-dead", "lapsed"):
            assert [(t.status, t.reason) for t in reader.load_turns(session)] == [("failed", "interrupted")]
            last = reader.load_messages(session)[-1]
            assert (last.role, last.tool_call_id, last.content) == ("tool", f"{session}-c", "unknown outcome")
    # Once that lease lapses too, the next node settles it; without a node id everything is settled.
    assert set(settle_interrupted(location, result_text="unknown outcome", now=T0 + TTL + 1, node_id="host-w1").sessions) == {"live-elsewhere"}
    assert settle_interrupted(location, result_text="again", now=T0 + TTL + 2).sessions == {}


def test_end_leases_ends_every_live_lease_of_a_file_and_keeps_the_epochs(start_runtime: StartRuntime, tmp_path: Path) -> None:
    """What a ``--workers`` parent does before its workers start: every holder is dead."""
    import time

    location = str(tmp_path / "state.db")
    assert end_leases(location) == 0  # no file yet: nothing to end, nothing made
    clock = StoreClock(time.time())
    a = Node(start_runtime, location, clock, "host-w0")
    assert isinstance(a.acquire("s1"), LeaseGranted) and isinstance(a.acquire("s2"), LeaseGranted)
    assert end_leases(location) == 2
    for session in ("s1", "s2"):
        lease = lease_of(location, session)
        assert lease is not None and lease.epoch == 1 and lease.expires_at <= time.time()
    clock.set(time.time())  # the file's clock moved on past the end
    b = Node(start_runtime, location, clock, "host-w1")
    assert b.acquire("s1") == granted(b, "s1", 2, clock() + TTL)  # at once, not after the dead holder's ttl
