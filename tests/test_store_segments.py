"""Segments: what a compression leaves starts a new segment of the session, in one transaction.

Real SQLite files in ``tmp_path``, written through the real :class:`StoreWriter` as a child of
a ``supervisor.Runtime`` (the harness of ``tests/test_store.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from actors import Address
from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreReader, open_writer
from protocols import ChatMessage, SegmentRecord, SegmentStart, ToolCall
from protocols._store import AppendMessages, DeleteSession, MessagesPersisted, RemoveLastTurn, SessionDeleted, StoreFailed, TurnRemoved
from tests.store_kit import Replies, StartRuntime, create, start_store, user

SUMMARY = ChatMessage(role="user", content="[summary of earlier turns] the user asked about tides; the agent read tides.csv")


def write(store: Address[Any], replies: Replies, *messages: ChatMessage, segment: SegmentStart | None = None, at: float = 100.0) -> Any:
    store.tell(AppendMessages(session_id="s1", messages=messages, segment=segment, timestamp=at, token="w", reply_to=replies))
    return replies.get()


def answer(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def conversation(store: Address[Any], replies: Replies) -> list[ChatMessage]:
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "tides.csv"}')
    old = [
        user("what are the tides at brest"),
        ChatMessage(role="assistant", content=None, tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c1", name="read_file", content="high water 06:12 low water 12:30 " * 20),
        answer("high water at 06:12"),
        user("and tomorrow"),
    ]
    assert isinstance(write(store, replies, *old), MessagesPersisted)
    return old


def test_a_compression_starts_a_segment_that_loads_alone_while_every_old_message_stays_searchable(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    old = conversation(store, replies)
    compressed = (old[0], SUMMARY, old[-1])
    done = write(store, replies, *compressed, segment=SegmentStart(summary=SUMMARY.content or "", tokens_before=900, tokens_after=120, summarised=3), at=200.0)
    assert isinstance(done, MessagesPersisted) and len(done.message_ids) == 3
    assert isinstance(write(store, replies, answer("tomorrow at 06:55"), at=201.0), MessagesPersisted)

    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [*compressed, answer("tomorrow at 06:55")]
        assert reader.load_messages("s1", every_segment=True) == [*old, *compressed, answer("tomorrow at 06:55")]
        assert reader.load_segments("s1") == [
            SegmentRecord(
                session_id="s1",
                segment=1,
                first_message_id=done.message_ids[0],
                reason="compression",
                started_at=200.0,
                summary=SUMMARY.content or "",
                tokens_before=900,
                tokens_after=120,
                summarised=3,
            )
        ]
        hits = reader.search("water")
        assert len(hits) == 2 and all(hit.session_id == "s1" and hit.message_id < done.message_ids[0] for hit in hits), "compressed messages are still found"
        assert reader.load_segments("nope") == []

    again = write(store, replies, user("second compression"), segment=SegmentStart(summary="again"), at=300.0)
    with StoreReader(path) as reader:
        assert [s.segment for s in reader.load_segments("s1")] == [1, 2]
        assert reader.load_messages("s1") == [user("second compression")]
        assert reader.load_stored_messages("s1")[0].id == again.message_ids[0]


def test_a_segment_without_messages_is_refused_and_the_old_segment_stays_whole(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    old = conversation(store, replies)
    refused = write(store, replies, segment=SegmentStart(summary="nothing"))
    assert isinstance(refused, StoreFailed) and "must hold its messages" in refused.error
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == old and reader.load_segments("s1") == []


def test_an_undo_never_reaches_behind_a_compression_and_deleting_the_session_deletes_its_segments(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    conversation(store, replies)
    write(store, replies, answer("[summary] tides at brest, read from tides.csv"), segment=SegmentStart(summary="s"))
    store.tell(RemoveLastTurn(session_id="s1", token="u", reply_to=replies))
    undone = replies.get()
    assert isinstance(undone, TurnRemoved) and undone.removed == 0, "the last user message is behind the compression"
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [answer("[summary] tides at brest, read from tides.csv")]

    store.tell(DeleteSession(session_id="s1", token="d", reply_to=replies))
    assert isinstance(replies.get(), SessionDeleted)
    with StoreReader(path) as reader:
        assert reader.load_segments("s1") == [] and reader.load_messages("s1", every_segment=True) == []


def test_a_version_5_file_gets_an_empty_segments_table_and_loads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    db = open_writer(path)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1.0)")
    db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'user', 'kept', 2.0)")
    db.execute("DROP TABLE segments; UPDATE schema_version SET version = 5")
    db.close()
    with pytest.raises(SchemaVersionError, match="start the store writer once to migrate it"):
        StoreReader(path)
    open_writer(path).close()
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [user("kept")] and reader.load_segments("s1") == []
    db = apsw.Connection(str(path))
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    db.close()
