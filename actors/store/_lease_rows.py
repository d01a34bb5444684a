"""The SQL of session leases and node heartbeats, and the fence check of a session write.

Each function runs inside the writer's open transaction (``BEGIN IMMEDIATE`` on SQLite,
which already serialises every writer of the file; on Postgres the lease row is locked:
``FOR UPDATE`` to change it, ``FOR SHARE`` to check a fence, so a takeover waits for a
fenced write in flight to commit, and a fenced write waits for a takeover and then sees the
new epoch). The decisions are ``_lease``'s; here they are read and written.

``now`` is the store's clock: the writer's ``clock`` when one is given (tests), else
:func:`store_now` — this machine's clock for a SQLite file (one machine), the database
server's for Postgres (every node reads the same clock, whatever their own say).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import apsw

from protocols._base import Message
from protocols._leases import (
    AcquireLease,
    Fence,
    LeaseGranted,
    LeaseRecord,
    LeaseRefused,
    LeaseReleased,
    NodeHeartbeat,
    NodeRecord,
    NodeSeen,
    ReleaseLease,
    RenewLease,
)
from protocols._store import AppendMessages, Interrupted

from ._backend import Connection
from ._lease import Refusal, check_fence, decide_acquire, decide_release, decide_renew
from ._pg import PgConnection, Sent, Step
from ._settle import settle_results, settle_session, settle_steps, settled
from ._writes import Rejected, append_steps, message_rows

log = logging.getLogger(__name__)

Clock = Callable[[Connection], float]
"""The store's now, read on the writer's connection."""

C = TypeVar("C")


class Fenced(Rejected):
    """A fenced write whose fence is not the session's live lease; ``lease`` is the lease as stored."""

    def __init__(self, text: str, lease: Fence) -> None:
        super().__init__(text)
        self.lease = lease


def store_now(db: Connection) -> float:
    """The store's clock: this machine's for a file, the database server's for Postgres."""
    if isinstance(db, apsw.Connection):
        return time.time()
    row = db.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
    return float(row[0]) if row is not None else time.time()


def read_lease(db: Connection, session_id: str, *, lock: str = "") -> LeaseRecord | None:
    """The session's lease row (None: never leased). ``lock``: ``FOR UPDATE`` / ``FOR SHARE`` on Postgres."""
    suffix = "" if not lock or isinstance(db, apsw.Connection) else f" {lock}"
    row = db.execute(f"SELECT node_id, epoch, expires_at FROM leases WHERE session_id = ?{suffix}", (session_id,)).fetchone()
    if row is None or not row[0]:
        return None  # no row, or the placeholder an acquire inserts to have a row to lock
    return LeaseRecord(session_id=session_id, node_id=str(row[0]), epoch=int(row[1]), expires_at=float(row[2]))


def _store(db: Connection, lease: LeaseRecord) -> None:
    db.execute(_STORE, (lease.node_id, lease.epoch, lease.expires_at, lease.session_id))


def _store_step(lease: LeaseRecord) -> Step:
    return Step(_STORE, (lease.node_id, lease.epoch, lease.expires_at, lease.session_id))


_STORE = "UPDATE leases SET node_id = ?, epoch = ?, expires_at = ? WHERE session_id = ?"


def _refused(c: AcquireLease | RenewLease, refusal: Refusal) -> LeaseRefused:
    lease = refusal.current
    return LeaseRefused(
        session_id=c.session_id,
        node_id=c.node_id,
        owner="" if lease is None else lease.node_id,
        epoch=0 if lease is None else lease.epoch,
        expires_at=0.0 if lease is None else lease.expires_at,
        reason=refusal.reason,
        token=c.token,
    )


def acquire_lease(db: Connection, c: AcquireLease, clock: Clock) -> tuple[Message, int]:
    # The row locked first. A session never leased has none: a placeholder is inserted, and two
    # nodes acquiring it meet on it (the second insert waits for the first's commit, then does
    # nothing). A session leased before (every takeover) skips the insert: one round trip less.
    row, now = _locked_with_now(db, c.session_id, "FOR UPDATE", clock)
    if row is None:
        db.execute("INSERT INTO leases (session_id, node_id, epoch, expires_at) VALUES (?, '', 0, 0) ON CONFLICT DO NOTHING", (c.session_id,))
        row, now = _locked_with_now(db, c.session_id, "FOR UPDATE", clock)
    current = None if row is None or not row.node_id else row  # the placeholder: never leased
    dead = (
        c.dead_after > 0
        and current is not None
        and current.node_id != c.node_id
        and current.expires_at > now  # a lapsed lease passes on anyway: its holder's heartbeat is not read
        and _silent_for(db, current.node_id, now) >= c.dead_after
    )
    decided = decide_acquire(current, c.session_id, c.node_id, now, c.ttl, holder_dead=dead)
    if isinstance(decided, Refusal):
        return _refused(c, decided), 0
    if isinstance(db, PgConnection):  # the lease stored and the session's running turns settled in one round trip
        steps = [_store_step(decided), *(settle_steps(c.session_id, now) if c.settle else ())]
        sent = db.together(steps)
        report = settled(db, c.session_id, c.settle, now, sent[1], sent[2]) if c.settle else None
    else:
        _store(db, decided)
        report = settle_session(db, c.session_id, c.settle, now) if c.settle else None
    _log_settled(c, decided, current, report)
    return LeaseGranted(session_id=c.session_id, node_id=c.node_id, epoch=decided.epoch, expires_at=decided.expires_at, token=c.token), 0


def _log_settled(c: AcquireLease, decided: LeaseRecord, current: LeaseRecord | None, report: Interrupted | None) -> None:
    if report is not None:  # what a dead holder (another node, or this node's last process) left open
        log.warning(
            "session %s acquired by node %s at epoch %d (last holder: %s): %d turn(s) failed as interrupted, %d tool call(s) given an unknown outcome",
            c.session_id,
            c.node_id,
            decided.epoch,
            "nobody" if current is None or not current.node_id else f"node {current.node_id!r} (epoch {current.epoch})",
            len(report.turn_ids),
            report.settled_calls,
        )


def _locked_with_now(db: Connection, session_id: str, lock: str, clock: Clock) -> tuple[LeaseRecord | None, float]:
    """The session's lease row, locked (``lock`` on Postgres; None: no row), and the store's now
    read after the lock is taken. A placeholder row (inserted by an acquire, never granted) reads
    as a lease of node ``""`` at epoch 0. On Postgres with the server's clock, one statement: the
    clock is read in the query above the locked row's (a ``LockRows`` under a subquery scan), so
    a lease statement that waited for the lock still sees the time it got it."""
    if clock is store_now and not isinstance(db, apsw.Connection):
        row = db.execute(_LOCKED_WITH_NOW.format(lock=lock), (session_id,)).fetchone()
        if row is None:
            return None, store_now(db)
        return LeaseRecord(session_id=session_id, node_id=str(row[0]), epoch=int(row[1]), expires_at=float(row[2])), float(row[3])
    suffix = "" if isinstance(db, apsw.Connection) else f" {lock}"
    row = db.execute(f"SELECT node_id, epoch, expires_at FROM leases WHERE session_id = ?{suffix}", (session_id,)).fetchone()
    record = None if row is None else LeaseRecord(session_id=session_id, node_id=str(row[0]), epoch=int(row[1]), expires_at=float(row[2]))
    return record, clock(db)


_LOCKED_WITH_NOW = (
    "SELECT node_id, epoch, expires_at, extract(epoch FROM clock_timestamp()) FROM"
    " (SELECT node_id, epoch, expires_at FROM leases WHERE session_id = ? {lock}) AS locked"
)


def _lease_with_now(db: Connection, session_id: str, lock: str, clock: Clock) -> tuple[LeaseRecord | None, float]:
    """:func:`_locked_with_now`, a placeholder read as no lease (as :func:`read_lease`)."""
    row, now = _locked_with_now(db, session_id, lock, clock)
    return (None if row is None or not row.node_id else row), now


def _silent_for(db: Connection, node_id: str, now: float) -> float:
    """Seconds since ``node_id``'s last heartbeat (0: it never beat; a node that sends no
    heartbeat, as ``hermes chat``, is not declared dead by its silence)."""
    row = db.execute("SELECT heartbeat_at FROM nodes WHERE node_id = ?", (node_id,)).fetchone()
    return 0.0 if row is None else now - float(row[0])


def renew_lease(db: Connection, c: RenewLease, clock: Clock) -> tuple[Message, int]:
    current, now = _lease_with_now(db, c.session_id, "FOR UPDATE", clock)
    decided = decide_renew(current, c.session_id, c.node_id, c.epoch, now, c.ttl)
    if isinstance(decided, Refusal):
        return _refused(c, decided), 0
    _store(db, decided)
    return LeaseGranted(session_id=c.session_id, node_id=c.node_id, epoch=decided.epoch, expires_at=decided.expires_at, token=c.token), 0


def renew_leases(db: Connection, renewals: Sequence[RenewLease]) -> tuple[list[tuple[RenewLease, Message]], list[RenewLease]]:
    """Renewals waiting in one batch, in two statements on Postgres with the server's clock
    (the rows locked ``FOR UPDATE SKIP LOCKED`` with the clock read above them, then one
    ``UPDATE`` of every granted row), each decided by ``decide_renew`` as :func:`renew_lease`
    would. Returns the answered renewals, and those left for :func:`renew_lease` one by one:
    a row another transaction holds (it is waited for there, as ever) or none at all."""
    ids = sorted({c.session_id for c in renewals})
    rows: list[Any] = db.execute(
        "SELECT session_id, node_id, epoch, expires_at, extract(epoch FROM clock_timestamp()) FROM"
        " (SELECT session_id, node_id, epoch, expires_at FROM leases WHERE session_id = ANY(?) ORDER BY session_id FOR UPDATE SKIP LOCKED) AS locked",
        (ids,),
    ).fetchall()
    found = {str(r[0]): (LeaseRecord(session_id=str(r[0]), node_id=str(r[1]), epoch=int(r[2]), expires_at=float(r[3])), float(r[4])) for r in rows}
    answered: list[tuple[RenewLease, Message]] = []
    left: list[RenewLease] = []
    renewed: dict[str, float] = {}
    for c in renewals:
        held = found.get(c.session_id)
        if held is None or not held[0].node_id:
            left.append(c)
            continue
        current, now = held
        if c.session_id in renewed:  # a second renewal of one session in the batch sees the first's
            current = LeaseRecord(session_id=c.session_id, node_id=current.node_id, epoch=current.epoch, expires_at=renewed[c.session_id])
        decided = decide_renew(current, c.session_id, c.node_id, c.epoch, now, c.ttl)
        if isinstance(decided, Refusal):
            answered.append((c, _refused(c, decided)))
            continue
        renewed[c.session_id] = decided.expires_at
        answered.append((c, LeaseGranted(session_id=c.session_id, node_id=c.node_id, epoch=decided.epoch, expires_at=decided.expires_at, token=c.token)))
    if renewed:
        db.execute(
            "UPDATE leases SET expires_at = v.expires_at FROM unnest(?::text[], ?::double precision[]) AS v(session_id, expires_at) WHERE leases.session_id = v.session_id",
            (list(renewed), list(renewed.values())),
        )
    return answered, left


def acquire_leases(db: PgConnection, acquires: Sequence[AcquireLease]) -> tuple[list[tuple[AcquireLease, Message]], list[AcquireLease]]:
    """Acquires waiting in one batch, on Postgres with the server's clock, in two round trips and a
    third when a settle gives open calls their results, whatever their number: the rows locked
    ``FOR UPDATE SKIP LOCKED`` with the clock read above them and each holder's last heartbeat,
    each decided by ``decide_acquire`` as :func:`acquire_lease` would, then every grant's lease
    update and settle together (``PgConnection.together``); the sessions never leased get their
    placeholder rows in one statement first. Returns the answered acquires, and those left for
    :func:`acquire_lease` one by one: a row another transaction holds (waited for there), a
    second acquire of one session."""
    ids = sorted({c.session_id for c in acquires})
    found = _lock_many(db, ids)
    missing = [sid for sid in ids if sid not in found]
    if missing:  # never leased: their placeholder rows made in one statement, then locked (as acquire_lease does one by one)
        db.execute("INSERT INTO leases (session_id, node_id, epoch, expires_at) SELECT unnest(?::text[]), '', 0, 0 ON CONFLICT DO NOTHING", (missing,))
        found.update(_lock_many(db, missing))
    answered: list[tuple[AcquireLease, Message | None]] = []
    left: list[AcquireLease] = []
    granted: dict[str, tuple[AcquireLease, LeaseRecord, LeaseRecord | None, float]] = {}
    for c in acquires:
        held = found.get(c.session_id)
        if held is None or c.session_id in granted:
            left.append(c)
            continue
        row, now, beat = held
        current = row if row.node_id else None  # the placeholder: never leased
        silent = 0.0 if beat is None else now - float(beat)
        dead = c.dead_after > 0 and current is not None and current.node_id != c.node_id and current.expires_at > now and silent >= c.dead_after
        decided = decide_acquire(current, c.session_id, c.node_id, now, c.ttl, holder_dead=dead)
        if isinstance(decided, Refusal):
            answered.append((c, _refused(c, decided)))
            continue
        granted[c.session_id] = (c, decided, current, now)
        answered.append((c, None))
    steps: list[Step] = []
    for g, lease, _before, at in granted.values():
        steps.append(_store_step(lease))
        steps.extend(settle_steps(g.session_id, at) if g.settle else ())
    sent = iter(db.together(steps) if steps else ())
    replies: dict[str, Message] = {}
    answers: list[AppendMessages] = []
    for g, lease, before, at in granted.values():
        next(sent)
        settling = settle_results(g.session_id, g.settle, at, next(sent), next(sent)) if g.settle else None
        if settling is not None and settling[1] is not None:
            answers.append(settling[1])
        _log_settled(g, lease, before, None if settling is None else settling[0])
        replies[g.session_id] = LeaseGranted(session_id=g.session_id, node_id=g.node_id, epoch=lease.epoch, expires_at=lease.expires_at, token=g.token)
    if answers:  # every open call of every settled session its result: one more round trip
        counted = db.together([step for a in answers for step in append_steps(a, message_rows(a))])[1::2]
        if any(s.changes != 1 for s in counted):
            raise Rejected("a settled session has no sessions row; its acquire is sent again alone")
    return [(c, reply if reply is not None else replies[c.session_id]) for c, reply in answered], left


def _lock_many(db: PgConnection, ids: list[str]) -> dict[str, tuple[LeaseRecord, float, Any]]:
    """The lease rows of ``ids`` no other transaction holds, locked, each with the server's clock
    read above the lock and its holder's last heartbeat (None: it never beat)."""
    rows: list[Any] = db.execute(
        "SELECT locked.session_id, locked.node_id, locked.epoch, locked.expires_at, extract(epoch FROM clock_timestamp()), nodes.heartbeat_at FROM"
        " (SELECT session_id, node_id, epoch, expires_at FROM leases WHERE session_id = ANY(?) ORDER BY session_id FOR UPDATE SKIP LOCKED) AS locked"
        " LEFT JOIN nodes ON nodes.node_id = locked.node_id",
        (ids,),
    ).fetchall()
    return {str(r[0]): (LeaseRecord(session_id=str(r[0]), node_id=str(r[1]), epoch=int(r[2]), expires_at=float(r[3])), float(r[4]), r[5]) for r in rows}


def release_lease(db: Connection, c: ReleaseLease, clock: Clock) -> tuple[Message, int]:
    current, now = _lease_with_now(db, c.session_id, "FOR UPDATE", clock)
    decided = decide_release(current, c.node_id, c.epoch, now)
    if decided is not None:
        _store(db, decided)
    return LeaseReleased(session_id=c.session_id, node_id=c.node_id, released=decided is not None, token=c.token), 0


def node_heartbeat(db: Connection, c: NodeHeartbeat, clock: Clock) -> tuple[Message, int]:
    if not c.node_id:
        raise Rejected("a heartbeat needs a node id; set cluster.node_id")
    now = clock(db)
    db.execute(
        "INSERT INTO nodes (node_id, address, heartbeat_at) VALUES (?, ?, ?) "
        "ON CONFLICT (node_id) DO UPDATE SET address = excluded.address, heartbeat_at = excluded.heartbeat_at",
        (c.node_id, c.address, now),
    )
    return NodeSeen(node_id=c.node_id, heartbeat_at=now, token=c.token), 0


def fenced(apply: Callable[[Connection, C], tuple[Message, int]], clock: Clock) -> Callable[[Connection, C], tuple[Message, int]]:
    """``apply``, run only if the command's ``fence`` is the session's live lease.

    Raises (from the returned function):
        Fenced: the fence is stale (another node's epoch now, or the lease lapsed); nothing written.
    """

    def run(db: Connection, command: C) -> tuple[Message, int]:
        session_id: str = getattr(command, "session_id")  # noqa: B009 - every fenced command has one
        fence: Fence = getattr(command, "fence")  # noqa: B009
        current, now = _lease_with_now(db, session_id, "FOR SHARE", clock)
        refused = _fence_refused(current, session_id, fence, now)
        if refused is not None:
            raise refused
        return apply(db, command)

    return run


def _fence_refused(current: LeaseRecord | None, session_id: str, fence: Fence, now: float) -> Fenced | None:
    why = check_fence(current, session_id, fence, now)
    if why is None:
        return None
    held = Fence(node_id="", epoch=0) if current is None else Fence(node_id=current.node_id, epoch=current.epoch)
    return Fenced(why, held)


def fence_step(session_id: str) -> Step:
    """Postgres with the server's clock: ``fenced``'s check as a statement to send with others
    (``together``): the session's lease row locked ``FOR SHARE``, the clock read above it."""
    return Step(_LOCKED_WITH_NOW.format(lock="FOR SHARE"), (session_id,))


def fence_answer(sent: Sent, session_id: str, fence: Fence) -> Fenced | None:
    """What ``fence_step`` answered, checked as ``fenced`` checks it: None when the write may land."""
    row = sent.rows[0] if sent.rows else None
    if row is None or not row[0]:  # no lease, or a placeholder never granted: no clock needed
        return _fence_refused(None, session_id, fence, 0.0)
    current = LeaseRecord(session_id=session_id, node_id=str(row[0]), epoch=int(row[1]), expires_at=float(row[2]))
    return _fence_refused(current, session_id, fence, float(row[3]))


def read_leases(db: Connection) -> list[LeaseRecord]:
    """Every session's lease (readers: which node owns what)."""
    rows: list[Any] = list(db.execute("SELECT session_id, node_id, epoch, expires_at FROM leases WHERE node_id <> '' ORDER BY session_id"))
    return [LeaseRecord(session_id=str(r[0]), node_id=str(r[1]), epoch=int(r[2]), expires_at=float(r[3])) for r in rows]


def read_nodes(db: Connection) -> list[NodeRecord]:
    """Every node that ever sent a heartbeat, newest heartbeat first."""
    rows: list[Any] = list(db.execute("SELECT node_id, address, heartbeat_at FROM nodes ORDER BY heartbeat_at DESC, node_id"))
    return [NodeRecord(node_id=str(r[0]), address=str(r[1]), heartbeat_at=float(r[2])) for r in rows]
