"""Settling what a dead process left open, once, when a runtime starts on a store file.

A process that stopped without ending its turns (SIGKILL, a power loss, a crash) leaves
``turns`` rows ``running`` and tool calls without results: calls whose tools may or may not
have run. Before any session of the next runtime can run, :func:`settle_interrupted` closes
them, in one transaction on a writer connection of its own:

- every ``running`` turn becomes ``failed`` with reason ``interrupted``;
- in every session that had one, each tool call after the session's last user message that
  has no result gets exactly one (``result_text``: the outcome is unknown), in call order,
  through the same insert as ``AppendMessages`` (counters and search index follow). No tool
  is run again;
- a session with no ``turns`` row at all (written before schema 4) is settled the same way
  when its last message is an assistant message with tool calls or a tool message.

A session whose turns all ended is left alone, even with unanswered calls: a turn that
completed by handing its calls to the client (the client's own tools) waits for the client's
results.

Cost: the running turns come from a partial index; a session's last message and its tail
after the last user message are read backwards through ``idx_messages_session`` (by
timestamp: the writer stamps messages at write time, so a session's timestamps follow its
ids; the results written here are stamped no earlier than the tail they answer). A session
with no running turn costs one index probe for its ``turns`` rows and one for its last message.

Invariant: it runs before the store writer opens the file, so it is the file's only writer.
Two runtimes on one file would settle each other's live turns: one process owns a store.
In cluster mode (``node_id``) several nodes share the store: a session another node holds
live is left alone (its own dead predecessor's are settled: a restarted ``--workers`` worker
keeps its node id), and each node's session actors settle their own session as they acquire
its lease (``settle_session``, from ``AcquireLease.settle``), the takeover of a dead node's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from typing import Any

import apsw
import msgspec

from protocols._store import AppendMessages, Interrupted
from protocols._transcript import ChatMessage, ToolCall

from ._backend import Connection, is_database_url, open_store_writer
from ._errors import StoreError
from ._pg import Sent, Step
from ._rows import decode_tool_calls
from ._writes import append_messages

INTERRUPTED = "interrupted"
"""The reason of a turn that was running when its process stopped."""

_LEGACY = """
SELECT s.id FROM sessions AS s
WHERE NOT EXISTS (SELECT 1 FROM turns AS t WHERE t.session_id = s.id)
AND (
    SELECT m.role = 'tool' OR (m.role = 'assistant' AND coalesce(m.tool_calls, '') NOT IN ('', '[]'))
    FROM messages AS m WHERE m.session_id = s.id ORDER BY m.timestamp DESC, m.id DESC LIMIT 1
)
"""
"""Sessions the store has no turn of, whose last message leaves tool calls possibly open."""

_TAIL = "SELECT id, role, tool_calls, tool_call_id, timestamp FROM messages WHERE session_id = ? ORDER BY timestamp DESC, id DESC"

TailRow = tuple[int, str, str | None, str | None, float]


@dataclasses.dataclass(frozen=True)
class SettleReport:
    """What :func:`settle_interrupted` did."""

    sessions: dict[str, Interrupted]
    """Session id -> its interrupted turns and how many calls got a result; only sessions it changed."""
    seconds: float
    """How long it took, opening the file included."""


def settle_interrupted(
    path: str | os.PathLike[str], *, result_text: str, now: float | None = None, busy_timeout: float = 2.0, node_id: str | None = None
) -> SettleReport:
    """Fail the turns a dead process left running and answer their unanswered tool calls.

    Call it once, before the store writer opens ``path``. A missing file is left missing
    (empty report); a file of an older schema is migrated first (as the writer would).

    Args:
        path: the store file.
        result_text: the content of each result given to an unanswered call.
        now: the Unix time written as the turns' end and the results' timestamp (default: now).
        busy_timeout: seconds to wait for a lock another connection holds.
        node_id: cluster mode: this node; a session whose lease another node holds live is
            left alone (its turns are that node's), and the lease row of each session settled
            is locked until the commit, so a node acquiring it meanwhile waits and loads after.

    Raises:
        StoreError: the file is not a store this build opens (``SchemaVersionError``), or
            SQLite failed; nothing was changed.
    """
    began = time.perf_counter()
    name = os.fspath(path)
    if not is_database_url(name) and not os.path.exists(name):
        return SettleReport({}, time.perf_counter() - began)
    when = time.time() if now is None else now
    try:
        db = open_store_writer(name, busy_timeout=busy_timeout)
    except apsw.Error as exc:
        msg = f"could not open {name!r} to settle the turns a stopped process left open: {_describe(exc)}"
        raise StoreError(msg) from exc
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            sessions = _settle(db, result_text, when, node_id, leases_at=now)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except apsw.Error as exc:
        msg = f"could not settle the turns a stopped process left open in {name!r}: {_describe(exc)}"
        raise StoreError(msg) from exc
    finally:
        db.close()
    return SettleReport(sessions, time.perf_counter() - began)


def _settle(db: Connection, text: str, now: float, node_id: str | None = None, *, leases_at: float | None = None) -> dict[str, Interrupted]:
    """``leases_at``: the instant leases are judged at (None: the store's clock)."""
    running: dict[str, list[str]] = {}
    for session_id, turn_id in db.execute("SELECT session_id, turn_id FROM turns WHERE status = 'running' ORDER BY session_id, started_at"):
        running.setdefault(session_id, []).append(turn_id)
    if node_id is not None:  # cluster mode: only what no other node holds live
        from ._lease_rows import store_now  # imports this module

        at = store_now(db) if leases_at is None else leases_at
        running = {sid: ids for sid, ids in running.items() if not _held_elsewhere(db, sid, node_id, at)}
        for session_id in running:
            db.execute(
                "UPDATE turns SET status = 'failed', reason = ?, ended_at = ? WHERE session_id = ? AND status = 'running'", (INTERRUPTED, now, session_id)
            )
    elif running:
        db.execute("UPDATE turns SET status = 'failed', reason = ?, ended_at = ? WHERE status = 'running'", (INTERRUPTED, now))
    legacy = [str(row[0]) for row in db.execute(_LEGACY)] if node_id is None else []
    report: dict[str, Interrupted] = {}
    for session_id, turn_ids in running.items():
        report[session_id] = Interrupted(turn_ids=tuple(turn_ids), settled_calls=_answer(db, session_id, text, now))
    for session_id in legacy:
        settled = _answer(db, session_id, text, now)
        if settled:
            report[session_id] = Interrupted(settled_calls=settled)
    return report


def end_leases(path: str | os.PathLike[str], *, busy_timeout: float = 2.0) -> int:
    """End every live session lease of the store file ``path`` (epochs kept); how many.

    Only for the process that holds the file's claim before any node of it runs (a
    ``hermes serve --workers`` parent): every holder is then dead, and a session would
    otherwise wait for its dead holder's lease to lapse. A missing file: 0.

    Raises:
        StoreError: the file cannot be opened or written; nothing was changed.
    """
    from ._lease_rows import store_now  # imports this module

    name = os.fspath(path)
    if not os.path.exists(name):
        return 0
    try:
        db = open_store_writer(name, busy_timeout=busy_timeout)
    except apsw.Error as exc:
        raise StoreError(f"could not open {name!r} to end the leases a stopped process left: {_describe(exc)}") from exc
    try:
        now = store_now(db)
        db.execute("UPDATE leases SET expires_at = ? WHERE expires_at > ? AND node_id <> ''", (now, now))
        return db.changes()
    except apsw.Error as exc:
        raise StoreError(f"could not end the leases a stopped process left in {name!r}: {_describe(exc)}") from exc
    finally:
        db.close()


def _held_elsewhere(db: Connection, session_id: str, node_id: str, now: float) -> bool:
    """True when another node holds the session's lease live; else its lease row stays locked
    (Postgres) until the commit. SQLite's ``BEGIN IMMEDIATE`` already excludes every writer."""
    from ._lease_rows import read_lease  # imports this module

    db.execute("INSERT INTO leases (session_id, node_id, epoch, expires_at) VALUES (?, '', 0, 0) ON CONFLICT DO NOTHING", (session_id,))
    lease = read_lease(db, session_id, lock="FOR UPDATE")
    return lease is not None and lease.node_id != node_id and lease.expires_at > now


def settle_session(db: Connection, session_id: str, text: str, now: float) -> Interrupted | None:
    """In the caller's transaction: fail the session's running turns and answer its open calls
    (as at start, for one session); None when it had no running turn."""
    failed = list(
        db.execute(_FAIL_RUNNING, (INTERRUPTED, now, session_id))
    )  # one statement: every acquire in cluster mode asks, and on Postgres each is a round trip
    if not failed:
        return None
    turn_ids = tuple(str(r[0]) for r in sorted(failed, key=lambda r: (float(r[1]), str(r[0]))))
    return Interrupted(turn_ids=turn_ids, settled_calls=_answer(db, session_id, text, now))


def settle_steps(session_id: str, now: float) -> list[Step]:
    """Postgres: :func:`settle_session`'s reads as steps of ``PgConnection.together`` (the running turns failed, then the
    session's tail read only when that failed one), sent with the lease's update in one round trip;
    :func:`settled` then answers the open calls."""
    return [
        Step(_FAIL_RUNNING, (INTERRUPTED, now, session_id)),
        Step(
            f"SELECT id, role, tool_calls, tool_call_id, timestamp FROM messages WHERE session_id = ? AND EXISTS {_FAILED_NOW} ORDER BY timestamp DESC, id DESC",
            (session_id, session_id, INTERRUPTED, now),
        ),
    ]


def settled(db: Connection, session_id: str, text: str, now: float, failed: Sent, tail: Sent) -> Interrupted | None:
    """What :func:`settle_steps` did, the open calls given their result (one more round trip when any)."""
    settling = settle_results(session_id, text, now, failed, tail)
    if settling is None:
        return None
    report, results = settling
    if results is not None:
        append_messages(db, results)
    return report


def settle_results(session_id: str, text: str, now: float, failed: Sent, tail: Sent) -> tuple[Interrupted, AppendMessages | None] | None:
    """What :func:`settle_steps` did, and the append giving the open calls their results (None:
    none open; the caller writes it); None when no turn was running."""
    if not failed.rows:
        return None
    turn_ids = tuple(str(r[0]) for r in sorted(failed.rows, key=lambda r: (float(r[1]), str(r[0]))))
    results = _results(session_id, _tail_of(tail.rows), text, now)
    return Interrupted(turn_ids=turn_ids, settled_calls=0 if results is None else len(results.messages)), results


_FAIL_RUNNING = "UPDATE turns SET status = 'failed', reason = ?, ended_at = ? WHERE session_id = ? AND status = 'running' RETURNING turn_id, started_at"
_FAILED_NOW = "(SELECT 1 FROM turns WHERE session_id = ? AND status = 'failed' AND reason = ? AND ended_at = ?)"
"""A turn of the session failed by the settle step before (a later statement sees its changes)."""


def _answer(db: Connection, session_id: str, text: str, now: float) -> int:
    """Append a result for each open call after the session's last user message; how many."""
    return _answer_tail(db, session_id, _tail(db, session_id), text, now)


def _answer_tail(db: Connection, session_id: str, tail: list[TailRow], text: str, now: float) -> int:
    results = _results(session_id, tail, text, now)
    if results is None:
        return 0
    append_messages(db, results)
    return len(results.messages)


def _results(session_id: str, tail: list[TailRow], text: str, now: float) -> AppendMessages | None:
    """The append giving each open call of ``tail`` one result (None: none open)."""
    calls = unanswered(tail)
    if not calls:
        return None
    stamp = max(now, max(row[4] for row in tail))
    results = tuple(ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content=text) for call in calls)
    return AppendMessages(session_id=session_id, messages=results, timestamp=stamp)


def _tail(db: Connection, session_id: str) -> list[TailRow]:
    """The session's messages after its last user message, in append order."""
    cursor = db.cursor()
    try:
        return _tail_of(cursor.execute(_TAIL, (session_id,)))
    finally:
        cursor.close()


def _tail_of(newest_first: Iterable[Any]) -> list[TailRow]:
    """The rows after the last user message of a session's messages read newest first, in append order."""
    rows: list[TailRow] = []
    for id_, role, tool_calls, tool_call_id, timestamp in newest_first:
        if role == "user":
            break
        rows.append((int(id_), str(role), tool_calls, tool_call_id, float(timestamp)))
    rows.sort(key=lambda row: row[0])
    return rows


def unanswered(tail: list[TailRow]) -> list[ToolCall]:
    """The calls of ``tail`` that no tool message answers and that a result appended now would.

    As the sanitizer reads a transcript: a call's result is the first unclaimed tool message
    with its id after it and before the next assistant message calling the same id. A call
    whose id is called again later in the tail is left to the sanitizer (a result appended
    at the end would answer the later call).
    """
    places: dict[str, list[int]] = {}
    callers: dict[str, list[int]] = {}
    asking: list[tuple[int, tuple[ToolCall, ...]]] = []
    for index, (_id, role, tool_calls, tool_call_id, _stamp) in enumerate(tail):
        if role == "tool" and tool_call_id is not None:
            places.setdefault(tool_call_id, []).append(index)
        elif role == "assistant" and tool_calls:
            calls = _calls(tool_calls)
            asking.append((index, calls))
            for call in calls:
                callers.setdefault(call.id, []).append(index)
    taken: set[int] = set()
    missing: list[ToolCall] = []
    for index, calls in asking:
        for call in calls:
            later = next((i for i in callers[call.id] if i > index), None)
            limit = len(tail) if later is None else later
            place = next((i for i in places.get(call.id, ()) if index < i < limit and i not in taken), None)
            if place is not None:
                taken.add(place)
            elif later is None:
                missing.append(call)
    return missing


def _calls(text: str) -> tuple[ToolCall, ...]:
    try:
        return decode_tool_calls(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ()  # not OpenAI-shaped (another writer's): nothing this can answer


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
