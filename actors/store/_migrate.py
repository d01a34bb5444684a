"""``hermes db migrate``: copy a home's SQLite store into an empty Postgres database.

Every table of the layout is copied (the columns both sides have; derived data is not:
Postgres computes its own search vectors), in one Postgres transaction: sessions first
without their parent links (a parent may come after its child), then every other table, the
links last; the ``messages`` id sequence is moved past the highest id copied. Before the
commit, each table's row count in Postgres is compared with the file's: any difference rolls
everything back. The source is opened read-only and claimed (``claim_store``), so no runtime
writes it meanwhile; it is left as it was.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from ._errors import StoreError
from ._owner import claim_store
from ._pg import PgConnection, redact
from ._pg_schema import open_pg_writer, postgres_ddl
from ._schema import open_reader

BATCH = 1_000


@dataclasses.dataclass(frozen=True)
class MigrateReport:
    """What :func:`migrate_to_postgres` copied: rows per table (checked equal on both sides)."""

    source: str
    target: str
    counts: dict[str, int]
    seconds: float
    skipped: tuple[str, ...] = ()
    """Tables of the file outside the layout (a Hermes import keeps Hermes's own): not copied."""

    def lines(self) -> list[str]:
        rows = ", ".join(f"{table} {n:,}" for table, n in self.counts.items())
        out = [f"copied {self.source} into {self.target} in {self.seconds:.1f} s: {rows} (row counts checked)"]
        if self.skipped:
            out.append(f"not copied (not part of the store's layout): {', '.join(self.skipped)}")
        return out


def _layout_tables() -> list[str]:
    """The layout's tables in creation order (parents before children), without ``schema_version``."""
    names = []
    for statement in postgres_ddl():
        words = statement.split()
        if words[:2] == ["CREATE", "TABLE"]:
            name = words[5] if words[2:5] == ["IF", "NOT", "EXISTS"] else words[2]
            if name != "schema_version":
                names.append(name)
    return names


def migrate_to_postgres(source: str | os.PathLike[str], url: str, *, progress: Callable[[str], None] | None = None) -> MigrateReport:
    """Copy the store file ``source`` into the empty Postgres database at ``url``.

    Raises:
        StoreError: the file is missing, not a store of this version, or served by a running
            process; the target is unreachable or holds sessions already; a count differed
            (nothing was committed).
    """
    began = time.monotonic()
    name = os.fspath(source)
    if not Path(name).exists():
        msg = f"there is no store at {name!r} to migrate; check --home"
        raise StoreError(msg)
    claim = claim_store(name)
    if claim is None:
        msg = f"a running hermes process serves {name!r}; stop it first, then migrate"
        raise StoreError(msg)
    try:
        sqlite = open_reader(name)
        try:
            target = open_pg_writer(url)
            try:
                counts, skipped = _copy(sqlite, target, progress)
            finally:
                target.close()
        finally:
            sqlite.close()
    finally:
        claim.close()
    return MigrateReport(source=name, target=redact(url), counts=counts, seconds=time.monotonic() - began, skipped=skipped)


def _columns(db: apsw.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]


def _pg_columns(db: PgConnection, table: str) -> list[str]:
    rows = db.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?", (table,))
    return [str(row[0]) for row in rows]


def _copy(sqlite: apsw.Connection, target: PgConnection, progress: Callable[[str], None] | None) -> tuple[dict[str, int], tuple[str, ...]]:
    tables = _layout_tables()
    present = {str(row[0]) for row in sqlite.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    skipped = tuple(sorted(t for t in present if t not in tables and t != "schema_version" and not t.startswith(("messages_fts", "sqlite_"))))
    target.execute("BEGIN")
    try:
        held = target.execute("SELECT count(*) FROM sessions").fetchone()
        if held is not None and held[0]:
            msg = f"{target.name} holds {held[0]} session(s) already; migrate into an empty database (nothing was copied)"
            raise StoreError(msg)
        counts: dict[str, int] = {}
        for table in tables:
            generated = {"rowid", "content_tsv"}
            columns = [c for c in _columns(sqlite, table) if c in set(_pg_columns(target, table)) - generated]
            counts[table] = _copy_table(sqlite, target, table, columns)
            if progress is not None:
                progress(f"{table}: {counts[table]:,} row(s)")
        links = list(sqlite.execute("SELECT id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL"))
        if links:
            target.executemany("UPDATE sessions SET parent_session_id = ? WHERE id = ?", [(parent, id_) for id_, parent in links])
        target.execute("SELECT setval(pg_get_serial_sequence('messages', 'id'), greatest((SELECT max(id) FROM messages), 1))")
        for table, expected in counts.items():
            row = target.execute(f"SELECT count(*) FROM {table}").fetchone()
            found = int(row[0]) if row is not None else -1
            if found != expected:
                msg = f"{table}: {found} row(s) in Postgres for {expected} in the file; nothing was committed"
                raise StoreError(msg)
    except BaseException:
        try:  # also after a failed statement (the transaction is aborted, not gone)
            target.execute("ROLLBACK")
        except apsw.Error:
            pass  # the connection is gone: the server rolled it back
        raise
    target.execute("COMMIT")
    return counts, skipped


def _copy_table(sqlite: apsw.Connection, target: PgConnection, table: str, columns: list[str]) -> int:
    names = ", ".join(columns)
    select = [f"NULL AS {c}" if table == "sessions" and c == "parent_session_id" else c for c in columns]
    insert = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' for _ in columns)})"
    cursor = sqlite.execute(f"SELECT {', '.join(select)} FROM {table} ORDER BY rowid")
    copied = 0
    while batch := list(itertools.islice(cursor, BATCH)):
        target.executemany(insert, batch)
        copied += len(batch)
    expected = sqlite.execute(f"SELECT count(*) FROM {table}").fetchone()
    if expected is None or int(expected[0]) != copied:
        msg = f"{table} changed while it was read; nothing was committed"
        raise StoreError(msg)
    return copied
