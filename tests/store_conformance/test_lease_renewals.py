"""Lease renewals queued in one batch of a Postgres writer, renewed together (``renew_leases``).

A real :class:`StoreWriter` on a real Postgres database with the server's own clock (the only
case where renewals wait for the batch's end); the writer is parked (``Hold``) so that the
commands below queue up and land in one batch. Each renewal is answered as it would be alone:
granted, refused for a stale epoch or a missing lease, or failed (retryable) when another
transaction holds its row past the lock timeout — without holding back the others; a write or
a release of a session runs after that session's renewal, as they were sent.
"""

from __future__ import annotations

import psycopg

from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from protocols import ChatMessage
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRefused, LeaseReleased, ReleaseLease, RenewLease
from protocols._store import AppendMessages, CreateSession, MessagesPersisted, SessionCreated, StoreFailed
from tests.postgres_server import PostgresServer
from tests.store_kit import Replies, StartRuntime, asking, hold, start_store

TTL = 30.0


def test_renewals_in_one_batch_are_each_answered_as_alone_and_a_locked_row_holds_back_only_its_own(
    start_runtime: StartRuntime, postgres: PostgresServer
) -> None:
    url = postgres.new_database()
    _, store = start_store(start_runtime, url, busy_timeout=0.3)
    replies = Replies()
    ask = asking(store, replies)

    first: dict[str, LeaseGranted] = {}
    for sid in ("s1", "s2", "s3"):
        got = ask(AcquireLease(session_id=sid, node_id="node-a", ttl=TTL, token="a", reply_to=replies))
        assert isinstance(got, LeaseGranted) and got.epoch == 1
        first[sid] = got
    assert ask(CreateSession(session_id="s1", source="api", fence=Fence(node_id="node-a", epoch=1), token="c", reply_to=replies)) == SessionCreated(
        session_id="s1", token="c"
    )

    other = psycopg.connect(url)  # another node's writer, mid-transaction, holding s3's row
    try:
        other.execute("SELECT 1 FROM leases WHERE session_id = 's3' FOR UPDATE")
        gate = hold(store)
        for command in (
            RenewLease(session_id="s1", node_id="node-a", epoch=1, ttl=TTL, token="r1", reply_to=replies),
            RenewLease(session_id="s2", node_id="node-a", epoch=2, ttl=TTL, token="r2", reply_to=replies),  # not its epoch
            RenewLease(session_id="s3", node_id="node-a", epoch=1, ttl=TTL, token="r3", reply_to=replies),  # its row held
            RenewLease(session_id="s9", node_id="node-a", epoch=1, ttl=TTL, token="r9", reply_to=replies),  # never leased
            AppendMessages(
                session_id="s1", messages=(ChatMessage(role="user", content="hi"),), fence=Fence(node_id="node-a", epoch=1), token="w1", reply_to=replies
            ),
            ReleaseLease(session_id="s1", node_id="node-a", epoch=1, token="x1", reply_to=replies),
        ):
            store.tell(command)
        gate.release.set()
        answers = [replies.get() for _ in range(6)]
    finally:
        other.close()

    tokens = [a.token for a in answers]
    assert tokens.index("r1") < tokens.index("w1") < tokens.index("x1")  # s1's commands in the order sent
    by = {a.token: a for a in answers}
    r1 = by["r1"]
    assert isinstance(r1, LeaseGranted) and (r1.session_id, r1.epoch) == ("s1", 1) and r1.expires_at >= first["s1"].expires_at
    r2 = by["r2"]
    assert isinstance(r2, LeaseRefused) and (r2.owner, r2.epoch) == ("node-a", 1) and "acquire the lease again" in r2.reason
    r3 = by["r3"]
    assert isinstance(r3, StoreFailed) and r3.retryable and r3.session_id == "s3" and r3.command == "RenewLease"
    r9 = by["r9"]
    assert isinstance(r9, LeaseRefused) and r9.owner == ""
    assert isinstance(by["w1"], MessagesPersisted)
    assert by["x1"] == LeaseReleased(session_id="s1", node_id="node-a", released=True, token="x1")

    db = open_store_reader(url)
    try:
        s1, s2, s3 = (read_lease(db, sid) for sid in ("s1", "s2", "s3"))
    finally:
        db.close()
    assert s1 is not None and s1.expires_at < r1.expires_at  # renewed, then released: ended at the release
    assert s2 is not None and s2.expires_at == first["s2"].expires_at  # a refused renewal changes nothing
    assert s3 is not None and s3.expires_at == first["s3"].expires_at
    # Unheld now, s3 renews as usual.
    again = ask(RenewLease(session_id="s3", node_id="node-a", epoch=1, ttl=TTL, token="r3", reply_to=replies))
    assert isinstance(again, LeaseGranted) and again.expires_at > first["s3"].expires_at
