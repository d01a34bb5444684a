"""The ``turns`` table: turn starts and ends written with their messages, in one transaction.

Real SQLite files in ``tmp_path``, written through the real :class:`StoreWriter` as a child
of a ``supervisor.Runtime`` (the harness of ``tests/test_store.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from actors import Address
from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreReader, open_writer
from protocols import ChatMessage, ToolCall
from protocols._store import (
    AppendMessages,
    DeleteSession,
    MessagesPersisted,
    RemoveLastTurn,
    ReopenWrites,
    SessionDeleted,
    StoreFailed,
    TurnMark,
    TurnRecord,
    TurnRemoved,
)
from tests.store_kit import Replies, StartRuntime, create, start_store, user


def write(store: Address[Any], replies: Replies, session_id: str, *messages: ChatMessage, turn: TurnMark | None, at: float) -> Any:
    store.tell(AppendMessages(session_id=session_id, messages=messages, turn=turn, timestamp=at, token="w", reply_to=replies))
    return replies.get()


def started(turn_id: str) -> TurnMark:
    return TurnMark(turn_id=turn_id, event="started")


def answer(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, finish_reason="stop")


def turns(path: Path, session_id: str) -> list[TurnRecord]:
    with StoreReader(path) as reader:
        return reader.load_turns(session_id)


def test_a_turn_starts_with_its_user_message_and_ends_with_its_answer(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    opened = write(store, replies, "s1", user("hello"), turn=started("t1"), at=100.0)
    assert isinstance(opened, MessagesPersisted) and len(opened.message_ids) == 1
    assert turns(path, "s1") == [TurnRecord(session_id="s1", turn_id="t1", status="running", started_at=100.0)]

    closed = write(store, replies, "s1", answer("hi"), turn=TurnMark(turn_id="t1", event="completed"), at=105.0)
    assert isinstance(closed, MessagesPersisted) and len(closed.message_ids) == 1
    done = TurnRecord(session_id="s1", turn_id="t1", status="completed", started_at=100.0, ended_at=105.0)
    assert turns(path, "s1") == [done]
    with StoreReader(path) as reader:
        assert reader.find_turn("t1") == done
        assert reader.find_turn("nope") is None
        assert reader.load_turns("nope") == []
        assert reader.load_messages("s1") == [user("hello"), answer("hi")]


def test_a_turn_id_is_started_once_per_session_and_a_second_start_stores_nothing(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    create(store, replies, "s2")
    write(store, replies, "s1", user("first"), turn=started("t1"), at=100.0)

    again = write(store, replies, "s1", user("second"), turn=started("t1"), at=200.0)
    assert isinstance(again, StoreFailed) and not again.retryable
    assert "started already" in again.error
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [user("first")]
        record = reader.get_session("s1")
        assert record is not None and record.message_count == 1
    assert turns(path, "s1") == [TurnRecord(session_id="s1", turn_id="t1", status="running", started_at=100.0)]

    # The writer's fence holds as for any refused transcript write, until the session reopens.
    fenced = write(store, replies, "s1", answer("late"), turn=None, at=201.0)
    assert isinstance(fenced, StoreFailed) and "earlier write" in fenced.error
    store.tell(ReopenWrites(session_id="s1"))
    assert isinstance(write(store, replies, "s1", user("third"), turn=started("t2"), at=300.0), MessagesPersisted)
    # Another session may use the same turn id.
    assert isinstance(write(store, replies, "s2", user("elsewhere"), turn=started("t1"), at=400.0), MessagesPersisted)
    assert [t.turn_id for t in turns(path, "s1")] == ["t1", "t2"]
    with StoreReader(path) as reader:
        found = reader.find_turn("t1")
    assert found is not None and found.session_id == "s2"  # the latest of the two


def test_an_end_may_come_alone_ends_a_turn_once_and_closes_a_turn_started_before_the_table(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    write(store, replies, "s1", user("go"), turn=started("t1"), at=100.0)

    alone = write(store, replies, "s1", turn=TurnMark(turn_id="t1", event="failed", reason="deadline"), at=110.0)
    assert alone == MessagesPersisted(session_id="s1", token="w", message_ids=())
    late = write(store, replies, "s1", turn=TurnMark(turn_id="t1", event="cancelled", reason="user"), at=120.0)
    assert isinstance(late, MessagesPersisted)  # ignored, not refused
    # A turn that started before the store had a turns table: its end is the first the store hears.
    old = write(store, replies, "s1", turn=TurnMark(turn_id="t0", event="cancelled", reason="user"), at=130.0)
    assert isinstance(old, MessagesPersisted)
    assert turns(path, "s1") == [
        TurnRecord(session_id="s1", turn_id="t1", status="failed", reason="deadline", started_at=100.0, ended_at=110.0),
        TurnRecord(session_id="s1", turn_id="t0", status="cancelled", reason="user", started_at=None, ended_at=130.0),
    ]
    with StoreReader(path) as reader:
        record = reader.get_session("s1")
    assert record is not None and record.message_count == 1

    unknown = write(store, replies, "ghost", turn=TurnMark(turn_id="t9", event="completed"), at=140.0)
    assert isinstance(unknown, StoreFailed) and "no session 'ghost'" in unknown.error
    bad = write(store, replies, "s1", turn=TurnMark(turn_id="t2", event="paused"), at=150.0)  # type: ignore[arg-type]
    assert isinstance(bad, StoreFailed) and "started, completed, failed or cancelled" in bad.error
    assert [t.turn_id for t in turns(path, "s1")] == ["t1", "t0"]


def test_a_refused_write_stores_neither_its_messages_nor_its_mark(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    # Any message whose content is "boom" fails to insert, after the mark was written.
    db.execute("CREATE TRIGGER refuse_boom BEFORE INSERT ON messages WHEN new.content = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END")
    db.close()
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")

    refused = write(store, replies, "s1", user("fine"), user("boom"), turn=started("t1"), at=100.0)
    assert isinstance(refused, StoreFailed)
    assert turns(path, "s1") == []
    store.tell(ReopenWrites(session_id="s1"))
    write(store, replies, "s1", user("go"), turn=started("t1"), at=110.0)
    tool_call = ChatMessage(role="assistant", content=None, tool_calls=(ToolCall(id="c1", name="terminal", arguments="{}"),))
    refused_end = write(
        store, replies, "s1", tool_call, ChatMessage(role="tool", tool_call_id="c1", content="boom"), turn=TurnMark(turn_id="t1", event="completed"), at=120.0
    )
    assert isinstance(refused_end, StoreFailed)
    store.tell(ReopenWrites(session_id="s1"))
    refused_old = write(store, replies, "s1", user("boom"), turn=TurnMark(turn_id="t0", event="failed"), at=125.0)
    assert isinstance(refused_old, StoreFailed)
    assert turns(path, "s1") == [TurnRecord(session_id="s1", turn_id="t1", status="running", started_at=110.0)]
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [user("go")]
        record = reader.get_session("s1")
    assert record is not None and (record.message_count, record.tool_call_count) == (1, 0)


def test_deleting_a_session_deletes_its_turns_and_undo_leaves_them(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    for session_id in ("keep", "gone"):
        create(store, replies, session_id)
        write(store, replies, session_id, user("q"), turn=started("t1"), at=100.0)
        write(store, replies, session_id, answer("a"), turn=TurnMark(turn_id="t1", event="completed"), at=101.0)

    store.tell(RemoveLastTurn(session_id="keep", token="undo", reply_to=replies))
    assert replies.get() == TurnRemoved(session_id="keep", token="undo", removed=2, text="q")
    assert [(t.turn_id, t.status) for t in turns(path, "keep")] == [("t1", "completed")]

    store.tell(DeleteSession(session_id="gone", token="del", reply_to=replies))
    assert replies.get() == SessionDeleted(session_id="gone", token="del", messages_deleted=2)
    assert turns(path, "gone") == []
    assert len(turns(path, "keep")) == 1


def test_a_fresh_file_has_the_turns_table_and_a_version_3_file_is_migrated(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    open_writer(fresh).close()
    db = apsw.Connection(str(fresh))
    assert [row[1] for row in db.execute("PRAGMA table_info(turns)")] == ["session_id", "turn_id", "status", "reason", "started_at", "ended_at"]
    assert {"idx_turns_running", "idx_turns_turn"} <= {row[0] for row in db.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    db.close()

    # A version 3 file: the layout before turns, with a session in it.
    old = tmp_path / "v3.db"
    db = open_writer(old)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1.0)")
    db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'user', 'kept', 2.0)")
    db.execute("DROP TABLE turns; UPDATE schema_version SET version = 3")
    db.close()
    with pytest.raises(SchemaVersionError, match="start the store writer once to migrate it"):
        StoreReader(old)
    open_writer(old).close()
    with StoreReader(old) as reader:
        assert reader.load_messages("s1") == [user("kept")]
        assert reader.load_turns("s1") == []
        version = reader._conn().execute("SELECT version FROM schema_version").fetchall()
    assert version == [(SCHEMA_VERSION,)]
