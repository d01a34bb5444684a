"""Lease acquires queued in one batch of a Postgres writer, acquired together (``acquire_leases``).

A real :class:`StoreWriter` on a real Postgres database with the server's own clock (the only
case where acquires wait for the batch's end, as renewals do); the writer is parked (``Hold``)
so that the commands below queue up and land in one batch — as 200 takeovers of a dead node's
sessions do. Each acquire is answered as it would be alone: a lapsed lease taken over at epoch
+ 1 with its running turn settled (one result per open call), a live one refused naming its
owner, a session never leased granted at epoch 1, a second acquire of one session granted at
the same epoch, a row another transaction holds failed (retryable) without holding back the
others; a session's write after its acquire runs after it, fenced by the new epoch.
"""

from __future__ import annotations

import msgspec
import psycopg
import pytest

from actors.store import StoreReader
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from actors.store._settle import INTERRUPTED
from protocols import ChatMessage, ToolCall
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRefused
from protocols._store import AppendMessages, CreateSession, MessagesPersisted, SessionCreated, StoreFailed, TurnMark
from tests.postgres_server import PostgresServer
from tests.store_kit import Replies, StartRuntime, asking, hold, start_store

TTL = 30.0
CUT = "the outcome is unknown: the node running it stopped"


def test_acquires_in_one_batch_are_each_answered_as_alone_and_a_takeover_settles_its_session(
    start_runtime: StartRuntime, postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = postgres.new_database()
    _, store = start_store(start_runtime, url, busy_timeout=0.3)
    replies = Replies()
    ask = asking(store, replies)

    for sid in ("s1", "s2", "s3", "s4"):  # node-a's sessions; s1 cut mid-tool
        assert isinstance(ask(AcquireLease(session_id=sid, node_id="node-a", ttl=TTL, token="a", reply_to=replies)), LeaseGranted)
        fence = Fence(node_id="node-a", epoch=1)
        assert isinstance(ask(CreateSession(session_id=sid, source="api", fence=fence, token="c", reply_to=replies)), SessionCreated)
    call = ToolCall(id="k1", name="terminal", arguments='{"command": "sleep 300"}')
    cut = (ChatMessage(role="user", content="run it"), ChatMessage(role="assistant", content=None, tool_calls=(call,)))
    started = AppendMessages(session_id="s1", messages=cut, turn=TurnMark(turn_id="t1", event="started"), fence=Fence(node_id="node-a", epoch=1), token="w")
    assert isinstance(ask(msgspec.structs.replace(started, reply_to=replies)), MessagesPersisted)
    with psycopg.connect(url, autocommit=True) as db:  # node-a died: s1's and s3's leases lapsed
        db.execute("UPDATE leases SET expires_at = 0 WHERE session_id IN ('s1', 's3')")

    other = psycopg.connect(url)  # another node's writer, mid-transaction, holding s4's row
    try:
        other.execute("SELECT 1 FROM leases WHERE session_id = 's4' FOR UPDATE")
        gate = hold(store)
        for command in (
            AcquireLease(session_id="s1", node_id="node-b", ttl=TTL, settle=CUT, token="a1", reply_to=replies),  # lapsed: taken over, settled
            AcquireLease(session_id="s2", node_id="node-b", ttl=TTL, settle=CUT, token="a2", reply_to=replies),  # node-a's, live: refused
            AcquireLease(session_id="s3", node_id="node-b", ttl=TTL, settle=CUT, token="a3", reply_to=replies),  # lapsed, nothing open
            AcquireLease(session_id="s4", node_id="node-b", ttl=TTL, settle=CUT, token="a4", reply_to=replies),  # its row held
            AcquireLease(session_id="s5", node_id="node-b", ttl=TTL, settle=CUT, token="a5", reply_to=replies),  # never leased
            AcquireLease(session_id="s3", node_id="node-b", ttl=TTL, settle=CUT, token="b3", reply_to=replies),  # again: the same epoch
            AppendMessages(
                session_id="s1", messages=(ChatMessage(role="user", content="again"),), fence=Fence(node_id="node-b", epoch=2), token="w1", reply_to=replies
            ),
        ):
            store.tell(command)
        gate.release.set()
        answers = [replies.get() for _ in range(7)]
    finally:
        other.close()

    assert not [r for r in caplog.records if "together failed" in r.getMessage()]  # they went together, none fell back
    tokens = [a.token for a in answers]
    assert tokens.index("a1") < tokens.index("w1") and tokens.index("a3") < tokens.index("b3")  # each session's commands in the order sent
    by = {a.token: a for a in answers}
    assert isinstance(by["a1"], LeaseGranted) and by["a1"].epoch == 2
    a2 = by["a2"]
    assert isinstance(a2, LeaseRefused) and (a2.owner, a2.epoch) == ("node-a", 1)
    assert isinstance(by["a3"], LeaseGranted) and by["a3"].epoch == 2
    assert isinstance(by["b3"], LeaseGranted) and by["b3"].epoch == 2
    a4 = by["a4"]
    assert isinstance(a4, StoreFailed) and a4.retryable and (a4.session_id, a4.command) == ("s4", "AcquireLease")
    assert isinstance(by["a5"], LeaseGranted) and by["a5"].epoch == 1
    assert isinstance(by["w1"], MessagesPersisted)

    db = open_store_reader(url)
    try:
        leases = {sid: read_lease(db, sid) for sid in ("s1", "s2", "s3", "s4", "s5")}
    finally:
        db.close()
    assert {sid: None if lease is None else (lease.node_id, lease.epoch) for sid, lease in leases.items()} == {
        "s1": ("node-b", 2),
        "s2": ("node-a", 1),
        "s3": ("node-b", 2),
        "s4": ("node-a", 1),
        "s5": ("node-b", 1),
    }
    with StoreReader(url) as reader:
        assert [(t.turn_id, t.status, t.reason) for t in reader.load_turns("s1")] == [("t1", "failed", INTERRUPTED)]
        assert [(m.role, m.tool_call_id, m.content) for m in reader.load_messages("s1")] == [
            ("user", None, "run it"),
            ("assistant", None, None),
            ("tool", "k1", CUT),
            ("user", None, "again"),
        ]
        s1 = reader.get_session("s1")
        assert s1 is not None and s1.message_count == 4
        assert reader.load_messages("s3") == [] and reader.load_turns("s3") == []
