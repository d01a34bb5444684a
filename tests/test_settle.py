"""Settling at start: what a stopped process left open is closed before any session runs.

Stores are written through the real :class:`StoreWriter` (the harness of
``tests/test_store.py``) into SQLite files in ``tmp_path``; the writer's runtime is stopped
before :func:`settle_interrupted` runs, as a new process would find the file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import apsw
import pytest

from actors import Address
from actors.agent import HubRegistry, ModelClients, ModelSettings, SessionDeps, reader_opener, start_agent_runtime
from actors.agent._sanitize import INTERRUPTED_RESULT, sanitize
from actors.agent._tree import settle_store
from actors.store import StoreReader, open_writer, settle_interrupted
from actors.store._owner import claim_store
from protocols import ChatMessage, ToolCall
from protocols._store import AppendMessages, Interrupted, MessagesPersisted, TurnMark, TurnRecord
from tests.conftest import DEADLINE
from tests.store_kit import Replies, StartRuntime, create, start_store, user

TEXT = "[not finished] zebra: the outcome is unknown"


def calls(*ids: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=None, tool_calls=tuple(ToolCall(id=i, name=f"tool_{i}", arguments="{}") for i in ids))


def result(call_id: str, content: str = "ok") -> ChatMessage:
    return ChatMessage(role="tool", tool_call_id=call_id, name=f"tool_{call_id}", content=content)


def settled(call_id: str, text: str = TEXT) -> ChatMessage:
    return result(call_id, text)


def answer(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, finish_reason="stop")


class Writes:
    """Writes through a running store writer, each acknowledged before the next."""

    def __init__(self, store: Address[Any]) -> None:
        self.store = store
        self.replies = Replies()

    def session(self, session_id: str) -> None:
        create(self.store, self.replies, session_id)

    def __call__(self, session_id: str, *messages: ChatMessage, at: float, turn: str = "", event: str = "started", reason: str = "") -> None:
        mark = TurnMark(turn_id=turn, event=event, reason=reason) if turn else None  # type: ignore[arg-type]
        self.store.tell(AppendMessages(session_id=session_id, messages=messages, turn=mark, timestamp=at, reply_to=self.replies))
        assert isinstance(self.replies.get(), MessagesPersisted)


def written(start_runtime: StartRuntime, path: Path) -> tuple[Any, Writes]:
    runtime, store = start_store(start_runtime, path)
    return runtime, Writes(store)


def transcript(path: Path, session_id: str) -> list[ChatMessage]:
    with StoreReader(path) as reader:
        return reader.load_messages(session_id)


def test_running_turns_fail_as_interrupted_and_each_unanswered_call_gets_one_result_in_call_order(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime, write = written(start_runtime, path)
    for session_id in ("s1", "s2", "paused"):
        write.session(session_id)
    # s1: an earlier turn that completed (its own open call c0 stays the sanitizer's), then a
    # turn the process died in: c1 and c3 have no result, c2 has one.
    write("s1", user("first"), at=100.0, turn="t0")
    write("s1", calls("c0"), at=101.0)
    write("s1", answer("done"), at=102.0, turn="t0", event="completed")
    write("s1", user("second"), at=110.0, turn="t1")
    write("s1", calls("c1", "c2"), at=111.0)
    write("s1", result("c2"), at=112.0)
    write("s1", calls("c3"), at=113.0)
    # s2: died before the model answered: the turn fails, no call to settle.
    write("s2", user("just asked"), at=120.0, turn="t2")
    # paused: the turn completed by handing its call to the client; the client answers later.
    write("paused", user("use my tool"), at=130.0, turn="t3")
    write("paused", calls("k1"), at=131.0, turn="t3", event="completed")
    assert runtime.stop(timeout=DEADLINE)
    before = {s: transcript(path, s) for s in ("s1", "s2", "paused")}

    report = settle_interrupted(path, result_text=TEXT, now=1000.0)

    assert report.sessions == {
        "s1": Interrupted(turn_ids=("t1",), settled_calls=2),
        "s2": Interrupted(turn_ids=("t2",), settled_calls=0),
    }
    assert report.seconds >= 0
    assert transcript(path, "s1") == [*before["s1"], settled("c1"), settled("c3")]
    assert transcript(path, "s2") == before["s2"]
    assert transcript(path, "paused") == before["paused"]
    with StoreReader(path) as reader:
        stored = reader.load_stored_messages("s1")
        assert [m.timestamp for m in stored[-2:]] == [1000.0, 1000.0]
        assert reader.load_turns("s1") == [
            TurnRecord(session_id="s1", turn_id="t0", status="completed", started_at=100.0, ended_at=102.0),
            TurnRecord(session_id="s1", turn_id="t1", status="failed", reason="interrupted", started_at=110.0, ended_at=1000.0),
        ]
        assert reader.find_turn("t2") == TurnRecord(session_id="s2", turn_id="t2", status="failed", reason="interrupted", started_at=120.0, ended_at=1000.0)
        assert reader.find_turn("t3") == TurnRecord(session_id="paused", turn_id="t3", status="completed", started_at=130.0, ended_at=131.0)
        # The same insert as AppendMessages: counters and the search index follow.
        record = reader.get_session("s1")
        assert record is not None and (record.message_count, record.tool_call_count) == (9, 4)
        assert sorted(hit.message_id for hit in reader.search("zebra")) == [m.id for m in stored[-2:]]
    # Only the completed turn's c0 is left to the sanitizer (it is before the last user message).
    assert sanitize(transcript(path, "s1"))[1] == 1

    # Settling again finds nothing open and changes nothing.
    again = settle_interrupted(path, result_text=TEXT, now=2000.0)
    assert again.sessions == {}
    assert transcript(path, "s1") == [*before["s1"], settled("c1"), settled("c3")]
    with StoreReader(path) as reader:
        assert [t.ended_at for t in reader.load_turns("s1")] == [102.0, 1000.0]


def test_sessions_without_turn_rows_are_settled_by_their_last_message_and_ended_turns_are_left_alone(start_runtime: StartRuntime, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    runtime, write = written(start_runtime, path)
    sessions = ("tool-last", "calls-last", "answered", "tool-answered", "ended-turn", "reused-id")
    for session_id in sessions:
        write.session(session_id)
    write("tool-last", user("q"), calls("a", "b"), result("a"), at=100.0)
    write("calls-last", user("q"), calls("x"), at=100.0)
    write("answered", user("q"), calls("y"), result("y"), answer("fine"), at=100.0)
    write("tool-answered", user("q"), calls("z"), result("z"), at=100.0)
    # A session with a turn row that ended: its trailing calls are the client's, untouched.
    write("ended-turn", user("q"), at=100.0, turn="t1")
    write("ended-turn", calls("k"), at=101.0, turn="t1", event="completed")
    # An id called twice after the last user message: only the later call can be answered at the end.
    write("reused-id", user("q"), calls("r"), calls("r", "s"), at=100.0)
    assert runtime.stop(timeout=DEADLINE)
    before = {s: transcript(path, s) for s in sessions}

    # ``now`` earlier than the stored stamps (a clock set back): results still come last.
    report = settle_interrupted(path, result_text=TEXT, now=50.0)

    assert report.sessions == {
        "tool-last": Interrupted(settled_calls=1),
        "calls-last": Interrupted(settled_calls=1),
        "reused-id": Interrupted(settled_calls=2),
    }
    assert transcript(path, "tool-last") == [*before["tool-last"], settled("b")]
    assert transcript(path, "calls-last") == [*before["calls-last"], settled("x")]
    assert transcript(path, "reused-id") == [*before["reused-id"], settled("r"), settled("s")]
    for session_id in ("answered", "tool-answered", "ended-turn"):
        assert transcript(path, session_id) == before[session_id]
    with StoreReader(path) as reader:
        assert [m.timestamp for m in reader.load_stored_messages("calls-last")][-1] == 100.0
    assert settle_interrupted(path, result_text=TEXT, now=60.0).sessions == {}
    assert transcript(path, "tool-last") == [*before["tool-last"], settled("b")]


def test_a_version_3_store_is_migrated_and_settled_by_its_transcripts(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    db = open_writer(path)
    db.execute("INSERT INTO sessions (id, source, started_at) VALUES ('old', 'cli', 1.0)")
    db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('old', 'user', 'run it', 2.0)")
    db.execute(
        "INSERT INTO messages (session_id, role, tool_calls, timestamp) VALUES ('old', 'assistant', ?, 3.0)",
        ('[{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]',),
    )
    db.execute("DROP TABLE turns; UPDATE schema_version SET version = 3")
    db.close()

    report = settle_interrupted(path, result_text=TEXT, now=10.0)

    assert report.sessions == {"old": Interrupted(settled_calls=1)}
    with StoreReader(path) as reader:
        assert reader.load_messages("old")[-1] == ChatMessage(role="tool", tool_call_id="c1", name="terminal", content=TEXT)
        assert reader.load_turns("old") == []


def test_a_missing_or_fresh_store_is_left_as_it_is(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert settle_interrupted(missing, result_text=TEXT).sessions == {}
    assert not missing.exists()
    fresh = tmp_path / "fresh.db"
    open_writer(fresh).close()
    assert settle_interrupted(fresh, result_text=TEXT).sessions == {}


def deps_for(store: Path) -> SessionDeps:
    return SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url="http://127.0.0.1:9/v1", api_key="unused"),
        clients=ModelClients(),
        store_file=store,
    )


def test_a_runtime_settles_its_store_before_it_starts_and_keeps_the_report(
    start_runtime: StartRuntime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    runtime, write = written(start_runtime, path)
    write.session("s1")
    write("s1", user("go"), at=100.0, turn="t1")
    write("s1", calls("c1"), at=101.0)
    assert runtime.stop(timeout=DEADLINE)

    deps = deps_for(path)
    assert deps.interrupted == {}
    caplog.set_level(logging.WARNING, logger="actors.agent._tree")
    settled_deps = settle_store(path, deps)
    assert settled_deps.interrupted == {"s1": Interrupted(turn_ids=("t1",), settled_calls=1)}
    assert transcript(path, "s1")[-1] == settled("c1", INTERRUPTED_RESULT)
    assert INTERRUPTED_RESULT.startswith("[not finished] the runtime stopped while this tool ran")
    assert "1 session(s)" in caplog.text

    # start_agent_runtime does the same before its tree starts.
    runtime, write = written(start_runtime, path)
    write("s1", user("again"), at=200.0, turn="t2")
    write("s1", calls("c2"), at=201.0)
    assert runtime.stop(timeout=DEADLINE)
    started = start_agent_runtime(path, deps_for(path))
    try:
        with StoreReader(path) as reader:
            turn = reader.find_turn("t2")
            assert turn is not None and (turn.session_id, turn.status, turn.reason) == ("s1", "failed", "interrupted")
            assert reader.load_messages("s1")[-1] == settled("c2", INTERRUPTED_RESULT)
    finally:
        assert started.stop(timeout=DEADLINE)


def test_a_store_that_cannot_be_settled_is_logged_and_left_to_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    foreign = tmp_path / "foreign.db"
    db = apsw.Connection(str(foreign))
    db.execute("CREATE TABLE notes (x)")
    db.close()
    deps = deps_for(foreign)
    caplog.set_level(logging.WARNING, logger="actors.agent._tree")
    assert settle_store(foreign, deps) is deps
    assert "could not settle" in caplog.text and "not a session store" in caplog.text


def test_a_second_runtime_on_a_served_store_leaves_its_live_turns_alone(start_runtime: StartRuntime, tmp_path: Path) -> None:
    """``hermes chat`` beside a running ``hermes serve``: the store's owner holds its claim, so
    the second runtime settles nothing; once the owner stops, the next start settles."""
    path = tmp_path / "state.db"
    runtime, write = written(start_runtime, path)
    write.session("s1")
    write("s1", user("go"), at=100.0, turn="t1")
    write("s1", calls("c1"), at=101.0)
    assert runtime.stop(timeout=DEADLINE)
    owner = claim_store(path)  # the live process serving this store
    assert owner is not None and claim_store(path) is None
    try:
        second = start_agent_runtime(path, deps_for(path))
        try:
            with StoreReader(path) as reader:
                turn = reader.find_turn("t1")
                assert turn is not None and turn.status == "running"  # live, not interrupted
                assert reader.load_messages("s1")[-1] == calls("c1")
        finally:
            assert second.stop(timeout=DEADLINE)
    finally:
        owner.close()
    third = start_agent_runtime(path, deps_for(path))  # the owner is gone (a killed process releases its flock too)
    try:
        assert claim_store(path) is None  # the running runtime holds it now
        with StoreReader(path) as reader:
            turn = reader.find_turn("t1")
            assert turn is not None and (turn.status, turn.reason) == ("failed", "interrupted")
    finally:
        assert third.stop(timeout=DEADLINE)
    released = claim_store(path)  # released when its reactor stopped
    assert released is not None
    released.close()


_FORKING_OWNER = """
import os, sys
from actors.store._owner import claim_store
claim = claim_store(sys.argv[1])
assert claim is not None
child = os.fork()  # as a tool's subprocess is, between its fork and its exec
if child == 0:
    os.read(0, 1)  # until the test closes stdin
    os._exit(0)
print(child, flush=True)
os.read(0, 1)  # until killed
"""


def test_a_killed_owners_forked_child_does_not_keep_the_store_from_being_settled(start_runtime: StartRuntime, tmp_path: Path) -> None:
    """The claim dies with the process that made it: a child it forked (a tool's subprocess
    caught before its exec when the owner was SIGKILLed) does not hold it, so the next start
    settles the dead owner's turns instead of taking the store for served."""
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "state.db"
    runtime, write = written(start_runtime, path)
    write.session("s1")
    write("s1", user("go"), at=100.0, turn="t1")
    write("s1", calls("c1"), at=101.0)
    assert runtime.stop(timeout=DEADLINE)
    owner = subprocess.Popen(
        [sys.executable, "-c", _FORKING_OWNER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        owner.kill()
        assert owner.wait(timeout=DEADLINE) == -signal.SIGKILL
        os.kill(child, 0)  # the forked child lives on, with the dead owner's lock file open
        second = start_agent_runtime(path, deps_for(path))
        try:
            with StoreReader(path) as reader:
                turn = reader.find_turn("t1")
                assert turn is not None and (turn.status, turn.reason) == ("failed", "interrupted")
            assert transcript(path, "s1")[-1] == result("c1", INTERRUPTED_RESULT)
        finally:
            assert second.stop(timeout=DEADLINE)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)  # the group: the owner and its forked child
        assert owner.stdin is not None and owner.stdout is not None
        owner.stdin.close()
        owner.stdout.close()
        owner.wait(timeout=DEADLINE)
