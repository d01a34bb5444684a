"""Appends queued in one batch of a Postgres writer, sent together (``_append_groups``).

A real :class:`StoreWriter` on a real Postgres database with the server's clock (the case where
appends wait for the batch's end); the writer is parked (``Hold``) so that the commands below
queue up and land in one batch, as the appends of 200 sessions taken over at once do. Each
append is answered as it would be alone; the batch costs two queries for all of them, their fence checks then
their statements (the writer's ``round_trips``); a stale node's statements are never run (a row
the new owner has locked is not waited for); when one of them fails a check (a turn started
twice, a session that does not exist), none of the group stays written twice and each of the
others lands once;
a session's commands keep their order around its lease commands and ``ReopenWrites``.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest

from actors.store import StoreReader
from protocols import ChatMessage
from protocols._leases import AcquireLease, Fence, LeaseGranted, RenewLease
from protocols._store import (
    AppendMessages,
    CreateSession,
    GetStoreStatistics,
    MessagesPersisted,
    ReopenWrites,
    SessionCreated,
    StoreFailed,
    StoreStatistics,
    TokenUsage,
    TurnMark,
)
from tests.postgres_server import PostgresServer
from tests.store_kit import Replies, StartRuntime, asking, hold, start_store

TTL = 600.0


def leased(ask: Any, replies: Replies, *sessions: str) -> None:
    """node-a holds each of ``sessions`` at epoch 1, created through its fence."""
    for sid in sessions:
        assert isinstance(ask(AcquireLease(session_id=sid, node_id="node-a", ttl=TTL, token="a", reply_to=replies)), LeaseGranted)
        assert isinstance(ask(CreateSession(session_id=sid, source="api", fence=Fence(node_id="node-a", epoch=1), token="c", reply_to=replies)), SessionCreated)


def writer(start_runtime: StartRuntime, postgres: PostgresServer, *sessions: str, **options: Any) -> tuple[str, Any, Replies, Any]:
    """A writer on a new database, ``sessions`` leased to node-a: (url, its address, replies, ask)."""
    url = postgres.new_database()
    _, store = start_store(start_runtime, url, **options)
    replies = Replies()
    ask = asking(store, replies)
    leased(ask, replies, *sessions)
    return url, store, replies, ask


def say(sid: str, token: str, *texts: str, replies: Replies, **fields: Any) -> AppendMessages:
    fields.setdefault("fence", Fence(node_id="node-a", epoch=1))
    return AppendMessages(session_id=sid, messages=tuple(ChatMessage(role="user", content=t) for t in texts), token=token, reply_to=replies, **fields)


def in_one_batch(store: Any, replies: Replies, commands: list[Any]) -> dict[str, Any]:
    """Tell ``commands`` while the writer is parked; its answers by token, checked to come in the order told per session."""
    gate = hold(store)
    for command in commands:
        store.tell(command)
    gate.release.set()
    answers = [replies.get() for command in commands if getattr(command, "reply_to", None) is not None]
    by_session: dict[str, list[str]] = {}
    for answer in answers:
        by_session.setdefault(answer.session_id, []).append(answer.token)
    for sid, tokens in by_session.items():
        told = [c.token for c in commands if getattr(c, "session_id", None) == sid and getattr(c, "reply_to", None) is not None]
        assert tokens == told, (sid, tokens, told)
    return {a.token: a for a in answers}


def test_appends_of_many_sessions_in_one_batch_go_in_one_query_and_are_each_answered_as_alone(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url, store, replies, _ = writer(start_runtime, postgres, "s1", "s2", "s3", "s4")
    store.tell(GetStoreStatistics(reply_to=replies))
    before = replies.get()
    assert isinstance(before, StoreStatistics) and before.round_trips > 0

    answers = in_one_batch(
        store,
        replies,
        [
            say("s1", "w1", "question one", replies=replies, turn=TurnMark(turn_id="t1", event="started")),
            say("s2", "w2", "two", replies=replies),
            say("s3", "w3", "three a", "three b", replies=replies, usage=TokenUsage(input_tokens=7, output_tokens=3)),
            say("s1", "w4", "answer one", replies=replies, turn=TurnMark(turn_id="t1", event="completed")),
            say("s4", "w5", "four a", "four b", replies=replies, timestamps=(100.0, 101.0), fence=None),  # unfenced, as one process writes
        ],
    )
    store.tell(GetStoreStatistics(reply_to=replies))
    after = replies.get()
    assert isinstance(after, StoreStatistics)
    assert after.round_trips - before.round_trips == 4, (before, after)  # BEGIN, the fence checks, the five appends, COMMIT (alone: 2 + 4 x 2 + 1)

    assert all(isinstance(a, MessagesPersisted) for a in answers.values()), answers
    ids = [i for token in ("w1", "w2", "w3", "w4", "w5") for i in answers[token].message_ids]
    assert ids == sorted(ids) and len(ids) == 7 and len(set(ids)) == 7  # rows in the order told
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["question one", "answer one"]
        assert [(t.turn_id, t.status) for t in reader.load_turns("s1")] == [("t1", "completed")]
        s3 = reader.get_session("s3")
        assert s3 is not None and (s3.message_count, s3.input_tokens, s3.output_tokens) == (2, 7, 3)
    with psycopg.connect(url, autocommit=True) as db:
        stamped = db.execute("SELECT content, timestamp FROM messages WHERE session_id = 's4' ORDER BY id").fetchall()
    assert stamped == [("four a", 100.0), ("four b", 101.0)]
    assert after.messages - before.messages == 7 and after.writes - before.writes == 5


def test_an_append_that_fails_a_check_in_a_batch_fails_alone_and_every_other_lands_once(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url, store, replies, ask = writer(start_runtime, postgres, "s1", "s2", "s3")
    assert isinstance(ask(say("s3", "t", "started once", replies=replies, turn=TurnMark(turn_id="t1", event="started"))), MessagesPersisted)
    with psycopg.connect(url, autocommit=True) as db:  # node-b took s2 over: node-a's fence is stale
        db.execute("UPDATE leases SET node_id = 'node-b', epoch = 2 WHERE session_id = 's2'")

    answers = in_one_batch(
        store,
        replies,
        [
            say("s1", "w1", "one", replies=replies),
            say("s2", "w2", "stale", replies=replies),  # fenced: node-b's now
            say("s3", "w3", "twice", replies=replies, turn=TurnMark(turn_id="t1", event="started")),  # t1 started already
            say("s3", "w4", "after a refused one", replies=replies),  # may build on w3: refused too
            say("s9", "w5", "nobody", replies=replies, fence=None),  # no such session
            say("s1", "w6", "two", replies=replies),
            ReopenWrites(session_id="s3"),  # s3 reloaded: its writes are taken again, after w3 and w4
            say("s3", "w7", "reopened", replies=replies),
        ],
    )

    assert [type(answers[t]).__name__ for t in ("w1", "w2", "w3", "w4", "w5", "w6", "w7")] == [
        "MessagesPersisted",
        "StoreFailed",
        "StoreFailed",
        "StoreFailed",
        "StoreFailed",
        "MessagesPersisted",
        "MessagesPersisted",
    ]
    w2 = answers["w2"]
    assert isinstance(w2, StoreFailed) and w2.fenced == Fence(node_id="node-b", epoch=2) and not w2.retryable
    assert "started already" in answers["w3"].error and "earlier write" in answers["w4"].error and "no session" in answers["w5"].error
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["one", "two"]  # each once, though the group was undone and written again
        assert reader.load_messages("s2") == []
        assert [m.content for m in reader.load_messages("s3")] == ["started once", "reopened"]
        s1 = reader.get_session("s1")
        assert s1 is not None and s1.message_count == 2


def test_a_session_s_appends_and_lease_commands_in_one_batch_keep_their_order(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url, store, replies, _ = writer(start_runtime, postgres, "s1", "s2")
    answers = in_one_batch(  # the helper checks each session's answers come in the order told
        store,
        replies,
        [
            say("s1", "w1", "before the renewal", replies=replies),
            RenewLease(session_id="s1", node_id="node-a", epoch=1, ttl=TTL, token="r1", reply_to=replies),
            say("s2", "w2", "other session", replies=replies),
            say("s1", "w3", "after the renewal", replies=replies),
            AcquireLease(session_id="s2", node_id="node-a", ttl=TTL, token="a2", reply_to=replies),
            say("s2", "w4", "after the acquire", replies=replies),
        ],
    )
    assert all(isinstance(answers[t], MessagesPersisted) for t in ("w1", "w2", "w3", "w4"))
    assert isinstance(answers["r1"], LeaseGranted) and isinstance(answers["a2"], LeaseGranted)
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["before the renewal", "after the renewal"]
        assert [m.content for m in reader.load_messages("s2")] == ["other session", "after the acquire"]


def test_appends_waiting_when_the_connection_breaks_are_answered_failed_and_retryable(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url, store, replies, ask = writer(start_runtime, postgres, "s1", "s2")
    gate = hold(store)
    store.tell(say("s1", "w1", "lost", replies=replies))
    store.tell(say("s2", "w2", "lost too", replies=replies))
    with psycopg.connect(url, autocommit=True) as db:  # the server ends the writer's connection
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'hermes-store' AND pid <> pg_backend_pid()")
    gate.release.set()
    answers = [replies.get(), replies.get()]
    assert all(isinstance(a, StoreFailed) and a.retryable for a in answers), answers
    again = ask(say("s1", "w3", "sent again", replies=replies))  # the restarted writer takes it
    assert isinstance(again, MessagesPersisted), again
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["sent again"]
        assert reader.load_messages("s2") == []


def test_a_stale_node_s_appends_in_a_batch_run_no_statement_on_the_new_owner_s_rows(
    start_runtime: StartRuntime, postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="actors.store._writer")
    url, store, replies, _ = writer(start_runtime, postgres, "s1", "s2", busy_timeout=0.5)
    with psycopg.connect(url) as new_owner:  # node-b took s2 over and is writing in it: its session row locked
        new_owner.execute("UPDATE leases SET node_id = 'node-b', epoch = 2 WHERE session_id = 's2'")
        new_owner.commit()
        new_owner.execute("UPDATE sessions SET message_count = message_count WHERE id = 's2'")
        answers = in_one_batch(store, replies, [say("s1", "w1", "mine", replies=replies), say("s2", "w2", "stale", replies=replies)])
        new_owner.rollback()
    assert isinstance(answers["w1"], MessagesPersisted)
    w2 = answers["w2"]
    assert isinstance(w2, StoreFailed) and w2.fenced == Fence(node_id="node-b", epoch=2)
    assert not [r.getMessage() for r in caplog.records if "together failed" in r.getMessage()]  # nothing waited for s2's row, nothing undone
