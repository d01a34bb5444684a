"""The on-disk schema: Hermes's ``state.db`` tables, opened by one writer and many readers.

Tables and columns use Hermes's names and types (``hermes_state.py``), so Hermes's tools can
read a file this store wrote:

- ``sessions``: one row per conversation (id, source, user/model, system prompt, parent,
  start/end, counters, token totals, title);
- ``messages``: one row per transcript entry; ``tool_calls`` is JSON in the OpenAI shape
  ``[{"id", "type": "function", "function": {"name", "arguments"}}]``; ``reasoning_details``
  (Hermes's column) the provider's opaque reasoning blocks as the JSON text it sent;
- ``messages_fts``: an FTS5 index over ``messages.content`` (external content), kept in sync
  by insert / delete / update triggers;
- ``turns``: one row per turn of a session (ours, not Hermes's): ``running`` from its start
  until it ends ``completed`` / ``failed`` / ``cancelled`` (with a reason), written in the same
  transaction as the messages that start or end it;
- ``credential_pools``: one row per provider (ours): its credential pool's state as JSON
  (cooldowns, usage, leases in flight; never a secret), replaced by each save;
- ``segments``: one row per segment of a session after its first (ours): a compression's
  result starts one at its first message id, and loads read the newest segment only (the
  older messages stay, searchable), with the summary and the token counts before and after;
- ``cron_jobs`` / ``cron_occurrences`` (ours, schema 8): scheduled jobs (one JSON record each) and
  one row per occurrence claimed before it runs, or recorded missed (``actors.scheduler``);
- ``memory_facts`` / ``memory_facts_fts`` (ours, schema 9): the ``store`` memory provider's facts
  (``actors.memory``), one row each, and an FTS5 index over their text kept by triggers;
- ``leases`` / ``nodes`` (ours, schema 10): which node owns each session, at which fencing epoch,
  until when (``_lease``), and each node's internal address and last heartbeat (cluster mode);
- ``schema_version``: one row, the version of this layout.

Pragmas: WAL (readers never block the writer, nor it them), ``synchronous=NORMAL`` (a
commit is durable against a crash of this process; a power loss may undo the last
transactions, which ``synchronous="FULL"`` prevents at the cost of an fsync per commit),
``foreign_keys=ON`` (a message needs its session).

Invariant: only the store writer opens a connection that writes (rule 4); readers open
their own read-only connections.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Literal

import apsw

from ._errors import SchemaVersionError, StoreError

SCHEMA_VERSION = 10
"""The layout this build writes and reads (2 added ``responses``, 3 ``messages.images``, 4 ``turns``,
5 ``credential_pools``, 6 ``segments``, 7 ``messages.reasoning_details``, 8 ``cron_jobs`` and ``cron_occurrences``, 9 ``memory_facts``, 10 ``leases`` and ``nodes``). Older files are migrated by ``MIGRATIONS``."""

Synchronous = Literal["NORMAL", "FULL"]

_TABLES = (
    """
CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    images TEXT,
    reasoning_details TEXT
);

"""
    + "\n"
)


_INDEXES = """
CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
"""
"""``IF NOT EXISTS``: a Hermes file being imported (``_hermes_import``) has some of them."""
_TABLES += _INDEXES

_FTS = """
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
);

-- Invariant: messages_fts indexes exactly the content of messages (external content).
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""
"""The full-text index and the triggers that keep it in sync (also what a Hermes import rebuilds)."""
_TABLES += _FTS

_RESPONSES = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_responses_created ON responses(created_at);
"""
_TABLES += _RESPONSES

# ``IF NOT EXISTS``: a file whose version was set back by hand keeps migrating.
_TURNS = """
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    turn_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    reason TEXT NOT NULL DEFAULT '',
    started_at REAL,
    ended_at REAL,
    PRIMARY KEY (session_id, turn_id)
);
CREATE INDEX IF NOT EXISTS idx_turns_running ON turns(session_id, started_at, turn_id) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS idx_turns_turn ON turns(turn_id);
"""
"""``started_at`` is NULL for a turn whose end is the first the store heard of it (started before v4)."""
_TABLES += _TURNS

_CREDENTIAL_POOLS = """
CREATE TABLE IF NOT EXISTS credential_pools (
    provider TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    saved_at REAL NOT NULL
);
"""
"""``state`` is the pool's ``PoolState`` as JSON (``actors.credentials``); the store does not read it."""
_TABLES += _CREDENTIAL_POOLS


_SEGMENTS = """
CREATE TABLE IF NOT EXISTS segments (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    segment INTEGER NOT NULL,
    first_message_id INTEGER NOT NULL,
    reason TEXT NOT NULL,
    started_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    tokens_before INTEGER NOT NULL DEFAULT 0,
    tokens_after INTEGER NOT NULL DEFAULT 0,
    summarised INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, segment)
);
"""
"""Segment ``n`` continues segment ``n - 1`` (0: the session's start, which has no row)."""
_TABLES += _SEGMENTS


_CRON = """
CREATE TABLE IF NOT EXISTS cron_jobs (
    id TEXT PRIMARY KEY,
    job TEXT NOT NULL,
    saved_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cron_occurrences (
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('claimed', 'completed', 'failed', 'silent', 'missed', 'interrupted')),
    manual INTEGER NOT NULL DEFAULT 0,
    session_id TEXT NOT NULL DEFAULT '',
    claimed_at REAL NOT NULL,
    ended_at REAL,
    detail TEXT NOT NULL DEFAULT '',
    delivered TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, at)
);
"""
"""``job`` is the ``protocols._scheduler.Job`` as JSON. Invariant: one ``cron_occurrences`` row per
(job, occurrence), inserted (committed) before its run starts: a second claim finds it."""
_TABLES += _CRON


_FACTS = """
CREATE TABLE IF NOT EXISTS memory_facts (
    id INTEGER PRIMARY KEY,
    content TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL DEFAULT 'general',
    session_id TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
"""
"""The ``store`` memory provider's facts."""
_FACTS_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS memory_facts_fts USING fts5(content, category, content=memory_facts, content_rowid=id);
CREATE TRIGGER IF NOT EXISTS memory_facts_insert AFTER INSERT ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(rowid, content, category) VALUES (new.id, new.content, new.category);
END;
CREATE TRIGGER IF NOT EXISTS memory_facts_delete AFTER DELETE ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, content, category) VALUES ('delete', old.id, old.content, old.category);
END;
CREATE TRIGGER IF NOT EXISTS memory_facts_update AFTER UPDATE ON memory_facts BEGIN
    INSERT INTO memory_facts_fts(memory_facts_fts, rowid, content, category) VALUES ('delete', old.id, old.content, old.category);
    INSERT INTO memory_facts_fts(rowid, content, category) VALUES (new.id, new.content, new.category);
END;
"""
"""Invariant: ``memory_facts_fts`` indexes exactly the rows of ``memory_facts`` (on Postgres, a
generated ``tsvector`` column instead: ``_pg_schema.PG_FACTS_FTS``)."""
_TABLES += _FACTS + _FACTS_FTS


_LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS nodes (
    node_id TEXT PRIMARY KEY,
    address TEXT NOT NULL DEFAULT '',
    heartbeat_at REAL NOT NULL
);
"""
"""Times on the store's clock (``_lease_rows.store_now``). No foreign key to ``sessions``: a node
leases a session before it creates it. Invariant: a session's ``epoch`` never goes down (a
release keeps it, so the next holder's is higher)."""
_TABLES += _LEASES


def _add_responses(db: apsw.Connection) -> None:
    db.execute(_RESPONSES)


def _add_images(db: apsw.Connection) -> None:
    db.execute("ALTER TABLE messages ADD COLUMN images TEXT")


def _add_turns(db: apsw.Connection) -> None:
    db.execute(_TURNS)


def _add_credential_pools(db: apsw.Connection) -> None:
    db.execute(_CREDENTIAL_POOLS)


def _add_segments(db: apsw.Connection) -> None:
    db.execute(_SEGMENTS)


def _add_reasoning_details(db: apsw.Connection) -> None:
    # Only where it is missing: Hermes's own files have it, and a file set back by hand keeps migrating.
    if "reasoning_details" not in [row[1] for row in db.execute("PRAGMA table_info(messages)")]:
        db.execute("ALTER TABLE messages ADD COLUMN reasoning_details TEXT")


def _add_cron(db: apsw.Connection) -> None:
    db.execute(_CRON)


def _add_facts(db: apsw.Connection) -> None:
    db.execute(_FACTS + _FACTS_FTS)


def _add_leases(db: apsw.Connection) -> None:
    db.execute(_LEASES)


MIGRATIONS: Mapping[int, Callable[[apsw.Connection], None]] = {
    1: _add_responses,
    2: _add_images,
    3: _add_turns,
    4: _add_credential_pools,
    5: _add_segments,
    6: _add_reasoning_details,
    7: _add_cron,
    8: _add_facts,
    9: _add_leases,
}
"""``MIGRATIONS[n]`` upgrades a version-``n`` file to ``n + 1`` inside the writer's
transaction: 1 → 2 adds the ``responses`` table of the Responses API; 2 → 3 the
``messages.images`` column (a JSON list of the image URLs a user sent); 3 → 4 the ``turns``
table (empty: turns that ran before it are not known); 4 → 5 the ``credential_pools`` table
(empty: pools start fresh); 5 → 6 the ``segments`` table (empty: no session was compressed); 6 → 7
the ``messages.reasoning_details`` column (NULL: earlier replies kept none); 7 → 8 the ``cron_jobs``
and ``cron_occurrences`` tables (empty: a Hermes ``cron/jobs.json`` is imported by the scheduler); 8 → 9 the ``memory_facts``
table and its index (empty); 9 → 10 the ``leases`` and ``nodes`` tables (empty: no session is owned)."""


def open_writer(path: str | os.PathLike[str], *, busy_timeout: float = 2.0, synchronous: Synchronous = "NORMAL") -> apsw.Connection:
    """Open (creating if needed) the database for writing, with the schema in place.

    Raises:
        SchemaVersionError: the file has another schema version and no migration applies.
        StoreError: the file cannot be put in WAL mode (e.g. it is in memory).
        apsw.Error: SQLite could not open the file (permissions, not a database, ...).
    """
    if synchronous not in ("NORMAL", "FULL"):
        msg = f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}"
        raise StoreError(msg)
    db = apsw.Connection(os.fspath(path))
    try:
        db.set_busy_timeout(int(busy_timeout * 1000))
        _check_existing(db, os.fspath(path))  # before WAL: a foreign file is left as it was
        mode = db.pragma("journal_mode", "wal")
        if mode != "wal":
            msg = f"{os.fspath(path)!r} could not be switched to WAL (journal_mode is {mode!r}); use a file on a local disk"
            raise StoreError(msg)
        db.pragma("synchronous", synchronous)
        db.pragma("foreign_keys", True)
        # One immediate transaction: a half-created schema is never visible, and the
        # version is re-read under the write lock.
        db.execute("BEGIN IMMEDIATE")
        try:
            _ensure_schema(db, os.fspath(path))
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


def open_reader(path: str | os.PathLike[str], *, busy_timeout: float = 2.0) -> apsw.Connection:
    """Open the database read-only and check its schema version.

    Raises:
        StoreError: there is no store at ``path`` (the writer creates it).
        SchemaVersionError: the file has another schema version than this build reads.
    """
    name = os.fspath(path)
    try:
        db = apsw.Connection(name, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.CantOpenError:
        msg = f"no session store at {name!r}; start the store writer first (it creates the file)"
        raise StoreError(msg) from None
    try:
        db.set_busy_timeout(int(busy_timeout * 1000))
        refuse_hermes_file(db, name)
        found = read_version(db)
        if found is None:
            msg = f"{name!r} is not a session store (no schema_version table); check the path"
            raise SchemaVersionError(msg)
        if found != SCHEMA_VERSION:
            raise SchemaVersionError(_version_message(name, found))
    except BaseException:
        db.close()
        raise
    return db


def read_version(db: apsw.Connection) -> int | None:
    """The file's schema version, or None if it has no ``schema_version`` table."""
    if not db.table_exists(None, "schema_version"):
        return None
    row = db.execute("SELECT max(version) FROM schema_version").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _check_existing(db: apsw.Connection, name: str) -> int | None:
    """The file's version, if it is a store this build can open (empty counts as one)."""
    refuse_hermes_file(db, name)
    found = read_version(db)
    if found is None:
        has_tables = db.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table'").fetchone()
        if has_tables is not None and has_tables[0]:
            msg = f"{name!r} has tables but no schema_version: it is not a session store; use another path"
            raise SchemaVersionError(msg)
    elif found > SCHEMA_VERSION or any(v not in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        raise SchemaVersionError(_version_message(name, found))
    return found


def _ensure_schema(db: apsw.Connection, name: str) -> None:
    found = _check_existing(db, name)  # again, now under the write lock
    if found is None:
        db.execute(_TABLES)
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        return
    for version in range(found, SCHEMA_VERSION):
        MIGRATIONS[version](db)
        db.execute("UPDATE schema_version SET version = ?", (version + 1,))


_NOT_HERMES: set[tuple[str, int, int]] = set()
"""(path, inode, schema cookie) of files found not to be Hermes's: a reader opens in one pragma
instead of reading the shape (1.7 ms) again."""


def refuse_hermes_file(db: apsw.Connection, name: str) -> None:
    """Raise if the file open in ``db`` was written by Hermes and not imported yet.

    Its version number says nothing here (Hermes's numbers collide with ours): the shape
    does (``_hermes_plan``). Opening it as ours would run the wrong migrations on it.

    Raises:
        SchemaVersionError: the file has Hermes's layout.
    """
    from ._shape import classify_file

    try:  # SQLite's schema cookie changes with every change of tables, columns or triggers
        key: tuple[str, int, int] | None = (name, os.stat(name).st_ino, int(db.pragma("schema_version")))
    except (OSError, TypeError, ValueError):
        key = None
    if key is not None and key in _NOT_HERMES:
        return
    verdict = classify_file(db, _TABLES)
    if verdict.kind != "hermes":
        if key is not None:
            if len(_NOT_HERMES) > 1_000:
                _NOT_HERMES.clear()
            _NOT_HERMES.add(key)
        return
    msg = (
        f"{name!r} is a state.db written by Hermes ({verdict.signs[0]}), not imported yet; "
        "start 'hermes serve' or 'hermes chat' on this home once: they back it up and import it in place"
    )
    raise SchemaVersionError(msg)


def _version_message(name: str, found: int) -> str:
    if found > SCHEMA_VERSION:
        return (
            f"{name!r} has schema version {found}, newer than this build's {SCHEMA_VERSION} "
            "(written by a newer build, or by Hermes itself); upgrade, or point the store at another file"
        )
    if all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        return f"{name!r} has schema version {found}, older than {SCHEMA_VERSION}; start the store writer once to migrate it"
    return f"{name!r} has schema version {found}, older than this build's {SCHEMA_VERSION}, and no migration from it exists; point the store at a new file"
