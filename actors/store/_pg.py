"""A Postgres connection that speaks the part of apsw's interface the store uses (psycopg 3).

:class:`PgConnection` wraps one psycopg connection in autocommit mode, so transactions are
the store's own ``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` statements as on SQLite. Each statement
text is translated once (:func:`translate`, cached). psycopg is imported only when a
connection is opened: the default install (SQLite) does not need it.

Several statements that need no answer in between go in one round trip
(:meth:`PgConnection.together`: one query of several statements, the values bound on this side),
as does a write's SAVEPOINT with its first statement.

Errors come out as apsw's classes with SQLite's wording (``_backend`` says why).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from ._errors import StoreError

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

INSTALL_HINT = "pip install 'hermes-actors[postgres]'"
CONNECT_TIMEOUT = 5.0
IDLE_IN_TRANSACTION_TIMEOUT = 5.0
"""Seconds the server lets the store writer's connection sit idle inside a transaction before
it ends that session (``idle_in_transaction_session_timeout``). The writer never waits between
the statements of a batch, so only a stopped process (SIGSTOP, a frozen VM) trips it; without it
such a node's open transaction keeps its row locks — a session's lease row among them — and every
other node's lease statement on that row fails after the lock timeout until it resumes. A
cluster node's writer uses less when its lease ttl is short (``NodeIdentity.lock_hold``)."""
"""Seconds to reach the server before a clear error (host:port, what to check)."""


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """The Postgres form of one statement the store writes in SQLite's dialect."""
    text = sql.replace("%", "%%").replace("?", "%s")
    if text.startswith("BEGIN IMMEDIATE"):
        return "BEGIN"
    if "INSERT OR IGNORE INTO" in text:
        text = text.replace("INSERT OR IGNORE INTO", "INSERT INTO") + " ON CONFLICT DO NOTHING"
    text = text.replace("LIMIT -1 OFFSET", "LIMIT ALL OFFSET")
    return _SCALAR_MAX.sub("greatest(0, ", text)


_SCALAR_MAX = re.compile(r"\bmax\(0, ")


def redact(url: str) -> str:
    """``url`` without its password, for messages and statistics."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def where(url: str) -> str:
    """``host:port/database`` (or the socket directory) of ``url``, for error messages."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    host = parts.hostname or (query.get("host") or ["localhost"])[0]
    return f"{host}:{parts.port or 5432}{parts.path or '/'}"


class PgCursor:
    """The rows of one statement (iterable, ``fetchone``), as an apsw cursor gives them."""

    def __init__(self, owner: PgConnection, rows: Iterable[tuple[Any, ...]] = ()) -> None:
        self._owner = owner
        self._rows: Iterator[tuple[Any, ...]] = iter(rows)

    def execute(self, sql: str, bindings: Sequence[Any] | None = None) -> PgCursor:
        self._rows = iter(self._owner.execute(sql, bindings))
        return self

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> Any | None:
        return next(self._rows, None)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def close(self) -> None:
        self._rows = iter(())


@dataclasses.dataclass(frozen=True)
class Step:
    """One statement of :meth:`PgConnection.together`: ``sql`` (SQLite's dialect, translated) with
    ``bindings``, or run once per row of ``many`` (an ``executemany``, its rows returned in order)."""

    sql: str
    bindings: Sequence[Any] = ()
    many: Sequence[Sequence[Any]] | None = None


@dataclasses.dataclass(frozen=True)
class Sent:
    """What one step answered: its rows and the rows it changed."""

    rows: list[tuple[Any, ...]]
    changes: int


_ENDS_TRANSACTION = re.compile(r"\s*(COMMIT|END|BEGIN|START|ROLLBACK(?!\s+TO))\b", re.IGNORECASE)
"""A statement after which no savepoint of the transaction before it is left."""


class PgConnection:
    """One psycopg connection behind apsw's interface; open it with :func:`connect`."""

    def __init__(self, conn: psycopg.Connection[Any], url: str) -> None:
        self._conn = conn
        self.url = url
        self.name = redact(url)
        self._changes = 0
        self._savepoints = 0
        self._unreleased: str | None = None
        """An outermost write's SAVEPOINT left open after it succeeded: the next write's start
        releases it in the same round trip as it opens its own, and COMMIT ends it anyway."""
        self._opening: tuple[str, ...] = ()
        """The open write's SAVEPOINT statements not sent yet: they go with its first statement,
        in one round trip (``together``)."""
        self.round_trips = 0
        """Queries sent and waited for (an ``executemany`` counts one)."""

    @property
    def in_transaction(self) -> bool:
        """A transaction is open and usable (an aborted one counts as lost, as SQLite's would be)."""
        from psycopg.pq import TransactionStatus

        return self._conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.ACTIVE)

    @property
    def broken(self) -> bool:
        """The connection is closed, or psycopg found it unusable (the server ended it)."""
        return bool(self._conn.closed or self._conn.broken)

    def changes(self) -> int:
        """Rows the last statement changed."""
        return self._changes

    def execute(self, sql: str, bindings: Sequence[Any] | None = None) -> PgCursor:
        if self._unreleased is not None and _ENDS_TRANSACTION.match(sql):
            self._unreleased = None  # the transaction's end takes its savepoints with it
        if self._opening:  # the write's savepoint and this statement: one round trip
            return PgCursor(self, self.together([Step(sql, () if bindings is None else bindings)])[0].rows)
        with _errors_as_apsw(self.name):
            self.round_trips += 1
            cur = self._conn.execute(translate(sql), () if bindings is None else bindings)
            self._changes = max(cur.rowcount, 0)
            rows = cur.fetchall() if cur.description is not None else []
        return PgCursor(self, rows)

    def executemany(self, sql: str, sequence: Iterable[Sequence[Any]]) -> PgCursor:
        self._send_opening()
        text = translate(sql)
        returning = " RETURNING " in text
        rows: list[tuple[Any, ...]] = []
        with _errors_as_apsw(self.name), self._conn.cursor() as cur:
            self.round_trips += 1
            cur.executemany(text, list(sequence), returning=returning)
            self._changes = max(cur.rowcount, 0)
            if returning:
                while True:
                    rows.extend(cur.fetchall())
                    if not cur.nextset():
                        break
        return PgCursor(self, rows)

    def together(self, steps: Sequence[Step]) -> list[Sent]:
        """Run ``steps`` in order in one round trip (the open write's SAVEPOINT with them) and
        return what each answered. A step that fails raises here, as ``execute`` would, and the
        server runs none after it (their write's savepoint undoes the ones before).
        ``changes()`` is then the last step's.

        They go as one query of several statements, the values bound on this side (psycopg's
        ``ClientCursor``), not in psycopg's pipeline mode: that ends with a Flush after its Sync,
        after which the server does not arm ``idle_in_transaction_session_timeout`` again — a
        node stopped right after would keep its transaction, and its row locks, for ever.
        """
        import psycopg

        opening, self._opening = self._opening, ()
        texts = [*opening]
        values: list[Any] = []
        for step in steps:
            for bindings in (step.bindings,) if step.many is None else step.many:
                texts.append(translate(step.sql))
                values.extend(bindings)
        sent: list[Sent] = []
        with _errors_as_apsw(self.name), psycopg.ClientCursor(self._conn) as cur:
            self.round_trips += 1
            cur.execute("; ".join(texts), values)
            for _ in opening:
                cur.nextset()
            for step in steps:
                rows: list[tuple[Any, ...]] = []
                count = 0
                for index in range(1 if step.many is None else len(step.many)):
                    if index:
                        cur.nextset()
                    count += max(cur.rowcount, 0)
                    if cur.description is not None:
                        rows.extend(cur.fetchall())
                sent.append(Sent(rows=rows, changes=count))
                cur.nextset()
        self._changes = sent[-1].changes if sent else 0
        return sent

    def cursor(self) -> PgCursor:
        return PgCursor(self)

    def table_exists(self, dbname: str | None, table_name: str) -> bool:
        row = self.execute("SELECT to_regclass(?) IS NOT NULL", (table_name,)).fetchone()
        return bool(row and row[0])

    def _send_opening(self) -> None:
        """Send the open write's SAVEPOINT statements now (before a statement that cannot take them along)."""
        opening, self._opening = self._opening, ()
        with _errors_as_apsw(self.name):
            for statement in opening:
                self.round_trips += 1
                self._conn.execute(statement.encode())

    def in_savepoint(self, apply: Callable[[], T]) -> T:
        """Run ``apply`` in a SAVEPOINT: if it raises, its statements are undone and the transaction goes on.

        The SAVEPOINT is sent with the write's first statement, in one round trip (``together``);
        an outermost savepoint that succeeded is released by the next write's start, in that same
        round trip, or by the transaction's end: a write of a batch costs no round trip of its own
        for its savepoint. A write that sends no statement opens none.
        """
        self._send_opening()  # an enclosing write's, before this one's
        self._savepoints += 1
        name = f"write_{self._savepoints}"
        previous, self._unreleased = self._unreleased, None
        released = previous is not None and self._savepoints == 1 and self.in_transaction
        self._opening = (f"RELEASE SAVEPOINT {previous}", f"SAVEPOINT {name}") if released else (f"SAVEPOINT {name}",)
        try:
            result = apply()
        except BaseException:
            if self._opening:  # nothing was sent: nothing to undo
                self._opening = ()
                self._unreleased = previous if released else None
            else:
                self.execute(f"ROLLBACK TO SAVEPOINT {name}")
                self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        finally:
            self._savepoints -= 1
        if self._opening:  # it sent nothing: the earlier savepoint stays the one to release
            self._opening = ()
            self._unreleased = previous if released else None
        elif self._savepoints == 0:
            self._unreleased = name
        else:
            self.execute(f"RELEASE SAVEPOINT {name}")
        return result

    def close(self) -> None:
        self._conn.close()


def connect(
    url: str, *, read_only: bool = False, lock_timeout: float = 2.0, connect_timeout: float = CONNECT_TIMEOUT, idle_in_transaction: float = 0.0
) -> PgConnection:
    """Open ``url`` (autocommit; the store sends its own BEGIN / COMMIT). ``idle_in_transaction``:
    seconds after which the server ends this session when it idles inside a transaction (0: never).

    Raises:
        StoreError: psycopg is not installed, or the server cannot be reached within ``connect_timeout``.
    """
    try:
        import psycopg
    except ImportError:
        msg = f"the store is a Postgres database ({redact(url)}) but psycopg is not installed; {INSTALL_HINT}, or unset HERMES_DATABASE_URL / database.url to use SQLite"
        raise StoreError(msg) from None
    options = f"-c lock_timeout={max(1, int(lock_timeout * 1000))}"
    if read_only:
        options += " -c default_transaction_read_only=on"
    if idle_in_transaction > 0:
        options += f" -c idle_in_transaction_session_timeout={max(1, int(idle_in_transaction * 1000))}"
    began = time.monotonic()
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(connect_timeout)), options=options, application_name="hermes-store")
    except psycopg.Error as exc:
        spent = time.monotonic() - began
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"could not reach the Postgres store at {where(url)} ({first}; after {spent:.1f} s); check that the server runs and the URL in HERMES_DATABASE_URL / database.url"
        raise StoreError(msg) from None
    return PgConnection(conn, url)


class _errors_as_apsw:
    """Raise psycopg's errors as the apsw classes the writer explains (with SQLite's wording)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        import psycopg
        from psycopg import errors

        if not isinstance(exc, psycopg.Error):
            return
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        constraint = getattr(exc.diag, "constraint_name", None) or ""
        table = getattr(exc.diag, "table_name", None) or ""
        mapped: apsw.Error
        if isinstance(exc, errors.UniqueViolation):
            column = "title" if "title" in constraint else ("id" if constraint.endswith("_pkey") and table == "sessions" else constraint)
            mapped = apsw.ConstraintError(f"UNIQUE constraint failed: {table}.{column}")
        elif isinstance(exc, errors.ForeignKeyViolation):
            mapped = apsw.ConstraintError(f"FOREIGN KEY constraint failed ({text})")
        elif isinstance(exc, errors.IntegrityError):
            mapped = apsw.ConstraintError(f"constraint failed: {text}")
        elif isinstance(exc, errors.LockNotAvailable | errors.DeadlockDetected | errors.SerializationFailure | errors.QueryCanceled):
            mapped = apsw.BusyError(f"{self.name}: {text}")
        elif isinstance(exc, errors.DiskFull):
            mapped = apsw.FullError(f"{self.name}: {text}")
        elif isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            mapped = apsw.IOError(f"the connection to {self.name} failed: {text}")
        else:
            mapped = apsw.SQLError(f"{self.name}: {text}")
        raise mapped from exc
