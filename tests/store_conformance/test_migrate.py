"""``hermes db migrate``: a SQLite home copied into Postgres, through the real command line.

The file is written by the real writer (sessions with a parent, a compressed session's
segments, turns, stored responses, a pool's state, a job and its occurrence); the command runs
as a subprocess; Postgres then reads back the same transcripts, and its writer goes on with
new ids past the copied ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.store import StoreReader
from actors.store._credentials_rows import read_pool_state
from actors.store._jobs_rows import read_jobs
from protocols import ChatMessage
from protocols._credentials import SavePoolState
from protocols._scheduler import ClaimOccurrence, Job, Occurrence, SaveJob
from protocols._store import MessagesPersisted, PutResponse, SegmentStart, TurnMark
from tests.conftest import DEADLINE
from tests.postgres_server import PostgresServer
from tests.store_conformance.test_conformance import answer, ask, make, start, write
from tests.store_kit import Replies, StartRuntime, user


def migrate(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HERMES_DATABASE_URL"}
    command = [sys.executable, "-m", "actors.cli", "db", "migrate", "--home", str(home), *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE * 4, env=env, check=False)


def fill(start_runtime: StartRuntime, path: str) -> None:
    store, replies = start(start_runtime, path), Replies()
    make(store, replies, "parent", title="Parent", started_at=1.0)
    make(store, replies, "child", parent_session_id="parent", started_at=2.0)
    write(store, replies, "parent", user("plan the trip"), turn=TurnMark(turn_id="t1", event="started"), at=10.0)
    write(store, replies, "parent", answer("go north"), turn=TurnMark(turn_id="t1", event="completed"), at=11.0)
    write(store, replies, "child", user("pack the bags"), answer("packed"), at=12.0)
    summary = SegmentStart(summary="they planned a trip", tokens_before=900, tokens_after=100, summarised=2)
    assert isinstance(write(store, replies, "parent", ChatMessage(role="user", content="summary: trip north"), at=13.0), MessagesPersisted)
    ask(store, replies, _segment(replies, summary))
    ask(store, replies, PutResponse(response_id="r1", session_id="parent", body="{}", created_at=3.0, reply_to=replies))
    ask(store, replies, SavePoolState(provider="openai", state='{"keys": 2}', saved_at=4.0, reply_to=replies))
    ask(store, replies, SaveJob(job=Job(id="j1", name="daily", prompt="report", schedule="every 1d", created_at=5.0), reply_to=replies))
    ask(store, replies, ClaimOccurrence(occurrence=Occurrence(job_id="j1", at=86400.0, status="claimed", claimed_at=86400.0), reply_to=replies))


def _segment(replies: Replies, segment: SegmentStart) -> Any:
    from protocols._store import AppendMessages

    return AppendMessages(session_id="parent", messages=(user("after the summary"),), segment=segment, timestamp=14.0, token="seg", reply_to=replies)


def test_hermes_db_migrate_copies_a_sqlite_home_into_postgres_with_counts_checked(
    start_runtime: StartRuntime, tmp_path: Path, postgres: PostgresServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    fill(start_runtime, str(home / "state.db"))
    with StoreReader(home / "state.db") as reader:
        before = {s: (reader.load_stored_messages(s, every_segment=True), reader.load_messages(s), reader.load_turns(s)) for s in ("parent", "child")}
        segments = reader.load_segments("parent")
    url = postgres.new_database()

    done = migrate(home, "--to", url)
    assert done.returncode == 0, done.stderr
    assert (
        "sessions 2, messages 6, responses 1, turns 1, credential_pools 1, segments 1, cron_jobs 1, cron_occurrences 1" in done.stdout
        and "(row counts checked)" in done.stdout
    )

    with StoreReader(url) as reader:
        after = {s: (reader.load_stored_messages(s, every_segment=True), reader.load_messages(s), reader.load_turns(s)) for s in ("parent", "child")}
        assert after == before
        assert reader.load_segments("parent") == segments
        child = reader.get_session("child")
        assert child is not None and child.parent_session_id == "parent"
        assert [h.session_id for h in reader.search("trip")] and reader.get_response("r1") == ("parent", "{}")
    assert read_pool_state(url, "openai") == '{"keys": 2}'
    assert [o.job_id for o in read_jobs(url).open] == ["j1"]

    highest = max(m.id for m in before["parent"][0] + before["child"][0])
    store, replies = start(start_runtime, url), Replies()
    persisted = write(store, replies, "child", user("one more"))
    assert isinstance(persisted, MessagesPersisted) and persisted.message_ids[0] > highest

    again = migrate(home, "--to", url)
    assert again.returncode == 2 and "holds 2 session(s) already; migrate into an empty database" in again.stderr
    missing = migrate(tmp_path / "nowhere", "--to", url)
    assert missing.returncode == 2 and "there is no store at" in missing.stderr
