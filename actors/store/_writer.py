"""The one writer of a session store file, with group commit.

Writes accumulate in one open transaction and are committed together when the writer's
inbox is empty (nothing more is coming right now), ``batch_cap`` writes are waiting, or the
batch has been open ``batch_seconds`` (:func:`commit_now`: on Postgres a write is a few round
trips, and 200 lease takeovers arriving together would otherwise be one transaction of
seconds, each grant told only at its end and the lease rows locked until then).
Only after the commit is each write's reply told to its ``reply_to``, so an
acknowledgement always means "on disk".

Replies (``StoreFailed`` included) are told in the order the commands arrived, at the
commit that ends their batch, so each caller sees its answers in its own command order.

A write that fails (a constraint, a locked file, bad data) is undone alone and answered
``StoreFailed``; the writes before and after it in the batch commit normally. Each write
is atomic without a SAVEPOINT: CreateSession, EndSession and UpdateSessionTotals are one
statement each (SQLite undoes a failed statement), and an append that fails halfway
deletes the rows it inserted. (A SAVEPOINT per write makes FTS5 flush its pending index
data at every write: about 30% fewer messages per second, measured with
``bench/bench_store.py``.) If SQLite itself aborts the
whole transaction, every write still pending in it is answered ``StoreFailed`` (retryable).
When the connection is unusable (I/O error, corruption, closed), the writer answers
everything pending ``StoreFailed`` and crashes with :class:`StoreConnectionBroken`, so
its supervisor restarts it with a fresh connection.

Cluster mode (issue 22): ``AcquireLease`` / ``RenewLease`` / ``ReleaseLease`` / ``NodeHeartbeat``
are writes like the others (``_lease_rows``), answered after their commit; a session write that
carries a ``fence`` runs only if the fence is the session's live lease, checked in the same
transaction (a stale one: ``StoreFailed(fenced=...)``, nothing written). A write without a
fence is checked against nothing. On Postgres with the server's clock, the renewals and the
acquires of a batch wait for its end and are run together: renewals in two statements
(``_lease_rows.renew_leases``: a node of 300 sessions renews 90 a second, one writer round trip
or more each before), acquires in two or three round trips whatever their number
(``_lease_rows.acquire_leases``: a node taking over a dead one's sessions gets their acquires in
bursts), each answered as alone; a later write, acquire, renewal or release of such a session
runs them first, so each session's commands still run, and are answered, in the order it sent
them (across sessions an answer may come after a later command's).

Invariant: a reply is told only after the transaction holding the write has committed.
Invariant: every write command gets exactly one reply (a success or ``StoreFailed``),
also when the writer crashes or stops with writes pending.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from protocols._base import Message
from protocols._credentials import PoolStateSaved, SavePoolState
from protocols._leases import AcquireLease, LeaseGranted, LeaseReleased, NodeHeartbeat, NodeSeen, ReleaseLease, RenewLease
from protocols._memory import DeleteFact, FactStoreCommand, SaveFact
from protocols._scheduler import (
    ClaimOccurrence,
    DeleteJob,
    JobStoreCommand,
    SaveJob,
    SettleOccurrence,
)
from protocols._store import (
    AppendMessages,
    CreateSession,
    DeleteResponse,
    DeleteSession,
    EndSession,
    GetStoreStatistics,
    MessagesPersisted,
    PutResponse,
    RemoveLastTurn,
    ReopenWrites,
    SessionCreated,
    SessionEnded,
    SessionTotalsUpdated,
    StoreCommand,
    StoreFailed,
    StoreStatistics,
    TurnRemoved,
    UpdateSessionTotals,
)

from .._actor import Actor
from .._address import ActorPath, Address, Registry
from ._append_groups import AppendGroups
from ._backend import Connection, apply_write, is_database_url, open_store_writer
from ._credentials_rows import save_pool_state
from ._errors import BROKEN, StoreConnectionBroken, describe
from ._facts_rows import delete_fact, save_fact
from ._jobs_rows import claim_occurrence, delete_job, save_job, settle_occurrence
from ._lease_groups import LeaseGroups
from ._lease_rows import Clock, Fenced, acquire_lease, fenced, node_heartbeat, release_lease, renew_lease, store_now
from ._pg import PgConnection, redact
from ._schema import Synchronous
from ._writes import (
    Rejected,
    create_session,
    delete_response,
    delete_session,
    end_session,
    put_response,
    remove_last_turn,
    transaction_lost,
    update_totals,
)

log = logging.getLogger(__name__)

FENCING = (CreateSession, AppendMessages, RemoveLastTurn)
"""A refusal of one of these fences the session (``ReopenWrites``)."""
FENCING_NAMES = frozenset(c.__name__ for c in FENCING)
Write = (
    CreateSession
    | AppendMessages
    | EndSession
    | UpdateSessionTotals
    | DeleteSession
    | RemoveLastTurn
    | PutResponse
    | DeleteResponse
    | SavePoolState
    | JobStoreCommand
    | FactStoreCommand
    | AcquireLease
    | RenewLease
    | ReleaseLease
    | NodeHeartbeat
)
W = TypeVar(
    "W",
    CreateSession,
    AppendMessages,
    EndSession,
    UpdateSessionTotals,
    DeleteSession,
    RemoveLastTurn,
    PutResponse,
    DeleteResponse,
    SavePoolState,
    SaveJob,
    DeleteJob,
    ClaimOccurrence,
    SettleOccurrence,
    SaveFact,
    DeleteFact,
    AcquireLease,
    RenewLease,
    ReleaseLease,
    NodeHeartbeat,
)
StoreWriterInbox = StoreCommand | SavePoolState | JobStoreCommand | FactStoreCommand
"""What the writer takes: the session store's commands (leases and fenced writes included), the
credential pools' saves and the scheduler's jobs."""

DEFAULT_BATCH_CAP = 512
DEFAULT_BATCH_SECONDS = 0.05
"""The longest a batch stays open while more writes keep coming (its first write waits that long at most for its commit)."""


def commit_now(writes: int, cap: int, open_for: float, limit: float, *, inbox_empty: bool) -> bool:
    """Whether the writer commits its open batch now (pure): nothing more is waiting, or it
    holds ``cap`` writes, or it has been open ``limit`` seconds."""
    return inbox_empty or writes >= cap or open_for >= limit


STORE_PATH: ActorPath[StoreCommand] = ActorPath("/store")
"""Where ``agent_specs`` puts the store writer: ``registry.lookup(STORE_PATH)`` is an
``Address[StoreCommand]``."""

# Errors after which the connection cannot be trusted: crash, and let a restart reopen it.


def store_address(registry: Registry, path: str = STORE_PATH.path) -> Address[StoreCommand]:
    """The store writer's address, at ``path`` (``SessionDeps.store_path``) or the usual one."""
    return registry.lookup(path)


class StoreWriter(AppendGroups, LeaseGroups, Actor[StoreWriterInbox]):
    """The one writer actor of one store file (rule 4); start it as a supervised child.

    ``ChildSpec(id="store", actor=StoreWriter, args=(path,))``; ``path`` may be a Postgres URL
    (``postgresql://...``, see ``_backend``) instead of a file. Its inbox takes
    ``protocols._store.StoreCommand`` and the credential pools' ``SavePoolState``.

    Unlike other actors, this one's handlers do disk I/O **on purpose**: it owns the file,
    its whole job is to write it, and a write is acknowledged only once it is committed.
    No other actor waits on it (replies are messages), so its I/O stalls nobody else.

    Args:
        path: the database file (created with the schema if missing).
        batch_cap: commit after this many writes even if more are waiting.
        batch_seconds: commit a batch open this long even if more writes are waiting.
        busy_timeout: seconds to wait for a lock held by another connection before a
            write is answered ``StoreFailed(retryable=True)``. Nothing else should write
            the file, so this only matters when an outside tool holds it.
        synchronous: ``"NORMAL"`` (default: a commit survives a crash of this process; a
            power loss may undo the last ones) or ``"FULL"`` (an fsync per commit).
        clock: the store's clock for leases and fences (Unix seconds); None: this machine's
            for a file, the database server's for Postgres (``_lease_rows.store_now``).
        lock_hold: Postgres: seconds the server lets this writer sit idle inside a transaction
            (only a stopped process does) before it ends it, freeing its row locks; None:
            ``_pg.IDLE_IN_TRANSACTION_TIMEOUT``. A cluster node gives ``NodeIdentity.lock_hold``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_cap: int = DEFAULT_BATCH_CAP,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        busy_timeout: float = 2.0,
        synchronous: Synchronous = "NORMAL",
        clock: Callable[[], float] | None = None,
        lock_hold: float | None = None,
    ) -> None:
        super().__init__()
        self._now: Clock = (lambda _db: clock()) if clock is not None else store_now
        """The store's clock for lease and fence decisions (``store_now`` itself when it is the
        store's own: ``_lease_rows`` then reads it in the statement that locks the lease row)."""
        self._location = os.fspath(path)
        self.database = redact(self._location) if is_database_url(self._location) else self._location
        """The file, or the URL without its password (messages and statistics show it)."""
        self._batch_cap = max(1, batch_cap)
        self._batch_seconds = batch_seconds
        self._batch_began = 0.0
        """``time.monotonic()`` at the open batch's first write."""
        self._busy_timeout = busy_timeout
        self._synchronous: Synchronous = synchronous
        self._lock_hold = lock_hold
        self._db: Connection | None = None
        self._broken = False
        self._pending: list[tuple[Any, Message, int]] = []
        """Replies told at the next commit, in command order: (reply_to, reply, message rows)."""
        self._batch_writes = 0
        self._transactions = 0
        self._writes = 0
        self._failures = 0
        self._messages = 0
        self._largest_batch = 0
        self.start_lease_groups()
        self.start_append_groups(grouped=clock is None and is_database_url(self._location))
        self._fenced: set[str] = set()
        """Sessions whose transcript write was refused: their next ones are refused too (see ReopenWrites)."""

    # -- lifecycle ---------------------------------------------------------------------

    def started(self) -> None:
        self._db = open_store_writer(self._location, busy_timeout=self._busy_timeout, synchronous=self._synchronous, lock_hold=self._lock_hold)

    def receive(self, message: StoreWriterInbox) -> Any:
        result: Any = None
        match message:
            case CreateSession():
                self._write(message, create_session)
            case AppendMessages():
                self._append(message)
            case EndSession():
                self._write(message, end_session)
            case UpdateSessionTotals():
                self._write(message, update_totals)
            case DeleteSession():
                self._write(message, delete_session)
            case RemoveLastTurn():
                self._write(message, remove_last_turn)
            case ReopenWrites(session_id=session_id):
                if self._appends_waiting(session_id):
                    self._append_deferred()  # a refusal among them must come before the reopening
                self._fenced.discard(session_id)
            case PutResponse():
                self._write(message, put_response)
            case DeleteResponse():
                self._write(message, delete_response)
            case SavePoolState():
                self._write(message, save_pool_state)
            case SaveJob():
                self._write(message, save_job)
            case DeleteJob():
                self._write(message, delete_job)
            case ClaimOccurrence():
                self._write(message, claim_occurrence)
            case SettleOccurrence():
                self._write(message, settle_occurrence)
            case SaveFact():
                self._write(message, save_fact)
            case DeleteFact():
                self._write(message, delete_fact)
            case AcquireLease() | RenewLease() if self._now is store_now and is_database_url(self._location):
                if self._appends_waiting(message.session_id):
                    self._append_deferred()  # the session's appends came first
                self._defer(message)
            case AcquireLease():
                self._write(message, lambda db, c: acquire_lease(db, c, self._now))
            case RenewLease():
                self._write(message, lambda db, c: renew_lease(db, c, self._now))
            case ReleaseLease():
                self._write(message, lambda db, c: release_lease(db, c, self._now))
            case NodeHeartbeat():
                self._write(message, lambda db, c: node_heartbeat(db, c, self._now))
            case GetStoreStatistics(reply_to=reply_to):
                self._flush()
                result = self.statistics()
                _tell(reply_to, result)
            case _:
                result = super().receive(message)
        self._maybe_flush()
        return result

    def stopping(self) -> None:
        try:
            self._flush()
        finally:
            self._close()

    def terminated(self, kind: str) -> None:
        # After a crash in a handler, writes may still be pending: commit them if the
        # connection is sound (they succeeded), else answer them. Runs before the
        # supervisor hears of the exit, so the next incarnation never overlaps.
        try:
            if not self._broken:
                self._flush()
        except Exception:
            log.exception("%s: commit after exit failed", self.path)
        finally:
            self._fail_pending("the store writer stopped before committing it; send it again", retryable=True)
            self._close()

    def statistics(self) -> StoreStatistics:
        """This incarnation's counters."""
        return StoreStatistics(
            path=self.database,
            incarnation=self.context.incarnation if self.context is not None else 0,
            transactions=self._transactions,
            writes=self._writes,
            failures=self._failures,
            messages=self._messages,
            largest_batch=self._largest_batch,
            batch_cap=self._batch_cap,
            round_trips=self._db.round_trips if isinstance(self._db, PgConnection) else 0,
        )

    # -- group commit ------------------------------------------------------------------

    def _write(self, command: W, apply: Callable[[Connection, W], tuple[Message, int]]) -> None:
        if isinstance(command, AppendMessages | RemoveLastTurn) and command.session_id in self._fenced:
            self._write_failed(
                command, Rejected("an earlier write of this session was refused, and this one may build on it; the session reloads from the store first")
            )
            return
        if self._appends:
            self._append_deferred()  # the appends waiting came first
        if self._renewing and getattr(command, "session_id", None) in self._renewing:
            self._run_deferred()  # this session's renewal or acquire before its next write, as they came
        db = self._connection()
        if self._batch_writes == 0:
            self._batch_began = time.monotonic()
        self._batch_writes += 1
        try:
            if not db.in_transaction:
                db.execute("BEGIN IMMEDIATE")
            if getattr(command, "fence", None) is not None:  # cluster mode: the lease is checked in the write
                apply = fenced(apply, self._now)
            reply, rows = apply_write(db, apply, command)
        except Exception as exc:
            if self._pending and not isinstance(exc, BROKEN) and transaction_lost(db):
                # Some errors (disk full, I/O) make SQLite roll back the whole transaction.
                self._fail_pending(f"SQLite aborted the transaction it was in ({describe(exc)}); send it again", retryable=True)
            self._write_failed(command, exc)
            return
        self._pending.append((command.reply_to, reply, rows))

    def _maybe_flush(self) -> None:
        db = self._db
        if db is None or self._broken or not (self._pending or self._appends or self._renewals or self._acquires or db.in_transaction):
            return
        if commit_now(self._batch_writes, self._batch_cap, time.monotonic() - self._batch_began, self._batch_seconds, inbox_empty=self.actor_inbox.empty()):
            self._flush()

    def _flush(self) -> None:
        """Commit the open transaction, then tell every pending reply, in command order."""
        db = self._db
        if db is None or self._broken:
            return
        if self._appends:
            self._append_deferred()
        if self._renewals or self._acquires:
            self._run_deferred()
        self._batch_writes = 0
        if db.in_transaction:
            try:
                db.execute("COMMIT")
            except Exception as exc:
                try:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                except apsw.Error:
                    self._broken = True
                if self._broken or isinstance(exc, BROKEN):
                    self._break(exc)
                self._fail_pending(f"the commit failed ({describe(exc)}); send it again", retryable=True)
                return
            self._transactions += 1
        batch, self._pending = self._pending, []
        committed = 0
        for reply_to, reply, rows in batch:
            if type(reply) is not StoreFailed:
                committed += 1
                self._messages += rows
            _tell(reply_to, reply)
        self._writes += committed
        self._largest_batch = max(self._largest_batch, committed)

    def _write_failed(self, command: Write, exc: BaseException, *, broken: bool = False) -> None:
        """Queue ``StoreFailed`` for ``command`` (told in order); crash if the connection is unusable."""
        broken = broken or isinstance(exc, (*BROKEN, StoreConnectionBroken))
        text, retryable = _explain(command, exc, self.database, self._busy_timeout, broken=broken)
        self._failures += 1
        # A stale fence refuses its sender, not the session: the new owner's writes go on.
        if isinstance(command, FENCING) and not isinstance(exc, Fenced):
            self._fenced.add(command.session_id)
        failed = StoreFailed(
            token=command.token,
            error=text,
            command=type(command).__name__,
            session_id=getattr(command, "session_id", None),
            retryable=retryable,
            fenced=exc.lease if isinstance(exc, Fenced) else None,
        )
        self._pending.append((command.reply_to, failed, 0))
        if broken:
            self._break(exc)

    def _fail_pending(self, why: str, *, retryable: bool) -> None:
        """Tell everything pending now: queued failures as they are, uncommitted writes as failed
        (and renewals not yet run)."""
        deferred: list[AppendMessages | AcquireLease | RenewLease] = [*self._deferred_appends(), *self._acquires, *self._renewals]
        self._acquires, self._renewals = [], []
        self._renewing.clear()
        for waiting in deferred:
            self._failures += 1
            kind = type(waiting).__name__
            if isinstance(waiting, AppendMessages):
                self._fenced.add(waiting.session_id)  # as an uncommitted one: the next may build on it
            _tell(
                waiting.reply_to,
                StoreFailed(
                    token=waiting.token,
                    error=f"{kind} for session {waiting.session_id!r} was not stored: {why}",
                    command=kind,
                    session_id=waiting.session_id,
                    retryable=retryable,
                ),
            )
        batch, self._pending = self._pending, []
        self._batch_writes = 0
        for reply_to, reply, _rows in batch:
            if type(reply) is not StoreFailed:
                self._failures += 1
                session_id = getattr(reply, "session_id", None)
                command = _command_of(reply)
                if session_id is not None and command in FENCING_NAMES:
                    self._fenced.add(session_id)
                reply = StoreFailed(
                    token=getattr(reply, "token", ""),
                    error=f"{command} for session {session_id!r} was not stored: {why}",
                    command=command,
                    session_id=session_id,
                    retryable=retryable,
                )
            _tell(reply_to, reply)

    def _break(self, exc: BaseException) -> None:
        """The connection is unusable: answer what is pending, then crash for a restart."""
        self._broken = True
        self._fail_pending(f"the connection broke ({describe(exc)}); send it again", retryable=True)
        self._close()
        msg = f"the connection to {self.database!r} broke ({describe(exc)}); restarting the store writer"
        raise StoreConnectionBroken(msg) from exc

    def _connection(self) -> Connection:
        if self._db is None:
            self._break(apsw.ConnectionClosedError("the store writer has no open connection"))
        assert self._db is not None
        return self._db

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except apsw.Error:
                log.exception("%s: closing %s failed", self.path, self.database)


def _tell(reply_to: Any, message: Message) -> None:
    if reply_to is None:
        return
    try:
        reply_to.tell(message)
    except Exception as exc:
        # The caller is gone (a session that stopped before its last write was answered is
        # normal at shutdown) or its address refused: the write itself stands.
        log.debug("could not deliver %s to %r: %s", type(message).__name__, reply_to, exc)


def _command_of(reply: Message) -> str:
    return {
        SessionCreated: "CreateSession",
        MessagesPersisted: "AppendMessages",
        SessionEnded: "EndSession",
        SessionTotalsUpdated: "UpdateSessionTotals",
        TurnRemoved: "RemoveLastTurn",
        PoolStateSaved: "SavePoolState",
        LeaseGranted: "AcquireLease",
        LeaseReleased: "ReleaseLease",
        NodeSeen: "NodeHeartbeat",
    }.get(type(reply), type(reply).__name__)


def _explain(command: Write, exc: BaseException, database: str, busy_timeout: float, *, broken: bool) -> tuple[str, bool]:
    """What happened and what to do, and whether sending the command again may work."""
    head = f"{type(command).__name__} for session {getattr(command, 'session_id', None)!r} was not stored: "
    text = str(exc)
    if broken:
        return head + f"the connection broke ({describe(exc)}); the writer restarts, send it again", True
    if isinstance(exc, Rejected):
        return head + text, False
    if isinstance(exc, apsw.ConstraintError):
        if "sessions.id" in text:
            return head + "a session with this id exists already; use a new id", False
        if "sessions.title" in text:
            title = getattr(command, "title", None)
            return head + f"the title {title!r} is used by another session; choose another title", False
        if "FOREIGN KEY" in text:
            parent = getattr(command, "parent_session_id", None)
            if parent is not None:
                return head + f"the parent session {parent!r} does not exist; create it first", False
            return head + f"there is no session {getattr(command, 'session_id', None)!r}; send CreateSession first", False
        return head + f"a constraint failed ({text}); fix the command's fields", False
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return (
            head + f"{database!r} stayed locked by another connection for over {busy_timeout:g} s; "
            "send it again later, and check that nothing but this writer writes the file",
            True,
        )
    if isinstance(exc, apsw.FullError):
        return head + f"the disk holding {database!r} is full; free space, then send it again", True
    return head + f"{describe(exc)}; fix the command's fields", False
