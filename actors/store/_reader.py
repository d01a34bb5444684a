"""Read-only access to the session store: sessions, transcripts, turns and full-text search.

A :class:`StoreReader` owns one read-only apsw connection. Under WAL it reads the last
committed state without blocking the writer, and the writer never blocks it.

Each thread (or actor) that reads opens its own ``StoreReader`` and closes it when done:
apsw would serialise threads sharing one connection, and a read transaction belongs to
one caller. Reads are disk I/O, so an actor handler must not call these methods (rule 1);
run them in a worker thread of the reactor, or in a thread that owns the reader.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

from protocols._store import SearchHit, SegmentRecord, SessionRecord, StoredMessage, TurnRecord
from protocols._transcript import ChatMessage

from ._backend import Connection, open_store_reader
from ._errors import StoreError
from ._pg import PgConnection
from ._rows import LIVE_START, SEGMENT_COLUMNS, SEGMENT_FIELDS, SELECT_MESSAGE, SESSION_COLUMNS, TURN_COLUMNS, session_record, stored_message, turn_record
from ._search import fts5_query


class StoreReader:
    """A read-only view of one store (a file, or a Postgres URL: ``_backend``); one per thread. Use as a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 2.0) -> None:
        """Open ``path`` read-only.

        Raises:
            StoreError: there is no store at ``path`` (the writer creates it).
            SchemaVersionError: the file has another schema version than this build reads.
        """
        self.path = os.fspath(path)
        self._db: Connection | None = open_store_reader(self.path, busy_timeout=busy_timeout)

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def connection(self) -> Connection:
        """The read-only connection, for reads this class has no method for (the cluster
        router's lease and node reads). ``StoreError`` when the reader is closed."""
        return self._conn()

    @property
    def broken(self) -> bool:
        """Closed, or (Postgres) its connection was found unusable: not to be read through again."""
        return self._db is None or (isinstance(self._db, PgConnection) and self._db.broken)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The session ``session_id``, or None if there is none."""
        row = self._conn().execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else session_record(row)

    def list_sessions(self, *, source: str | None = None, parent_session_id: str | None = None, limit: int = 50, offset: int = 0) -> list[SessionRecord]:
        """Sessions, most recently started first, optionally of one source or one parent."""
        where, args = _filters(source=source, parent_session_id=parent_session_id)
        rows = self._conn().execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions{where} ORDER BY started_at DESC, id LIMIT ? OFFSET ?",
            (*args, limit, offset),
        )
        return [session_record(row) for row in rows]

    def get_response(self, response_id: str) -> tuple[str, str] | None:
        """A stored Responses API object: ``(session_id, JSON body)``, or None."""
        for session_id, body in self._conn().execute("SELECT session_id, body FROM responses WHERE id = ?", (response_id,)):
            return str(session_id), str(body)
        return None

    def load_messages(self, session_id: str, *, every_segment: bool = False) -> list[ChatMessage]:
        """The transcript of ``session_id`` in the order it was appended (empty if unknown):
        its newest segment (what a compression left, and what came after), or with
        ``every_segment`` every message ever stored, the compressed ones included."""
        return [stored.message for stored in self.load_stored_messages(session_id, every_segment=every_segment)]

    def load_stored_messages(self, session_id: str, *, every_segment: bool = False) -> list[StoredMessage]:
        """Like :meth:`load_messages`, with each row's id, timestamp and token count."""
        if every_segment:
            rows = self._conn().execute(f"{SELECT_MESSAGE} WHERE session_id = ? ORDER BY id", (session_id,))
        else:
            rows = self._conn().execute(f"{SELECT_MESSAGE} WHERE session_id = ? AND id >= {LIVE_START} ORDER BY id", (session_id, session_id))
        return [stored_message(row) for row in rows]

    def load_segments(self, session_id: str) -> list[SegmentRecord]:
        """The segments compressions made in ``session_id``, oldest first (empty if never compressed)."""
        rows = self._conn().execute(f"SELECT {SEGMENT_COLUMNS} FROM segments WHERE session_id = ? ORDER BY segment", (session_id,))
        return [SegmentRecord(**dict(zip(SEGMENT_FIELDS, row, strict=True))) for row in rows]

    def load_turns(self, session_id: str) -> list[TurnRecord]:
        """The turns of ``session_id`` the store knows, in the order they started (empty if none).

        A turn the store first heard of at its end (it started before schema 4) is placed by its end.
        """
        rows = self._conn().execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY coalesce(started_at, ended_at), rowid", (session_id,))
        return [turn_record(row) for row in rows]

    def find_turn(self, turn_id: str) -> TurnRecord | None:
        """The turn ``turn_id`` of whichever session ran it, or None (the latest, if two sessions reused the id)."""
        row = (
            self._conn()
            .execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE turn_id = ? ORDER BY coalesce(started_at, ended_at) DESC, rowid DESC LIMIT 1",
                (turn_id,),
            )
            .fetchone()
        )
        return None if row is None else turn_record(row)

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        session_id: str | None = None,
        markers: tuple[str, str] = (">>>", "<<<"),
        snippet_tokens: int = 16,
    ) -> list[SearchHit]:
        """Messages whose content matches the words of ``query``, best match first.

        Any text is accepted: it is rebuilt by :func:`fts5_query` (words, quoted; upper-case
        ``AND`` / ``OR`` / ``NOT`` between words stay operators), so it never fails as FTS5
        syntax. Text without a searchable word finds nothing.
        """
        db = self._conn()
        if isinstance(db, PgConnection):
            from ._pg_search import search

            return search(db, query, limit=limit, session_id=session_id, markers=markers, snippet_tokens=snippet_tokens)
        match = fts5_query(query)
        if not match or limit <= 0:
            return []
        snippet = "snippet(messages_fts, 0, ?, ?, '...', ?)"
        marks = (markers[0], markers[1], max(1, min(snippet_tokens, 64)))
        if session_id is None:
            # FTS5 ranks and cuts to ``limit`` itself; snippets are built for those rows only.
            rows = db.execute(
                "SELECT m.id, m.session_id, m.role, m.timestamp, f.snip, f.rank FROM "
                f"(SELECT rowid AS id, {snippet} AS snip, rank FROM messages_fts "
                "WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?) AS f "
                "JOIN messages AS m ON m.id = f.id ORDER BY f.rank",
                (*marks, match, limit),
            )
        else:
            # A conversation's rows are close together: FTS5 seeks that rowid range instead
            # of ranking every match in the store (measured in bench/bench_store.py).
            bounds = db.execute("SELECT min(id), max(id) FROM messages WHERE session_id = ?", (session_id,)).fetchone()
            if bounds is None or bounds[0] is None:
                return []
            low, high = bounds
            rows = db.execute(
                f"SELECT m.id, m.session_id, m.role, m.timestamp, {snippet}, bm25(messages_fts) "
                "FROM messages_fts JOIN messages AS m ON m.id = messages_fts.rowid "
                "WHERE messages_fts MATCH ? AND messages_fts.rowid BETWEEN ? AND ? AND m.session_id = ? "
                "ORDER BY rank LIMIT ?",
                (*marks, match, low, high, session_id, limit),
            )
        return [
            SearchHit(message_id=int(id_), session_id=sid, role=role, snippet=snippet or "", timestamp=float(ts), rank=float(rank))
            for id_, sid, role, ts, snippet, rank in rows
        ]

    def hermes_import(self) -> dict[str, Any] | None:
        """The newest import of a Hermes ``state.db`` into this file (``import_hermes_store``), or None."""
        db = self._conn()
        if not db.table_exists(None, "hermes_import"):
            return None
        row = db.execute("SELECT imported_at, hermes_version, backup, sessions, messages FROM hermes_import ORDER BY imported_at DESC LIMIT 1").fetchone()
        if row is None:
            return None
        return dict(zip(("imported_at", "hermes_version", "backup", "sessions", "messages"), row, strict=True))

    def _conn(self) -> Connection:
        if self._db is None:
            msg = f"this StoreReader for {self.path!r} is closed; open a new one"
            raise StoreError(msg)
        return self._db


def _filters(**equal: str | None) -> tuple[str, tuple[str, ...]]:
    chosen = {column: value for column, value in equal.items() if value is not None}
    if not chosen:
        return "", ()
    return " WHERE " + " AND ".join(f"{column} = ?" for column in chosen), tuple(chosen.values())
