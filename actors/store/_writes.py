"""The SQL of each write command; each write is atomic on its own, without a SAVEPOINT.

``create_session``, ``end_session`` and ``update_totals`` are one statement each, and SQLite
undoes a failed statement by itself. ``remove_last_turn`` deletes in one statement and updates
the counters after it (a failed counter update leaves counters stale, never half a turn); it
leaves ``turns`` alone: an undone turn still ran. ``append_messages`` writes its turn mark
first (a refused start changes nothing), then inserts its rows (the foreign keys refuse an
unknown session before any change) and updates the session's counters last; if anything
fails halfway it deletes the rows it inserted and takes the mark back. A SAVEPOINT per write
would be simpler, but it makes FTS5 flush its pending index data at every write: about 30%
fewer messages per second (measured with ``bench/bench_store.py``).

On Postgres an append is one round trip (``pg_append``: its turn mark, rows and counters sent
together, ``PgConnection.together``), its savepoint undoing it when a step or a check fails;
with its fence check, two. The writer sends the appends of a batch together, fence checks
included: one round trip for all of them (``_append_groups``).

Each function returns the reply to tell after the commit and the number of message rows.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import apsw

from protocols._base import Message
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
    SegmentStart,
    SessionCreated,
    SessionDeleted,
    SessionEnded,
    SessionTotalsUpdated,
    TurnMark,
    TurnRemoved,
    UpdateSessionTotals,
)

from ._backend import Connection
from ._errors import StoreConnectionBroken
from ._pg import PgConnection, Sent, Step
from ._rows import INSERT_MESSAGE, LIVE_START, MessageRow, decode_tool_calls, encode_model_config, message_row


class Rejected(Exception):
    """A write that makes no sense (unknown session, mismatched lengths); the text says why."""


def create_session(db: Connection, c: CreateSession) -> tuple[Message, int]:
    title = c.title
    if title is not None and c.number_taken_title:
        title = _free_title(db, title)
    db.execute(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt, parent_session_id, "
        "started_at, title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            c.session_id,
            c.source,
            c.user_id,
            c.model,
            encode_model_config(c.model_config),
            c.system_prompt,
            c.parent_session_id,
            time.time() if c.started_at is None else c.started_at,
            title,
        ),
    )
    return SessionCreated(session_id=c.session_id, token=c.token), 0


def _free_title(db: Connection, title: str) -> str | None:
    """``title``, or the first of ``title (2)``, ``title (3)``... that no session has (None after 1,000)."""
    for n in range(1, 1001):
        candidate = title if n == 1 else f"{title} ({n})"
        if not list(db.execute("SELECT 1 FROM sessions WHERE title = ?", (candidate,))):
            return candidate
    return None


def append_messages(db: Connection, c: AppendMessages) -> tuple[Message, int]:
    if isinstance(db, PgConnection):
        return _append_in_one_trip(db, c)
    now, rows = _rows_of(c)
    count = len(rows)
    # The mark goes first: a refused start changes nothing, and the foreign key of ``turns``
    # refuses an unknown session before any change.
    undo_mark = None if c.turn is None else mark_turn(db, c.session_id, c.turn, now)
    if c.segment is not None and not count:
        msg = "a write that starts a segment must hold its messages; give the compressed conversation"
        raise Rejected(msg)
    ids: list[int] = []
    try:
        # The foreign key refuses the first row of an unknown session, before any change.
        if count == 1:
            ids.extend(row[0] for row in db.execute(INSERT_MESSAGE, rows[0]))
        elif count:
            ids.extend(row[0] for row in db.executemany(INSERT_MESSAGE, rows))
        calls = sum(len(m.tool_calls) for m in c.messages)
        if c.usage is None:
            db.execute(_COUNT, (count, calls, c.session_id))
        else:  # the same one statement: a reply's tokens are counted with the reply
            u = c.usage
            db.execute(_COUNT_WITH_USAGE, (count, calls, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, c.session_id))
        _require_session(db, c.session_id)
        if c.segment is not None:
            _start_segment(db, c.session_id, c.segment, ids[0], now)
    except Exception as exc:
        if not transaction_lost(db):
            if ids:
                _undo_inserts(db, ids, exc)
            if undo_mark is not None:
                _undo(db, undo_mark, exc)
        raise
    return MessagesPersisted(session_id=c.session_id, token=c.token, message_ids=tuple(ids)), count


def _rows_of(c: AppendMessages) -> tuple[float, list[MessageRow]]:
    """The append's time and its rows (``Rejected`` when its per-message lists do not fit)."""
    count = len(c.messages)
    for name, values in (("timestamps", c.timestamps), ("token_counts", c.token_counts)):
        if values and len(values) != count:
            msg = f"{name} has {len(values)} entries for {count} messages; give one per message or none"
            raise Rejected(msg)
    now = time.time() if c.timestamp is None else c.timestamp
    stamps = c.timestamps or (now,) * count
    counts = c.token_counts or (None,) * count
    return now, [message_row(c.session_id, m, t, n) for m, t, n in zip(c.messages, stamps, counts, strict=True)]


@dataclasses.dataclass(frozen=True)
class PgAppend:
    """Postgres: an append as the statements to send (``together``, alone or with other writes')
    and how to read what they answered."""

    command: AppendMessages
    steps: list[Step]
    now: float

    def answer(self, sent: Sequence[Sent]) -> MessagesPersisted:
        """What the append's steps answered, as its reply; ``Rejected`` when a check fails (the
        savepoint around the steps must then undo them)."""
        c = self.command
        if c.turn is not None and c.turn.event == "started" and sent[0].changes == 0:
            raise Rejected(f"turn {c.turn.turn_id!r} of session {c.session_id!r} was started already; a turn id is started once per session")
        if sent[-1].changes == 0:
            raise Rejected(f"there is no session {c.session_id!r}; send CreateSession first")
        ids = [int(row[0]) for row in sent[-2].rows] if c.messages else []
        return MessagesPersisted(session_id=c.session_id, token=c.token, message_ids=tuple(ids))


def pg_append(c: AppendMessages) -> PgAppend:
    """The same statements and checks as on SQLite, in the same order (the mark first: its foreign
    key refuses an unknown session), except that a turn's end is one upsert. No ``_undo`` on this
    backend: a failed step or check raises, and the write's savepoint undoes the steps before it."""
    now, rows = _rows_of(c)
    if c.segment is not None and not rows:
        raise Rejected("a write that starts a segment must hold its messages; give the compressed conversation")
    steps = [*([] if c.turn is None else [_mark_step(c.session_id, c.turn, now)]), *append_steps(c, rows)]
    return PgAppend(command=c, steps=steps, now=now)


def _append_in_one_trip(db: PgConnection, c: AppendMessages) -> tuple[Message, int]:
    """Postgres: the append's turn mark, rows and counters in one round trip (``PgConnection.together``);
    a segment's start, which needs the first row's id, in a second."""
    append = pg_append(c)
    reply = append.answer(db.together(append.steps))
    if c.segment is not None:
        _start_segment(db, c.session_id, c.segment, reply.message_ids[0], append.now)
    return reply, len(c.messages)


def append_steps(c: AppendMessages, rows: list[MessageRow]) -> list[Step]:
    """Postgres: an append's rows and counters (its turn mark apart) as steps of ``together``: the
    insert (when there are rows), then the counters, whose ``changes`` is 0 for an unknown session."""
    count = len(rows)
    calls = sum(len(m.tool_calls) for m in c.messages)
    steps = [Step(INSERT_MESSAGE, many=rows)] if count else []
    if c.usage is None:
        steps.append(Step(_COUNT, (count, calls, c.session_id)))
    else:
        u = c.usage
        steps.append(Step(_COUNT_WITH_USAGE, (count, calls, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, c.session_id)))
    return steps


def message_rows(c: AppendMessages) -> list[MessageRow]:
    """The rows of an append whose messages share its ``timestamp`` (no per-message stamps or counts)."""
    now = time.time() if c.timestamp is None else c.timestamp
    return [message_row(c.session_id, m, now, None) for m in c.messages]


def _mark_step(session_id: str, mark: TurnMark, now: float) -> Step:
    """:func:`mark_turn` as one statement: a start inserts (nothing when the turn is known: the
    caller refuses it), an end closes a running row, inserts an ended one for a turn never seen
    started, and leaves an ended one alone."""
    if mark.event == "started":
        return Step(
            "INSERT INTO turns (session_id, turn_id, status, reason, started_at) VALUES (?, ?, 'running', '', ?) ON CONFLICT DO NOTHING",
            (session_id, mark.turn_id, now),
        )
    if mark.event not in _ENDS:
        raise Rejected(f"a turn mark's event is started, completed, failed or cancelled, not {mark.event!r}")
    return Step(
        "INSERT INTO turns (session_id, turn_id, status, reason, ended_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, turn_id) DO UPDATE "
        "SET status = excluded.status, reason = excluded.reason, ended_at = excluded.ended_at WHERE turns.status = 'running'",
        (session_id, mark.turn_id, mark.event, mark.reason, now),
    )


_COUNT = "UPDATE sessions SET message_count = coalesce(message_count, 0) + ?, tool_call_count = coalesce(tool_call_count, 0) + ? WHERE id = ?"
_COUNT_WITH_USAGE = (
    "UPDATE sessions SET message_count = coalesce(message_count, 0) + ?, tool_call_count = coalesce(tool_call_count, 0) + ?, "
    "input_tokens = coalesce(input_tokens, 0) + ?, output_tokens = coalesce(output_tokens, 0) + ?, "
    "cache_read_tokens = coalesce(cache_read_tokens, 0) + ?, cache_write_tokens = coalesce(cache_write_tokens, 0) + ? WHERE id = ?"
)


def _start_segment(db: Connection, session_id: str, segment: SegmentStart, first_message_id: int, now: float) -> None:
    """The session's next segment begins at ``first_message_id`` (if this fails, the write's
    undo takes its messages back: the old segment stays the newest)."""
    db.execute(
        "INSERT INTO segments (session_id, segment, first_message_id, reason, started_at, summary, tokens_before, tokens_after, summarised) "
        "VALUES (?, (SELECT coalesce(max(segment), 0) + 1 FROM segments WHERE session_id = ?), ?, ?, ?, ?, ?, ?, ?)",
        (session_id, session_id, first_message_id, segment.reason, now, segment.summary, segment.tokens_before, segment.tokens_after, segment.summarised),
    )


_ENDS = frozenset({"completed", "failed", "cancelled"})
Undo = tuple[str, tuple[object, ...]]
"""A statement and its arguments that take a change back."""


def mark_turn(db: Connection, session_id: str, mark: TurnMark, now: float) -> Undo | None:
    """Record a turn's start or end in ``turns``; return how to take it back (None: nothing changed).

    ``started`` inserts a ``running`` row, refused if the turn is known already (a turn id is
    started once per session). An end closes a ``running`` row; a turn already ended is left
    as it is; a turn the store never saw start (before schema 4) gets an ended row.

    Raises:
        Rejected: a second start, or an event that is not one of the four.
        apsw.ConstraintError: the session does not exist (foreign key).
    """
    key = (session_id, mark.turn_id)
    if mark.event == "started":
        db.execute(
            "INSERT INTO turns (session_id, turn_id, status, reason, started_at) VALUES (?, ?, 'running', '', ?) ON CONFLICT DO NOTHING",
            (*key, now),
        )
        if db.changes() == 0:
            msg = f"turn {mark.turn_id!r} of session {session_id!r} was started already; a turn id is started once per session"
            raise Rejected(msg)
        return "DELETE FROM turns WHERE session_id = ? AND turn_id = ?", key
    if mark.event not in _ENDS:
        msg = f"a turn mark's event is started, completed, failed or cancelled, not {mark.event!r}"
        raise Rejected(msg)
    db.execute(
        "UPDATE turns SET status = ?, reason = ?, ended_at = ? WHERE session_id = ? AND turn_id = ? AND status = 'running'",
        (mark.event, mark.reason, now, *key),
    )
    if db.changes():
        return "UPDATE turns SET status = 'running', reason = '', ended_at = NULL WHERE session_id = ? AND turn_id = ?", key
    db.execute(
        "INSERT INTO turns (session_id, turn_id, status, reason, ended_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (*key, mark.event, mark.reason, now),
    )
    if db.changes():
        return "DELETE FROM turns WHERE session_id = ? AND turn_id = ?", key
    return None  # ended already: a turn ends once


def end_session(db: Connection, c: EndSession) -> tuple[Message, int]:
    db.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
        (time.time() if c.ended_at is None else c.ended_at, c.end_reason, c.session_id),
    )
    _require_session(db, c.session_id)
    return SessionEnded(session_id=c.session_id, token=c.token), 0


def update_totals(db: Connection, c: UpdateSessionTotals) -> tuple[Message, int]:
    title = c.title
    if title is not None and c.title_if_untitled:
        current = list(db.execute("SELECT title FROM sessions WHERE id = ?", (c.session_id,)))
        title = _free_title(db, title) if current and current[0][0] is None else None
    db.execute(
        "UPDATE sessions SET input_tokens = coalesce(input_tokens, 0) + ?, "
        "output_tokens = coalesce(output_tokens, 0) + ?, cache_read_tokens = coalesce(cache_read_tokens, 0) + ?, "
        "cache_write_tokens = coalesce(cache_write_tokens, 0) + ?, reasoning_tokens = coalesce(reasoning_tokens, 0) + ?, "
        "title = coalesce(?, title), model = coalesce(?, model) WHERE id = ?",
        (
            c.input_tokens,
            c.output_tokens,
            c.cache_read_tokens,
            c.cache_write_tokens,
            c.reasoning_tokens,
            title,
            c.model,
            c.session_id,
        ),
    )
    _require_session(db, c.session_id)
    return SessionTotalsUpdated(session_id=c.session_id, token=c.token), 0


def delete_session(db: Connection, c: DeleteSession) -> tuple[Message, int]:
    # Asked of the table, not of db.changes(): that counts the last write of the batch, whatever it was.
    if db.execute("SELECT 1 FROM sessions WHERE id = ?", (c.session_id,)).fetchone() is None:
        raise Rejected(f"there is no session {c.session_id!r}")
    db.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?", (c.session_id,))
    db.execute("DELETE FROM turns WHERE session_id = ?", (c.session_id,))
    db.execute("DELETE FROM segments WHERE session_id = ?", (c.session_id,))
    db.execute("DELETE FROM messages WHERE session_id = ?", (c.session_id,))
    deleted = db.changes()
    db.execute("DELETE FROM sessions WHERE id = ?", (c.session_id,))
    return SessionDeleted(session_id=c.session_id, token=c.token, messages_deleted=deleted), 0


def remove_last_turn(db: Connection, c: RemoveLastTurn) -> tuple[Message, int]:
    rows = list(
        db.execute(
            f"SELECT id, content FROM messages WHERE session_id = ? AND role = 'user' AND id >= {LIVE_START} ORDER BY id DESC LIMIT 1",
            (c.session_id, c.session_id),
        )
    )  # only in the newest segment: an undo never reaches behind a compression
    if not rows:
        if not list(db.execute("SELECT 1 FROM sessions WHERE id = ?", (c.session_id,))):
            msg = f"there is no session {c.session_id!r}; send CreateSession first"
            raise Rejected(msg)
        return TurnRemoved(session_id=c.session_id, token=c.token, removed=0), 0
    first, text = rows[0]
    calls = sum(
        len(decode_tool_calls(row[0]))
        for row in db.execute("SELECT tool_calls FROM messages WHERE session_id = ? AND id >= ? AND tool_calls IS NOT NULL", (c.session_id, first))
    )
    db.execute("DELETE FROM messages WHERE session_id = ? AND id >= ?", (c.session_id, first))
    removed = db.changes()
    db.execute(
        "UPDATE sessions SET message_count = max(0, coalesce(message_count, 0) - ?), tool_call_count = max(0, coalesce(tool_call_count, 0) - ?) WHERE id = ?",
        (removed, calls, c.session_id),
    )
    return TurnRemoved(session_id=c.session_id, token=c.token, removed=removed, text=text), 0


def put_response(db: Connection, c: PutResponse) -> tuple[Message, int]:
    db.execute(
        "INSERT INTO responses (id, session_id, created_at, body) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, created_at = excluded.created_at, body = excluded.body",
        (c.response_id, c.session_id, c.created_at, c.body),
    )
    db.execute(
        "DELETE FROM responses WHERE id IN (SELECT id FROM responses ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?)",
        (c.keep,),
    )
    return ResponseStored(response_id=c.response_id, token=c.token), 0


def delete_response(db: Connection, c: DeleteResponse) -> tuple[Message, int]:
    db.execute("DELETE FROM responses WHERE id = ?", (c.response_id,))
    return ResponseDeleted(response_id=c.response_id, deleted=db.changes() > 0, token=c.token), 0


def transaction_lost(db: Connection) -> bool:
    try:
        return not db.in_transaction
    except apsw.Error:
        return True


def _undo_inserts(db: Connection, ids: list[int], cause: Exception) -> None:
    """Delete the rows a half-done append inserted (the FTS delete trigger follows)."""
    try:
        db.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in ids])
    except apsw.Error as exc:
        msg = f"could not undo a half-done append ({_describe(exc)}) after {_describe(cause)}"
        raise StoreConnectionBroken(msg) from cause


def _undo(db: Connection, undo: Undo, cause: Exception) -> None:
    """Take back a half-done append's turn mark."""
    try:
        db.execute(*undo)
    except apsw.Error as exc:
        msg = f"could not undo a half-done append's turn mark ({_describe(exc)}) after {_describe(cause)}"
        raise StoreConnectionBroken(msg) from cause


def _require_session(db: Connection, session_id: str) -> None:
    if db.changes() == 0:
        msg = f"there is no session {session_id!r}; send CreateSession first"
        raise Rejected(msg)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
