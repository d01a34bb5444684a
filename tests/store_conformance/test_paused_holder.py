"""A node paused mid-transaction on Postgres does not hang another node's requests (issue 22).

A SIGSTOPped ``hermes serve`` whose store writer was between two writes of one batch keeps its
Postgres transaction open: the server holds its row locks (the lease row it read ``FOR SHARE``
to check a fence) for as long as the process stays stopped. Here that node is a real store
writer in its own runtime, parked mid-batch by a ``Hold`` after a fenced write (so its
connection is idle in a transaction holding that lock, as a stopped process's is), its store
clock an hour behind (its heartbeat is an hour old: a dead node to everyone else). node-b is a
real agent runtime in cluster mode on the same database, asked for a turn in that session.

Every turn asked is answered: the first ones, while the lock is held, fail at once with
``not_owner`` (503 Retry-After 1 in the API; the lease statement gave up after the store's
lock timeout) instead of waiting for ever; and once the Postgres server ends the stopped
node's idle transaction (``idle_in_transaction_session_timeout``), node-b takes the session
over and answers — while that node is still stopped. When it resumes, nothing of it lands.
"""

from __future__ import annotations

import time

import psycopg

from actors.agent._node import NodeIdentity
from actors.chaos import ModelServer, TextReply
from actors.store._pg import IDLE_IN_TRANSACTION_TIMEOUT
from protocols import ChatMessage
from protocols._leases import AcquireLease, Fence, LeaseGranted, NodeHeartbeat, NodeSeen, ReleaseLease
from protocols._session import TurnCompleted, TurnFailed
from protocols._store import AppendMessages, CreateSession, GetStoreStatistics, SessionCreated, StoreFailed
from supervisor import ChildSpec
from tests.agent.session_kit import start_kit, until
from tests.conftest import DEADLINE
from tests.postgres_server import PostgresServer
from tests.store_kit import ControlledWriter, Hold, Replies, StartRuntime, hold


def test_a_session_whose_lease_row_a_paused_node_locks_is_answered_and_taken_over(
    postgres: PostgresServer, model_server: ModelServer, start_runtime: StartRuntime
) -> None:
    url = postgres.new_database()
    node_b = start_kit(url, model_server, node=NodeIdentity(node_id="node-b", lease_ttl=3.0))  # type: ignore[arg-type]
    try:
        # node-a: a store writer whose clock is an hour behind; it owns s1 and writes in it.
        paused = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(url,), kwargs={"clock": lambda: time.time() - 3600})])
        store, replies = paused.lookup("/store"), Replies()
        store.tell(NodeHeartbeat(node_id="node-a", address="http://node-a:1", reply_to=replies))
        assert isinstance(replies.get(), NodeSeen)
        store.tell(AcquireLease(session_id="s1", node_id="node-a", ttl=600.0, token="a", reply_to=replies))
        granted = replies.get()
        assert isinstance(granted, LeaseGranted)
        fence = Fence(node_id="node-a", epoch=granted.epoch)
        store.tell(CreateSession(session_id="s1", source="api", fence=fence, token="c", reply_to=replies))
        assert isinstance(replies.get(), SessionCreated)

        # node-a stops between two writes of a batch: its transaction stays open, s1's lease row locked.
        first = hold(store)
        store.tell(AppendMessages(session_id="s1", messages=(ChatMessage(role="user", content="from node-a"),), fence=fence, token="w", reply_to=replies))
        stopped = Hold()
        store.tell(stopped)
        first.release.set()
        assert stopped.held.wait(DEADLINE)

        model_server.script([TextReply(content="node-b answers")], session="s1")
        probe = node_b.subscribe("s1")
        outcomes: list[str] = []
        began = time.monotonic()
        while time.monotonic() - began < IDLE_IN_TRANSACTION_TIMEOUT + DEADLINE:
            node_b.start_turn("s1", f"hello {len(outcomes)}", turn_id=f"turn-{len(outcomes)}")
            ended = until(probe, (TurnCompleted, TurnFailed))[-1]  # each attempt answered within the deadline
            if isinstance(ended, TurnCompleted):
                outcomes.append("completed")
                break
            assert ended.kind == "not_owner", ended  # retryable (503 Retry-After 1), and said at once
            outcomes.append("not_owner")
        assert outcomes[0] == "not_owner", outcomes  # the first attempt met the stopped node's lock
        assert outcomes[-1] == "completed", outcomes  # node-b took s1 over while node-a was still stopped
        stopped.release.set()  # node-a resumes: its connection was ended, nothing it had pending lands
        node_b.flush_store()
        contents = [m.content for m in node_b.transcript("s1")]
        assert "from node-a" not in contents and contents[-1] == "node-b answers", contents
    finally:
        assert node_b.runtime.stop(timeout=DEADLINE)


def test_a_cluster_node_s_writer_frees_its_row_locks_within_a_third_of_its_lease_ttl(postgres: PostgresServer, start_runtime: StartRuntime) -> None:
    """With a 3 s ttl, a node stopped mid-batch must not keep a lease row locked for the server's
    default 5 s: another node's renewals (every 1 s) would wait on it past its own lease. The
    writer asks for ``NodeIdentity.lock_hold`` (1 s here): a statement that waits at most 3 s
    for the row gets it, where the default would have kept it locked longer."""
    url = postgres.new_database()
    node = NodeIdentity(node_id="node-a", lease_ttl=3.0)
    assert node.lock_hold == 1.0 and NodeIdentity(node_id="n", lease_ttl=60.0).lock_hold == IDLE_IN_TRANSACTION_TIMEOUT
    paused = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(url,), kwargs={"lock_hold": node.lock_hold})])
    store, replies = paused.lookup("/store"), Replies()
    store.tell(AcquireLease(session_id="s1", node_id="node-a", ttl=600.0, token="a", reply_to=replies))
    granted = replies.get()
    assert isinstance(granted, LeaseGranted)
    first = hold(store)
    fence = Fence(node_id="node-a", epoch=granted.epoch)
    store.tell(CreateSession(session_id="s1", source="api", fence=fence, token="c", reply_to=replies))  # reads s1's lease row FOR SHARE
    stopped = Hold()
    store.tell(stopped)
    first.release.set()
    assert stopped.held.wait(DEADLINE)  # the writer is parked inside its open transaction
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5, options="-c lock_timeout=3000") as other:
            row = other.execute("SELECT epoch FROM leases WHERE session_id = 's1' FOR UPDATE").fetchone()
        assert row == (granted.epoch,)
    finally:
        stopped.release.set()


def test_a_node_stopped_after_a_write_sent_as_one_query_still_has_its_transaction_ended(postgres: PostgresServer, start_runtime: StartRuntime) -> None:
    """The writes whose statements go together in one query (``PgConnection.together``: an append's
    mark, rows and counters; a release by a node that does not hold the lease: one locked read) are the last thing a stopped
    node's connection did: the server must still end its idle transaction. psycopg's pipeline mode,
    tried for this, sends a Flush after its Sync, and the server then never arms
    ``idle_in_transaction_session_timeout``: the rows stayed locked for as long as the node stayed
    stopped."""
    url = postgres.new_database()
    node = NodeIdentity(node_id="node-a", lease_ttl=3.0)
    paused = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(url,), kwargs={"lock_hold": node.lock_hold})])
    store, replies = paused.lookup("/store"), Replies()
    for sid in ("s1", "s2"):
        store.tell(AcquireLease(session_id=sid, node_id="node-a", ttl=600.0, token="a", reply_to=replies))
        granted = replies.get()
        assert isinstance(granted, LeaseGranted)
        store.tell(CreateSession(session_id=sid, source="api", fence=Fence(node_id="node-a", epoch=granted.epoch), token="c", reply_to=replies))
        assert isinstance(replies.get(), SessionCreated)
    for last in (
        AppendMessages(
            session_id="s1", messages=(ChatMessage(role="user", content="hi"),), fence=Fence(node_id="node-a", epoch=1), token="w", reply_to=replies
        ),
        ReleaseLease(session_id="s2", node_id="node-b", epoch=1, token="r", reply_to=replies),  # not node-b's: s2's row read FOR UPDATE, nothing more
    ):
        first = hold(store)
        store.tell(last)
        stopped = Hold()
        store.tell(stopped)
        first.release.set()
        assert stopped.held.wait(DEADLINE)  # parked inside its open transaction, right after that write
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5, options="-c lock_timeout=3000") as other:
                row = other.execute("SELECT epoch FROM leases WHERE session_id = %s FOR UPDATE", (last.session_id,)).fetchone()
            assert row == (1,)  # got within 3 s: the server ended the stopped writer's transaction after 1 s
        finally:
            stopped.release.set()
        store.tell(GetStoreStatistics(reply_to=Replies()))  # the writer commits: its connection was ended
        failed = replies.get()  # its connection was ended: the write it had pending is answered failed, retryable
        assert isinstance(failed, StoreFailed) and failed.retryable, failed
