"""Schema 7: a reply's reasoning_details kept with its message, and its tokens (cached ones
apart) added to the session's totals in the same write. Real SQLite files, the real writer."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreReader, open_writer
from protocols import ChatMessage
from protocols._store import AppendMessages, MessagesPersisted, StoreFailed, TokenUsage
from tests.store_kit import Replies, StartRuntime, create, start_store, user

DETAILS = '[{"type":"reasoning.text","text":"t","signature":"s\\u00e9"}]'


def test_reasoning_details_are_stored_verbatim_and_a_replys_usage_is_added_to_the_totals(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    answer = ChatMessage(role="assistant", content="a", reasoning="r", reasoning_details=DETAILS)
    for messages, usage in (
        ((user("q"),), None),
        ((answer,), TokenUsage(input_tokens=100, output_tokens=7, cache_read_tokens=60, cache_write_tokens=40)),
        ((), TokenUsage(input_tokens=50, output_tokens=3, cache_read_tokens=50)),  # a turn's end without messages
    ):
        store.tell(AppendMessages(session_id="s1", messages=messages, usage=usage, token="w", reply_to=replies))
        assert isinstance(replies.get(), MessagesPersisted)
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [user("q"), answer]
        record = reader.get_session("s1")
    assert record is not None
    assert (record.message_count, record.input_tokens, record.output_tokens, record.cache_read_tokens, record.cache_write_tokens) == (2, 150, 10, 110, 40)

    store.tell(AppendMessages(session_id="nope", messages=(answer,), usage=TokenUsage(input_tokens=1), token="x", reply_to=replies))
    assert isinstance(replies.get(), StoreFailed)


def test_a_version_6_file_gets_the_reasoning_details_column_and_a_file_that_has_it_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    db = open_writer(path)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1.0)")
    db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s1', 'assistant', 'kept', 2.0)")
    db.execute("ALTER TABLE messages DROP COLUMN reasoning_details; UPDATE schema_version SET version = 6")
    db.close()
    with pytest.raises(SchemaVersionError, match="start the store writer once to migrate it"):
        StoreReader(path)
    open_writer(path).close()
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [ChatMessage(role="assistant", content="kept")]
    # Hermes's own files already have the column (with its rows): migrating leaves it as it is.
    db = apsw.Connection(str(path))
    db.execute("UPDATE messages SET reasoning_details = ?; UPDATE schema_version SET version = 6", (DETAILS,))
    db.close()
    open_writer(path).close()
    with StoreReader(path) as reader:
        assert reader.load_messages("s1")[0].reasoning_details == DETAILS
    db = apsw.Connection(str(path))
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    db.close()
