"""The SQL of scheduled jobs (tables ``cron_jobs`` and ``cron_occurrences``, schema 8).

The writer's halves are one statement each (atomic without a SAVEPOINT, like the other
writes). A claim is ``INSERT OR IGNORE``: the primary key (job, occurrence) makes a second
claim of the same occurrence a no-op that reports ``won=False``.
"""

from __future__ import annotations

import os
import time

import msgspec

from protocols._base import Message
from protocols._scheduler import (
    ClaimOccurrence,
    DeleteJob,
    Job,
    JobDeleted,
    JobSaved,
    Occurrence,
    OccurrenceClaimed,
    OccurrenceSettled,
    SaveJob,
    SettleOccurrence,
)

from ._backend import Connection, open_store_reader

_UPSERT = "INSERT INTO cron_jobs (id, job, saved_at) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET job = excluded.job, saved_at = excluded.saved_at"
_CLAIM = (
    "INSERT OR IGNORE INTO cron_occurrences (job_id, at, status, manual, session_id, claimed_at, ended_at, detail, delivered) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SETTLE = "UPDATE cron_occurrences SET status = ?, ended_at = ?, detail = ?, delivered = ? WHERE job_id = ? AND at = ?"
_COLUMNS = "job_id, at, status, manual, session_id, claimed_at, ended_at, detail, delivered"

_job_decoder = msgspec.json.Decoder(Job)


def save_job(db: Connection, c: SaveJob) -> tuple[Message, int]:
    db.execute(_UPSERT, (c.job.id, msgspec.json.encode(c.job).decode(), time.time()))
    return JobSaved(job_id=c.job.id, token=c.token), 0


def delete_job(db: Connection, c: DeleteJob) -> tuple[Message, int]:
    db.execute("DELETE FROM cron_jobs WHERE id = ?", (c.job_id,))
    return JobDeleted(job_id=c.job_id, token=c.token), 0


def claim_occurrence(db: Connection, c: ClaimOccurrence) -> tuple[Message, int]:
    o = c.occurrence
    db.execute(_CLAIM, (o.job_id, o.at, o.status, int(o.manual), o.session_id, o.claimed_at, o.ended_at, o.detail, o.delivered))
    return OccurrenceClaimed(job_id=o.job_id, at=o.at, won=db.changes() == 1, token=c.token), 0


def settle_occurrence(db: Connection, c: SettleOccurrence) -> tuple[Message, int]:
    db.execute(_SETTLE, (c.status, c.ended_at, c.detail, c.delivered, c.job_id, c.at))
    return OccurrenceSettled(job_id=c.job_id, at=c.at, token=c.token), 0


def _occurrence(row: tuple[object, ...]) -> Occurrence:
    job_id, at, status, manual, session_id, claimed_at, ended_at, detail, delivered = row
    return Occurrence(
        job_id=str(job_id),
        at=float(at),  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        manual=bool(manual),
        session_id=str(session_id),
        claimed_at=float(claimed_at),  # type: ignore[arg-type]
        ended_at=None if ended_at is None else float(ended_at),  # type: ignore[arg-type]
        detail=str(detail),
        delivered=str(delivered),
    )


def select_jobs(db: Connection) -> list[Job]:
    """Every stored job, oldest first."""
    return [_job_decoder.decode(str(job)) for (job,) in db.execute("SELECT job FROM cron_jobs ORDER BY rowid")]


def select_last_occurrences(db: Connection) -> dict[str, Occurrence]:
    """Each job's latest scheduled (not manual) occurrence, claimed or recorded."""
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM cron_occurrences o WHERE manual = 0 AND at = (SELECT max(at) FROM cron_occurrences WHERE job_id = o.job_id AND manual = 0)"
    )
    return {occ.job_id: occ for occ in map(_occurrence, rows)}


def select_latest_occurrences(db: Connection) -> dict[str, Occurrence]:
    """Each job's latest occurrence of any kind (manual runs included), by claim time."""
    rows = db.execute(f"SELECT {_COLUMNS} FROM cron_occurrences ORDER BY claimed_at, at")
    return {occ.job_id: occ for occ in map(_occurrence, rows)}


def select_open_occurrences(db: Connection) -> list[Occurrence]:
    """Occurrences claimed and never settled (their process died during the run)."""
    return [_occurrence(row) for row in db.execute(f"SELECT {_COLUMNS} FROM cron_occurrences WHERE status = 'claimed' ORDER BY at")]


def select_run_counts(db: Connection) -> dict[str, int]:
    """Runs started per job (claimed, whatever their end; missed ones do not count)."""
    return {str(j): int(n) for j, n in db.execute("SELECT job_id, count(*) FROM cron_occurrences WHERE status != 'missed' GROUP BY job_id")}


def select_occurrences(db: Connection, job_id: str | None = None, *, limit: int = 50) -> list[Occurrence]:
    """The latest occurrences (of one job, or of all), newest first."""
    if job_id is None:
        rows = db.execute(f"SELECT {_COLUMNS} FROM cron_occurrences ORDER BY claimed_at DESC LIMIT ?", (limit,))
    else:
        rows = db.execute(f"SELECT {_COLUMNS} FROM cron_occurrences WHERE job_id = ? ORDER BY claimed_at DESC LIMIT ?", (job_id, limit))
    return [_occurrence(row) for row in rows]


class JobsSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """What the scheduler loads at start."""

    jobs: list[Job]
    last: dict[str, Occurrence]
    """Each job's latest scheduled occurrence (where its schedule resumes)."""
    latest: dict[str, Occurrence]
    """Each job's latest occurrence of any kind (what surfaces show)."""
    open: list[Occurrence]
    runs: dict[str, int]


def read_jobs(path: str | os.PathLike[str]) -> JobsSnapshot:
    """Open ``path`` read-only and read the jobs and their occurrences (blocking: a worker thread's job).

    Raises:
        StoreError: there is no store at ``path`` yet.
        SchemaVersionError: the file has another schema version than this build reads.
    """
    db = open_store_reader(os.fspath(path))
    try:
        return JobsSnapshot(
            jobs=select_jobs(db),
            last=select_last_occurrences(db),
            latest=select_latest_occurrences(db),
            open=select_open_occurrences(db),
            runs=select_run_counts(db),
        )
    finally:
        db.close()


def read_occurrences(path: str | os.PathLike[str], job_id: str | None = None, *, limit: int = 50) -> list[Occurrence]:
    """Open ``path`` read-only and return :func:`select_occurrences`."""
    db = open_store_reader(os.fspath(path))
    try:
        return select_occurrences(db, job_id, limit=limit)
    finally:
        db.close()
