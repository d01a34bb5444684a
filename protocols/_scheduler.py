"""Scheduled jobs: the stored records, the scheduler's inbox and the store commands it sends.

A job is kept in the store (``cron_jobs``); each occurrence that fires (or is missed) gets one
row in ``cron_occurrences``, inserted before its run starts: the claim. The claim's primary key
is (job, occurrence), so a second claim of the same occurrence is refused by the database,
whichever incarnation or process sends it.
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message

OccurrenceStatus = Literal["claimed", "completed", "failed", "silent", "missed", "interrupted"]
"""``claimed``: the run is starting or running; ``silent``: the answer was ``[SILENT]``, not
delivered; ``missed``: the server was down past the grace window; ``interrupted``: the server
stopped during the run (never run again)."""


class Job(Message, frozen=True, kw_only=True):
    """One scheduled job, as stored."""

    id: str
    name: str
    prompt: str
    schedule: str
    """As the user wrote it: ``"30m"``, ``"every 2h"``, ``"0 8 * * 1-5"``, an ISO time."""
    timezone: str = ""
    """IANA zone of a cron expression or a zone-less ISO time; empty: the config's, else UTC."""
    created_at: float
    """Unix time; a duration counts from it, an interval is anchored at it."""
    enabled: bool = True
    deliver: str = "local"
    """``local``, ``origin``, ``<platform>:<chat_id>[:<thread_id>]`` or an ``http(s)://`` webhook URL."""
    origin: str = ""
    """The session (or ``<platform>:<chat_id>``) that created the job; where ``origin`` delivers."""
    model: str = ""
    """The model of its runs (empty: the server's)."""
    toolsets: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    """Skills whose SKILL.md goes into each run's message (a missing one is skipped and noted)."""
    script: str = ""
    """A pre-run script under ``HERMES_HOME/scripts/`` (Hermes's ``script``): its output is the run's context."""
    repeat: int | None = None
    """How many runs in all (None: no limit); a job that has run that many times is disabled."""
    deadline: float = 600.0
    """Seconds a run may take in all before it is cancelled and recorded ``failed``."""
    source: str = ""
    """Where it came from: ``api``, ``tool``, ``cli``, ``hermes-jobs.json``."""


class Occurrence(Message, frozen=True, kw_only=True):
    """One occurrence of a job that was claimed or recorded."""

    job_id: str
    at: float
    """The occurrence's instant (Unix time); a manual run uses the time it was asked."""
    status: OccurrenceStatus
    session_id: str = ""
    claimed_at: float = 0.0
    ended_at: float | None = None
    detail: str = ""
    """The error, the reason it was missed, or the first characters of the answer."""
    delivered: str = ""
    """Where the answer went, or why it was not delivered."""
    manual: bool = False


# -- store commands (the scheduler -> the store writer) -------------------------------------


class SaveJob(Message, frozen=True, kw_only=True):
    """Insert or replace a job. Answered :class:`JobSaved` or ``StoreFailed``."""

    job: Job
    token: str = ""
    reply_to: Any = None


class DeleteJob(Message, frozen=True, kw_only=True):
    """Delete a job (its occurrences stay as history). Answered :class:`JobDeleted`."""

    job_id: str
    token: str = ""
    reply_to: Any = None


class ClaimOccurrence(Message, frozen=True, kw_only=True):
    """Record an occurrence before anything runs: ``claimed`` (about to run) or ``missed``.

    Answered :class:`OccurrenceClaimed` once committed (``won`` False: it was recorded already).
    """

    occurrence: Occurrence
    token: str = ""
    reply_to: Any = None


class SettleOccurrence(Message, frozen=True, kw_only=True):
    """A claimed occurrence ended. Answered :class:`OccurrenceSettled`."""

    job_id: str
    at: float
    status: OccurrenceStatus
    ended_at: float
    detail: str = ""
    delivered: str = ""
    token: str = ""
    reply_to: Any = None


JobStoreCommand = SaveJob | DeleteJob | ClaimOccurrence | SettleOccurrence


class JobSaved(Message, frozen=True, kw_only=True):
    job_id: str
    token: str = ""


class JobDeleted(Message, frozen=True, kw_only=True):
    job_id: str
    token: str = ""


class OccurrenceClaimed(Message, frozen=True, kw_only=True):
    job_id: str
    at: float
    won: bool
    """False: a row for this occurrence existed already (it is never run again)."""
    token: str = ""


class OccurrenceSettled(Message, frozen=True, kw_only=True):
    job_id: str
    at: float
    token: str = ""


# -- the scheduler's inbox (from the API, the tool, the CLI) --------------------------------

JobAction = Literal["create", "update", "pause", "resume", "remove", "run", "get", "list"]


class JobRequest(Message, frozen=True, kw_only=True):
    """Act on jobs; answered with :class:`JobReply` told to ``reply_to``."""

    action: JobAction
    job_id: str = ""
    fields: dict[str, Any] = {}
    """``create`` / ``update``: the job's fields (``name``, ``prompt``, ``schedule``, ...)."""
    request_id: str = ""
    reply_to: Any = None


class JobView(Message, frozen=True, kw_only=True):
    """A job as surfaces show it: the record, its state and its recent occurrences."""

    job: Job
    state: Literal["scheduled", "paused", "finished", "running"]
    next_run_at: float | None = None
    runs: int = 0
    last: Occurrence | None = None
    schedule_display: str = ""


class JobReply(Message, frozen=True, kw_only=True):
    request_id: str = ""
    ok: bool
    error: str = ""
    """What was wrong and what to do (``ok`` False)."""
    status: int = 200
    """The HTTP status that fits (400 bad input, 404 unknown job, 503 not ready)."""
    jobs: tuple[JobView, ...] = ()


class SchedulerStatus(Message, frozen=True, kw_only=True):
    """``/health/detailed`` and ``hermes cron status``."""

    loaded: bool
    jobs: int
    enabled: int
    running: int
    queued: int
    max_parallel: int
    next_run_at: float | None
    fired: int
    missed: int
    interrupted: int
    last_lateness: float | None = None
    """Seconds between the latest fired occurrence's instant and its claim (None: none fired yet)."""
