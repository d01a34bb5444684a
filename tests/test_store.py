"""The session store: schema, the writer actor's group commit and failures, readers, search.

Every test uses a real SQLite file in ``tmp_path`` and, where the writer is involved, a real
``supervisor.Runtime`` with the writer as its child ``/store``. Synchronisation is by
replies read with a deadline (a probe with ``.tell``), and by a ``Hold`` message that parks
the writer's thread on an event, so that commands queue up deterministically.
"""

from __future__ import annotations

import ast
import importlib
import logging
import math
from pathlib import Path

import apsw
import msgspec
import pytest

import actors.store
from actors.store import (
    SCHEMA_VERSION,
    SchemaVersionError,
    StoreError,
    StoreReader,
    StoreWriter,
    open_reader,
    open_writer,
)
from protocols import ChildRestarted, from_json, to_json
from protocols._store import (
    AppendMessages,
    CreateSession,
    EndSession,
    GetStoreStatistics,
    MessagesPersisted,
    ReopenWrites,
    SessionCreated,
    SessionEnded,
    SessionTotalsUpdated,
    StoreFailed,
    StoreStatistics,
    UpdateSessionTotals,
)
from tests.conftest import DEADLINE, Probe
from tests.store_kit import TRANSCRIPT, ControlledWriter, Hold, Replies, StartRuntime, VisibilityProbe, append, create, hold, start_store, user

ROOT = Path(__file__).resolve().parent.parent
# -- round trip ---------------------------------------------------------------------------


def test_a_session_and_its_messages_round_trip_with_tool_calls_tool_results_and_reasoning(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1", model="hermes-4", model_config={"temperature": 0.2}, user_id="u1", system_prompt="sys")

    store.tell(AppendMessages(session_id="s1", messages=TRANSCRIPT[:2], timestamp=100.0, token="a", reply_to=replies))
    store.tell(AppendMessages(session_id="s1", messages=TRANSCRIPT[2:], timestamps=(101.0, 102.0, 103.0, 104.0), token="b", reply_to=replies))
    first, second = replies.get(), replies.get()
    assert (first.token, second.token) == ("a", "b")
    assert len(first.message_ids) == 2 and len(second.message_ids) == 4
    assert list(first.message_ids + second.message_ids) == sorted(first.message_ids + second.message_ids)

    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == list(TRANSCRIPT)
        stored = reader.load_stored_messages("s1")
        assert [m.timestamp for m in stored] == [100.0, 100.0, 101.0, 102.0, 103.0, 104.0]
        assert [m.id for m in stored] == list(first.message_ids + second.message_ids)
        session = reader.get_session("s1")
        assert session is not None
        assert (session.message_count, session.tool_call_count) == (6, 2)
        assert (session.model, session.model_config, session.user_id, session.system_prompt) == (
            "hermes-4",
            {"temperature": 0.2},
            "u1",
            "sys",
        )
        assert reader.get_session("nope") is None
        assert reader.load_messages("nope") == []
        raw = reader._conn().execute("SELECT tool_calls FROM messages WHERE tool_calls IS NOT NULL").fetchone()[0]
    # Hermes's (OpenAI's) shape, readable by anything that speaks chat completions.
    assert msgspec.json.decode(raw) == [
        {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls /tmp"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris", "unit": "°C"}'}},
    ]
    assert TRANSCRIPT[2].to_openai()["tool_calls"] == msgspec.json.decode(raw)


def test_totals_title_and_end_of_a_session_are_recorded_and_sessions_list_newest_first(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "old", source="telegram", started_at=10.0)
    create(store, replies, "new", source="cli", started_at=20.0, parent_session_id="old")
    for _ in range(2):
        store.tell(UpdateSessionTotals(session_id="new", input_tokens=10, output_tokens=3, reasoning_tokens=2, token="u", reply_to=replies))
        assert replies.get() == SessionTotalsUpdated(session_id="new", token="u")
    store.tell(UpdateSessionTotals(session_id="new", cache_read_tokens=7, cache_write_tokens=1, title="Paris weather", reply_to=replies))
    assert isinstance(replies.get(), SessionTotalsUpdated)
    store.tell(EndSession(session_id="new", end_reason="completed", ended_at=30.0, token="e", reply_to=replies))
    assert replies.get() == SessionEnded(session_id="new", token="e")

    with StoreReader(path) as reader:
        new = reader.get_session("new")
        assert new is not None
        assert (new.input_tokens, new.output_tokens, new.reasoning_tokens) == (20, 6, 4)
        assert (new.cache_read_tokens, new.cache_write_tokens, new.title) == (7, 1, "Paris weather")
        assert (new.ended_at, new.end_reason, new.parent_session_id) == (30.0, "completed", "old")
        assert [s.id for s in reader.list_sessions()] == ["new", "old"]
        assert [s.id for s in reader.list_sessions(source="telegram")] == ["old"]
        assert [s.id for s in reader.list_sessions(parent_session_id="old")] == ["new"]
        assert [s.id for s in reader.list_sessions(limit=1, offset=1)] == ["old"]


# -- durability and group commit --------------------------------------------------------------


def test_a_reply_is_told_only_after_the_write_is_visible_to_another_connection(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path)
    create(store, Replies(), "s1")
    probe = VisibilityProbe(path)
    gate = hold(store)
    for i in range(20):
        store.tell(AppendMessages(session_id="s1", messages=(user(f"message {i}"),), token=str(i), reply_to=probe))
    gate.release.set()
    seen: list[int] = []
    for i in range(20):
        reply, visible = probe.get()
        assert isinstance(reply, MessagesPersisted) and reply.token == str(i)
        # At the moment of the reply, a separate read-only connection already sees the rows.
        assert set(reply.message_ids) <= set(visible)
        seen += reply.message_ids
    assert len(seen) == 20


def test_a_batch_open_its_time_limit_commits_though_more_writes_wait(start_runtime: StartRuntime, tmp_path: Path) -> None:
    # batch_seconds=0: every batch is past its limit at its first write, so ten queued appends
    # commit one by one, each reply told at its own commit (a Postgres writer's first grant of
    # a burst of takeovers is not held until the last one is written).
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path, batch_seconds=0.0)
    replies = Replies()
    create(store, replies, "s1")
    before = store.ask(GetStoreStatistics())
    gate = hold(store)
    for i in range(10):
        store.tell(AppendMessages(session_id="s1", messages=(user(f"burst {i}"),), token=str(i), reply_to=replies))
    gate.release.set()
    acks = [replies.get() for _ in range(10)]
    after = store.ask(GetStoreStatistics())
    assert [a.token for a in acks] == [str(i) for i in range(10)]
    assert isinstance(before, StoreStatistics) and isinstance(after, StoreStatistics)
    assert (after.transactions - before.transactions, after.largest_batch, after.writes - before.writes) == (10, 1, 10)


def test_group_commit_puts_a_thousand_queued_appends_in_two_transactions(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path, batch_seconds=math.inf)  # the count alone ends a batch (no clock in the test)
    replies = Replies()
    create(store, replies, "s1")
    before = store.ask(GetStoreStatistics())
    gate = hold(store)
    for i in range(1000):
        store.tell(AppendMessages(session_id="s1", messages=(user(f"burst {i}"),), token=str(i), reply_to=replies))
    gate.release.set()
    acks = [replies.get() for _ in range(1000)]
    after = store.ask(GetStoreStatistics())

    assert [a.token for a in acks] == [str(i) for i in range(1000)]
    assert isinstance(after, StoreStatistics)
    # 1,000 writes, 512 (the cap) in the first transaction, the other 488 when the inbox ran dry.
    assert after.transactions - before.transactions == 2
    assert after.largest_batch == 512
    assert (after.writes - before.writes, after.messages - before.messages, after.failures) == (1000, 1000, 0)
    with StoreReader(path) as reader:
        assert len(reader.load_messages("s1")) == 1000


def test_writes_pending_when_the_writer_stops_are_committed_and_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    ref = ControlledWriter.start(path)  # unsupervised, so the test controls where the stop lands in the inbox
    try:
        replies = Replies()
        ref.tell(CreateSession(session_id="s1", source="cli", reply_to=replies))
        assert isinstance(replies.get(), SessionCreated)
        gate = Hold()
        ref.tell(gate)
        assert gate.held.wait(DEADLINE)
        for i in range(10):
            ref.tell(AppendMessages(session_id="s1", messages=(user(f"late {i}"),), token=str(i), reply_to=replies))
        ref.stop(block=False)  # queued behind the appends: the inbox never runs dry before it
        gate.release.set()
        assert [replies.get().token for _ in range(10)] == [str(i) for i in range(10)]
    finally:
        assert ref.actor_stopped.wait(DEADLINE)
    with StoreReader(path) as reader:
        assert len(reader.load_messages("s1")) == 10


# -- failures ---------------------------------------------------------------------------------


def test_a_failing_write_answers_store_failed_and_the_writer_keeps_serving(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1", title="taken")

    failed = append(store, replies, "ghost", user("hello?"), token="g")
    assert isinstance(failed, StoreFailed)
    assert (failed.token, failed.command, failed.session_id, failed.retryable) == ("g", "AppendMessages", "ghost", False)
    assert "no session 'ghost'" in failed.error and "CreateSession" in failed.error

    store.tell(CreateSession(session_id="s1", source="cli", token="dup", reply_to=replies))
    dup = replies.get()
    assert isinstance(dup, StoreFailed) and "exists already" in dup.error
    store.tell(ReopenWrites(session_id="s1"))  # a refusal fences the session: as a reloaded session does
    store.tell(CreateSession(session_id="s2", source="cli", title="taken", token="t", reply_to=replies))
    assert "title 'taken'" in replies.get().error
    for session_id in ("auto1", "auto2"):  # an automatic title must not stop a session from starting
        store.tell(CreateSession(session_id=session_id, source="cli", title="taken", number_taken_title=True, reply_to=replies))
        assert isinstance(replies.get(), SessionCreated)
    with StoreReader(path) as reader:
        assert [reader.get_session(i).title for i in ("s1", "auto1", "auto2")] == ["taken", "taken (2)", "taken (3)"]  # type: ignore[union-attr]
    store.tell(CreateSession(session_id="s3", source="cli", parent_session_id="nobody", token="p", reply_to=replies))
    assert "parent session 'nobody' does not exist" in replies.get().error
    store.tell(AppendMessages(session_id="s1", messages=(user("a"),), timestamps=(1.0, 2.0), reply_to=replies))
    assert "timestamps has 2 entries for 1 messages" in replies.get().error
    store.tell(ReopenWrites(session_id="s1"))
    store.tell(EndSession(session_id="ghost", end_reason="x", reply_to=replies))
    assert isinstance(replies.get(), StoreFailed)

    # Good and bad writes in one transaction: the bad one is rolled back alone.
    gate = hold(store)
    store.tell(AppendMessages(session_id="s1", messages=(user("before"),), token="1", reply_to=replies))
    # Fails on its second row: the first row it inserted is deleted again.
    half = (user("halfway"), user("bad \ud800 surrogate"), user("never"))
    store.tell(AppendMessages(session_id="s1", messages=half, token="2", reply_to=replies))
    store.tell(AppendMessages(session_id="ghost", messages=(user("lost"),), token="3", reply_to=replies))
    store.tell(ReopenWrites(session_id="s1"))
    store.tell(AppendMessages(session_id="s1", messages=(user("after"),), token="4", reply_to=replies))
    gate.release.set()
    in_order = [replies.get() for _ in range(4)]
    assert [r.token for r in in_order] == ["1", "2", "3", "4"]  # failures wait their turn
    answers = {r.token: r for r in in_order}
    assert isinstance(answers["1"], MessagesPersisted) and isinstance(answers["4"], MessagesPersisted)
    assert isinstance(answers["2"], StoreFailed) and "UnicodeEncodeError" in answers["2"].error
    assert isinstance(answers["3"], StoreFailed)

    assert isinstance(append(store, replies, "s1", user("still serving")), MessagesPersisted)
    stats = store.ask(GetStoreStatistics())
    assert stats.incarnation == 1 and stats.failures == 8
    with StoreReader(path) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["before", "after", "still serving"]
        session = reader.get_session("s1")
        assert session is not None and session.message_count == 3
        assert reader.get_session("s2") is None and reader.get_session("s3") is None
        assert reader.search("halfway") == []
    assert runtime.stop(timeout=DEADLINE)
    db = open_writer(path)
    try:
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")  # index == rows
    finally:
        db.close()


def test_a_database_locked_by_another_process_answers_a_retryable_failure_and_the_writer_recovers(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _, store = start_store(start_runtime, path, busy_timeout=0.05)
    replies = Replies()
    create(store, replies, "s1")
    intruder = apsw.Connection(str(path))
    intruder.execute("BEGIN IMMEDIATE")  # holds the write lock, as a second writer would
    try:
        failed = append(store, replies, "s1", user("blocked"))
        assert isinstance(failed, StoreFailed) and failed.retryable
        assert "locked by another connection" in failed.error
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()
    store.tell(ReopenWrites(session_id="s1"))  # the session reloads, then writes again
    assert isinstance(append(store, replies, "s1", user("unblocked")), MessagesPersisted)
    with StoreReader(path) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["unblocked"]


def test_a_crashed_writer_is_restarted_and_loses_no_acknowledged_write(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime, store = start_store(start_runtime, path)
    events = Probe()
    runtime.subscribe(events.put)
    replies = Replies()
    create(store, replies, "s1")
    acked = [append(store, replies, "s1", user("acknowledged before the crash"), token="a")]

    gate = hold(store)
    store.tell(AppendMessages(session_id="s1", messages=(user("pending at the crash"),), token="p", reply_to=replies))
    store.tell("crash")
    store.tell(AppendMessages(session_id="s1", messages=(user("told after the crash"),), token="n", reply_to=replies))
    gate.release.set()

    restarted = events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/store")
    assert restarted.incarnation == 2
    answers = {r.token: r for r in (replies.get(), replies.get())}
    # Every write got exactly one answer; the pending one was committed as the writer died.
    assert set(answers) == {"p", "n"}
    acked += [r for r in answers.values() if isinstance(r, MessagesPersisted)]
    assert len(acked) == 3
    assert store.ask(GetStoreStatistics()).incarnation == 2
    acked.append(append(store, replies, "s1", user("after the restart"), token="z"))
    with StoreReader(path) as reader:
        stored = {m.id for m in reader.load_stored_messages("s1")}
    assert {i for r in acked for i in r.message_ids} <= stored
    assert len(stored) == 4


def test_a_broken_connection_fails_the_write_and_the_writer_restarts_with_a_new_connection(
    start_runtime: StartRuntime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged as one line saying what broke, with no traceback: the connection failed, not our code
    (a stopped node's connection ended by the server is met so when it resumes)."""
    caplog.set_level(logging.ERROR, logger="actors._actor")
    path = tmp_path / "state.db"
    runtime, store = start_store(start_runtime, path)
    events = Probe()
    runtime.subscribe(events.put)
    replies = Replies()
    create(store, replies, "s1")
    store.tell("break")
    failed = append(store, replies, "s1", user("into a closed connection"), token="x")
    assert isinstance(failed, StoreFailed) and failed.retryable and "connection broke" in failed.error
    events.get_matching(lambda e: isinstance(e, ChildRestarted) and e.path == "/store")
    assert isinstance(append(store, replies, "s1", user("fresh connection")), MessagesPersisted)
    with StoreReader(path) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["fresh connection"]
    crashed = [r for r in caplog.records if "/store crashed" in r.getMessage()]
    assert len(crashed) == 1 and "connection" in crashed[0].getMessage() and crashed[0].exc_info is None, crashed


# -- the file -------------------------------------------------------------------------------------


def test_the_file_is_in_wal_mode_with_hermes_tables_indexes_and_fts_triggers(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_writer(path)
    try:
        assert db.pragma("journal_mode") == "wal"
        assert db.pragma("synchronous") == 1  # NORMAL
        assert db.pragma("foreign_keys") == 1
    finally:
        db.close()
    with StoreReader(path) as reader:
        conn = reader._conn()
        assert conn.pragma("journal_mode") == "wal"
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema")}
        assert {"sessions", "messages", "messages_fts", "schema_version"} <= names
        assert {"messages_fts_insert", "messages_fts_delete", "messages_fts_update"} <= names
        assert {"idx_sessions_source", "idx_sessions_parent", "idx_sessions_started", "idx_messages_session"} <= names
        columns = {table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")] for table in ("sessions", "messages")}
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert columns["messages"] == [
        "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
        "timestamp", "token_count", "finish_reason", "reasoning", "images", "reasoning_details",
    ]  # fmt: skip
    assert columns["sessions"][:8] == [
        "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id", "started_at",
    ]  # fmt: skip
    assert {"ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens", "output_tokens",
            "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "title"} <= set(columns["sessions"])  # fmt: skip


def test_reopening_the_file_keeps_every_acknowledged_write(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    before = append(store, replies, "s1", *TRANSCRIPT)
    assert first.stop(timeout=DEADLINE)

    _, store = start_store(start_runtime, path)
    after = append(store, replies, "s1", user("after reopening"))
    assert after.message_ids[0] > max(before.message_ids)
    with StoreReader(path) as reader:
        assert reader.load_messages("s1") == [*TRANSCRIPT, user("after reopening")]
        assert [h.message_id for h in reader.search("reopening")] == list(after.message_ids)


def test_a_version_1_file_is_migrated_by_the_writer_and_refused_by_readers_until_then(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    open_writer(path).close()
    db = apsw.Connection(str(path))
    db.execute("DROP TABLE responses; ALTER TABLE messages DROP COLUMN images; UPDATE schema_version SET version = 1")
    db.close()
    with pytest.raises(SchemaVersionError, match="start the store writer once to migrate it"):
        StoreReader(path)
    open_writer(path).close()
    db = apsw.Connection(str(path))
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert db.execute("SELECT count(*) FROM responses").fetchall() == [(0,)]
    assert "images" in [row[1] for row in db.execute("PRAGMA table_info(messages)")]
    db.close()


def test_a_file_with_another_schema_version_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    for version, word in ((SCHEMA_VERSION + 98, "newer"), (0, "older")):
        path = tmp_path / f"v{version}.db"
        open_writer(path).close()
        db = apsw.Connection(str(path))
        db.execute("UPDATE schema_version SET version = ?", (version,))
        db.close()
        with pytest.raises(SchemaVersionError, match=f"schema version {version}, {word}"):
            open_writer(path)
        with pytest.raises(SchemaVersionError, match=word):
            StoreReader(path)
    foreign = tmp_path / "foreign.db"
    db = apsw.Connection(str(foreign))
    db.execute("CREATE TABLE notes (x)")
    db.close()
    with pytest.raises(SchemaVersionError, match="not a session store"):
        open_writer(foreign)
    with pytest.raises(StoreError, match="start the store writer first"):
        open_reader(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


# -- the contract -------------------------------------------------------------------------------


def test_store_commands_encode_without_reply_to_and_refuse_an_address() -> None:
    command = AppendMessages(session_id="s", messages=TRANSCRIPT, timestamp=1.5, token="t")
    assert from_json(to_json(command), AppendMessages) == command
    with pytest.raises(TypeError):
        to_json(AppendMessages(session_id="s", messages=(), reply_to=Replies()))


def test_the_store_package_has_a_sorted_door_and_imports_no_upper_layer() -> None:
    module = importlib.import_module("actors.store")
    assert list(module.__all__) == sorted(module.__all__)
    public = sorted(n for n in vars(module) if not n.startswith("_") and type(getattr(module, n)).__name__ != "module")
    assert list(module.__all__) == public
    assert actors.store.StoreWriter is StoreWriter
    upper = ("actors.agent", "actors.tools", "actors.platforms", "actors.memory")
    offenders = []
    for path in sorted((ROOT / "actors" / "store").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("actors." if node.level else "") + (node.module or "")]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(upper)]
    assert offenders == []


def test_after_a_refused_transcript_write_the_session_is_fenced_until_it_reopens(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _runtime, store = start_store(start_runtime, path)
    replies = Replies()
    create(store, replies, "s1")
    create(store, replies, "s2")
    store.tell(AppendMessages(session_id="s1", messages=(user("a"),), timestamps=(1.0, 2.0), token="bad", reply_to=replies))
    assert isinstance(replies.get(), StoreFailed)
    # Built on a memory the store does not match: refused, though valid on its own.
    fenced = append(store, replies, "s1", user("results of the refused calls"), token="next")
    assert isinstance(fenced, StoreFailed) and "an earlier write of this session was refused" in fenced.error
    assert isinstance(append(store, replies, "s2", user("other sessions write on")), MessagesPersisted)
    store.tell(ReopenWrites(session_id="s1"))  # the session reloaded from the store
    assert isinstance(append(store, replies, "s1", user("after the reload")), MessagesPersisted)
    with StoreReader(path) as reader:
        assert [m.content for m in reader.load_messages("s1")] == ["after the reload"]


def test_deleting_a_session_that_is_not_there_is_refused_even_right_after_another_write(start_runtime: StartRuntime, tmp_path: Path) -> None:
    """The check once read db.changes(), which counts the batch's last write: after a create it
    'deleted' a session that never existed, and after a write that changed nothing it refused to
    delete one that did."""
    from protocols import DeleteSession, SessionDeleted

    _, store = start_store(start_runtime, tmp_path / "state.db")
    replies = Replies()
    create(store, replies, "s1")
    store.tell(DeleteSession(session_id="ghost", token="g", reply_to=replies))
    refused = replies.get()
    assert isinstance(refused, StoreFailed) and "no session 'ghost'" in refused.error
    store.tell(DeleteSession(session_id="s1", token="d", reply_to=replies))
    assert isinstance(replies.get(), SessionDeleted)
