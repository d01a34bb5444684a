"""Import a ``state.db`` Hermes wrote: back it up, then convert it in place, in one transaction.

The executor of ``_hermes_plan``: it reads the file's shape, and if Hermes wrote it, it

1. takes the write lock (``BEGIN IMMEDIATE``: no other writer, Hermes included, changes the
   file from here on) and checks the file (``PRAGMA quick_check``);
2. copies it with SQLite's online backup to ``state.db.hermes-backup-<UTC time>`` next to it
   (a temporary name first, then a hard link to the final name, so a backup is whole or
   absent and an earlier backup is never overwritten);
3. runs the plan's steps, checks that every session and message is still there and that the
   full-text index matches the messages, records the import, and commits.

Any failure rolls back: the file is as it was, the backup stays, and the error says which
step failed. Run it with the store claimed (``claim_store``) and before any writer opens it.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from ._errors import StoreError
from ._hermes_plan import MARKER_TABLE, ImportPlan, classify, plan_import
from ._schema import _CREDENTIAL_POOLS, _FTS, _INDEXES, _RESPONSES, _SEGMENTS, _TABLES, _TURNS
from ._shape import read_shape, shape_of_ddl


class HermesImportError(StoreError):
    """A Hermes ``state.db`` could not be imported; the file was left as it was."""


@dataclasses.dataclass(frozen=True)
class ImportReport:
    """What :func:`import_hermes_store` did."""

    path: str
    backup: str
    hermes_version: int | None
    sessions: int
    messages: int
    segments: int
    """Sessions Hermes had compacted in place, now loaded from their live rows."""
    seconds: float
    signs: tuple[str, ...]

    def line(self) -> str:
        """One line for a person: what was imported and where the original is."""
        version = f"Hermes schema v{self.hermes_version}" if self.hermes_version is not None else "Hermes, no schema version"
        return (
            f"imported Hermes's {self.path} ({version}: {self.sessions} session(s), {self.messages} message(s)) "
            f"into this build's layout in {self.seconds:.2f} s; the original is kept at {self.backup}"
        )


def import_hermes_store(path: str | os.PathLike[str], *, busy_timeout: float = 5.0, clock: Callable[[], float] = time.time) -> ImportReport | None:
    """Import ``path`` if Hermes wrote it; None when it is missing, empty or already ours.

    Raises:
        HermesImportError: the file is damaged, locked, or a step failed (rolled back).
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        return None
    started = time.monotonic()
    try:
        db = apsw.Connection(name)
    except apsw.Error as exc:
        msg = f"{name!r} cannot be opened to check whether Hermes wrote it ({exc}); check its permissions"
        raise HermesImportError(msg) from None
    try:
        db.set_busy_timeout(int(busy_timeout * 1000))
        return _import(db, name, started, clock)
    except apsw.BusyError:
        msg = f"{name!r} is locked by another process (Hermes itself?); stop it and start again: nothing was changed"
        raise HermesImportError(msg) from None
    except apsw.Error as exc:
        msg = f"{name!r} could not be read as a SQLite database ({exc}); nothing was changed: move it away or restore a copy"
        raise HermesImportError(msg) from None
    finally:
        db.close()


_OUR_TABLES_DDL = _RESPONSES + _TURNS + _CREDENTIAL_POOLS + _SEGMENTS


def plan_for(db: apsw.Connection) -> ImportPlan | None:
    """The import plan for the file open in ``db``, or None if Hermes did not write it."""
    found, ours = read_shape(db), shape_of_ddl(_TABLES)
    if classify(found, ours).kind != "hermes":
        return None
    return plan_import(found, ours, fts_ddl=_FTS, our_tables_ddl=_OUR_TABLES_DDL, indexes_ddl=_INDEXES)


def _import(db: apsw.Connection, name: str, started: float, clock: Callable[[], float]) -> ImportReport | None:
    if plan_for(db) is None:
        return None
    db.execute("BEGIN IMMEDIATE")
    try:
        plan = plan_for(db)  # again, under the write lock
        if plan is None:
            db.execute("ROLLBACK")
            return None
        problems = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            msg = f"{name!r} was written by Hermes but is damaged ({'; '.join(problems[:3])}); nothing was changed: repair it with Hermes or restore a copy"
            raise HermesImportError(msg)
        before = _counts(db)
        backup = _backup(db, name, clock())
        for step in plan.steps:
            try:
                db.execute(step.sql)
            except apsw.Error as exc:
                msg = f"importing Hermes's {name!r} failed at '{step.what}' ({exc}); the file is as it was, a copy is at {backup}"
                raise HermesImportError(msg) from None
        after = _counts(db)
        if after != before:
            msg = f"importing Hermes's {name!r} would change the counts (sessions, messages) {before} -> {after}; rolled back, a copy is at {backup}"
            raise HermesImportError(msg)
        db.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        segments = _scalar(db, "SELECT count(*) FROM segments WHERE reason = 'hermes compaction'")
        db.execute(
            f"INSERT INTO {MARKER_TABLE} (imported_at, hermes_version, backup, sessions, messages) VALUES (?, ?, ?, ?, ?)",
            (clock(), plan.hermes_version, backup, *before),
        )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return ImportReport(
        path=name,
        backup=backup,
        hermes_version=plan.hermes_version,
        sessions=before[0],
        messages=before[1],
        segments=segments,
        seconds=time.monotonic() - started,
        signs=plan.signs,
    )


def _scalar(db: apsw.Connection, sql: str) -> int:
    row = db.execute(sql).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def _counts(db: apsw.Connection) -> tuple[int, int]:
    return _scalar(db, "SELECT count(*) FROM sessions"), _scalar(db, "SELECT count(*) FROM messages")


def _backup(db: apsw.Connection, name: str, now: float) -> str:
    """Copy the database (committed, while ``db`` holds its write lock) to a new backup file."""
    stamp = datetime.datetime.fromtimestamp(now, tz=datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = Path(f"{name}.hermes-backup-{stamp}")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        # A second connection reads the committed file: ``db`` holds the write lock, so no
        # one changes it meanwhile (SQLite copies nothing from a connection inside a transaction).
        source = apsw.Connection(name, flags=apsw.SQLITE_OPEN_READONLY)
        copy = apsw.Connection(str(partial))
        try:
            source.set_busy_timeout(5_000)
            with copy.backup("main", source, "main") as job:
                job.step(-1)
            copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
        finally:
            copy.close()
            source.close()
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        final = _link_new(partial, target)
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except (OSError, apsw.Error) as exc:
        msg = f"could not back up {name!r} to {target} before importing it ({exc}); nothing was changed: free some space or fix the folder's permissions"
        raise HermesImportError(msg) from None
    finally:
        partial.unlink(missing_ok=True)
    return str(final)


def _link_new(source: Path, target: Path) -> Path:
    """Hard-link ``source`` at ``target``, or at ``target-2``, ``-3`` ... if taken: never replaces a file."""
    for n in range(1, 1000):
        candidate = target if n == 1 else target.with_name(f"{target.name}-{n}")
        try:
            os.link(source, candidate)
        except FileExistsError:
            continue
        return candidate
    msg = f"{target} and 998 more names are taken"
    raise FileExistsError(msg)
