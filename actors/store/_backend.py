"""The store's two backends behind one connection type: SQLite (apsw, the default) and Postgres.

A store *location* is either a SQLite file path (``HERMES_HOME/state.db``) or a database URL
(``postgresql://...``, :func:`is_database_url`). ``open_writer`` / ``open_reader``
(``_schema``) open either; what they return is a :data:`Connection`: an ``apsw.Connection``
as before, or a :class:`~actors.store._pg.PgConnection` that speaks the same small part of
apsw's interface (``execute``, ``executemany``, ``changes``, ``in_transaction``, ``cursor``,
``table_exists``, ``close``) over psycopg 3. The SQL of the writes (``_writes``, ``_jobs_rows``,
``_credentials_rows``, ``_settle``) is written once, in SQLite's dialect; ``_pg.translate``
rewrites the few differences (placeholders, ``INSERT OR IGNORE``, ``LIMIT -1``, scalar
``max``) once per statement text. What cannot be translated has a function per backend:
the schema (``_pg_schema``), full-text search (``_pg_search``), and each write's atomicity
(``apply_write``).

apsw's exception classes are the store's error vocabulary on both backends: the Postgres
connection raises ``apsw.ConstraintError`` with SQLite's wording for a duplicate id, a taken
title or a missing session, ``apsw.BusyError`` for a lock it waited too long for and
``apsw.IOError`` for a lost connection, so the writer explains and recovers from both alike.

Invariant: on SQLite nothing goes through this module at run time but one ``isinstance``
per write: its SQL, transactions and performance are what they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import apsw

from ._pg import PgConnection
from ._schema import Synchronous, open_reader, open_writer

Connection: TypeAlias = apsw.Connection | PgConnection
"""What ``open_writer`` and ``open_reader`` return; the write and read functions take it."""

T = TypeVar("T")
C = TypeVar("C")

URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str) -> bool:
    """Whether ``location`` names a Postgres database rather than a SQLite file."""
    return location.startswith(URL_SCHEMES)


def apply_write(db: Connection, apply: Callable[[Any, C], T], command: C) -> T:
    """Run one write so that, if it fails, it is undone alone and the batch goes on.

    SQLite undoes a failed statement by itself, and each write undoes its own earlier
    statements (``_writes``): no SAVEPOINT, which would cost FTS5 a flush per write.
    Postgres aborts the whole transaction at the first error, so there each write runs in a
    SAVEPOINT, rolled back to on failure.
    """
    if isinstance(db, apsw.Connection):
        return apply(db, command)
    return db.in_savepoint(lambda: apply(db, command))


def open_store_writer(location: str, *, busy_timeout: float = 2.0, synchronous: Synchronous = "NORMAL", lock_hold: float | None = None) -> Connection:
    """``_schema.open_writer`` for a file, or the Postgres writer connection for a URL
    (``lock_hold``: see ``open_pg_writer``; a file needs none, its locks end with the process)."""
    if is_database_url(location):
        from ._pg_schema import open_pg_writer

        return open_pg_writer(location, busy_timeout=busy_timeout, lock_hold=lock_hold)
    return open_writer(location, busy_timeout=busy_timeout, synchronous=synchronous)


def open_store_reader(location: str, *, busy_timeout: float = 2.0) -> Connection:
    """``_schema.open_reader`` for a file, or a read-only Postgres connection for a URL."""
    if is_database_url(location):
        from ._pg_schema import open_pg_reader

        return open_pg_reader(location, busy_timeout=busy_timeout)
    return open_reader(location, busy_timeout=busy_timeout)
