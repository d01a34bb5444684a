"""The scheduler actor, ``/scheduler``: jobs in the store, one timer, claims before runs.

Start. The scheduler tells the store writer ``GetStoreStatistics`` and loads only after that
barrier (whatever a dead incarnation sent is committed by then), in a worker thread. It
settles every occurrence left ``claimed`` (its process died during the run) as
``interrupted``: it is never run again. A Hermes ``cron/jobs.json`` is imported once, when the
store has no jobs (a marker file ``cron/.imported`` records it).

Timers. The next occurrence of every enabled job sits in one heap; the actor keeps one reactor
timer (``send_after``) for the earliest, so 10,000 idle jobs cost one sleeping timer and no
polling. A timer never sleeps past an hour (a suspended machine or a changed clock is noticed).

At most once. When an occurrence comes, ``decide`` (pure) says fire or missed; the scheduler
sends ``ClaimOccurrence`` and starts the run only once the store has committed the claim (its
reply). A restart reads the claims back, so a claimed occurrence never fires again; an
occurrence whose claim was not committed before a crash is decided again at the next start
(fired within the grace window, else recorded missed), so none is lost without a record.

Runs. At most ``max_parallel`` runs at once; the others wait in order. Each run is its own
reactor wait with the job's deadline, so a stuck run never delays another.

Invariant: no handler waits; the store, the load and the runs answer as messages.
Invariant: a run starts only after its occurrence's claim committed.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from actors import Actor, ActorPath, Address
from actors._reactor import WaitHandle
from protocols import StoreFailed, StoreStatistics, WaitFinished
from protocols._base import Message
from protocols._scheduler import (
    ClaimOccurrence,
    DeleteJob,
    Job,
    JobDeleted,
    JobReply,
    JobRequest,
    JobSaved,
    JobView,
    Occurrence,
    OccurrenceClaimed,
    OccurrenceSettled,
    SaveJob,
    SchedulerStatus,
    SettleOccurrence,
)
from protocols._store import GetStoreStatistics

from ._due import decide, first_occurrence
from ._import import import_hermes_jobs
from ._jobs import JobError, apply_fields, create_job, schedule_of
from ._run import RunEnv, RunOutcome, run_job, session_id_of
from ._schedule import Schedule, ScheduleError, describe, grace_seconds

log = logging.getLogger(__name__)

MAX_SLEEP = 3600.0
JobState = Literal["scheduled", "paused", "finished", "running"]


class SchedulerTick(Message, frozen=True, kw_only=True):
    """The scheduler's own timer: look at what is due (``generation`` drops stale ones)."""

    generation: int


class GetSchedulerStatus(Message, frozen=True, kw_only=True):
    reply_to: Any = None


SchedulerInbox = JobRequest | GetSchedulerStatus
"""What other parts of the runtime tell the scheduler."""
SCHEDULER_PATH: ActorPath[SchedulerInbox] = ActorPath("/scheduler")


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """How a runtime's scheduler is set up (``cron:`` in config.yaml, the server's parts)."""

    store_file: str | os.PathLike[str]
    home: Path
    store_path: str = "/store"
    max_parallel: int = 3
    default_zone: str = ""
    catch_up_missed: bool = True
    platforms: frozenset[str] = frozenset()
    hubs: object = None
    tool_names: frozenset[str] = frozenset()
    resolve_toolsets: object = None
    max_iterations: int = 90
    default_model: str = ""
    senders: object = None
    clock: Callable[[], float] = time.time
    load_timeout: float = 60.0
    run_slack: float = 150.0
    script_timeout: float = 120.0
    """Seconds a job's pre-run script may run (``HERMES_CRON_SCRIPT_TIMEOUT``)."""
    """Seconds a run's wait may last past the job's deadline (delivery, cancelling the turn)."""


@dataclasses.dataclass(slots=True)
class _Pending:
    reply_to: Any
    request_id: str
    kind: str
    job: Job | None = None
    at: float = 0.0


class Scheduler(Actor[Any]):
    """Jobs, their timers, their claims and their runs (see the module docstring)."""

    def __init__(self, options: SchedulerOptions) -> None:
        super().__init__()
        self.options = options
        self.jobs: dict[str, Job] = {}
        self.schedules: dict[str, Schedule] = {}
        self.next_at: dict[str, float | None] = {}
        self.runs: dict[str, int] = {}
        self.last: dict[str, Occurrence] = {}
        self._heap: list[tuple[float, str]] = []
        self._timer: WaitHandle | None = None
        self._timer_at: float | None = None
        self._generation = 0
        self._loaded_at: float | None = None
        self._loading = False
        self._early: list[JobRequest | GetSchedulerStatus] = []
        self._tokens = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._queue: collections.deque[tuple[Job, float, str]] = collections.deque()
        self._running: dict[int, tuple[str, float, str]] = {}
        self._imports: set[str] = set()
        self.fired = 0
        self.missed = 0
        self.interrupted = 0
        self.lateness: collections.deque[float] = collections.deque(maxlen=1024)
        """Seconds between each recent fired occurrence's instant and its claim."""

    # -- lifecycle ----------------------------------------------------------------------------

    def started(self) -> None:
        context = self._context()
        self.store: Address[Any] = context.registry.lookup(ActorPath(self.options.store_path))
        from ._delivery import Senders

        senders = self.options.senders if isinstance(self.options.senders, Senders) else Senders()
        self.env = RunEnv(
            registry=context.registry,
            reactor=context.reactor,
            hubs=self.options.hubs,
            home=self.options.home,
            tool_names=self.options.tool_names,
            max_iterations=self.options.max_iterations,
            senders=senders,
            resolve_toolsets=self.options.resolve_toolsets,
            default_model=self.options.default_model,
            script_timeout=self.options.script_timeout,
        )
        self.store.tell(GetStoreStatistics(reply_to=self.actor_ref))

    def receive(self, message: Any) -> Any:
        match message:
            case StoreStatistics() if self._loaded_at is None and not self._loading:
                self._loading = True
                self.start_wait(_load, os.fspath(self.options.store_file), self.options.home, tag="load", timeout=self.options.load_timeout)
            case WaitFinished(tag="load"):
                self._on_load(message)
            case WaitFinished(tag="imported"):
                pass
            case JobRequest() | GetSchedulerStatus() if self._loaded_at is None:
                self._early.append(message)
            case JobRequest():
                self._on_request(message)
            case GetSchedulerStatus(reply_to=reply_to):
                _tell(reply_to, self.status())
            case SchedulerTick(generation=generation) if generation == self._generation:
                self._timer = None
                self._timer_at = None
                self._tick()
            case SchedulerTick():
                pass
            case JobSaved(token=token):
                self._on_saved(token)
            case JobDeleted(token=token):
                self._on_deleted(token)
            case OccurrenceClaimed():
                self._on_claimed(message)
            case OccurrenceSettled():
                pass
            case StoreFailed(token=token):
                self._on_store_failed(str(token), message.error)
            case WaitFinished(tag="run"):
                self._on_run_finished(message)
            case _:
                return super().receive(message)
        return None

    def status(self) -> SchedulerStatus:
        upcoming = [at for jid, at in self.next_at.items() if at is not None and self.jobs[jid].enabled]
        return SchedulerStatus(
            loaded=self._loaded_at is not None,
            jobs=len(self.jobs),
            enabled=sum(1 for j in self.jobs.values() if j.enabled),
            running=len(self._running),
            queued=len(self._queue),
            max_parallel=self.options.max_parallel,
            next_run_at=min(upcoming) if upcoming else None,
            fired=self.fired,
            missed=self.missed,
            interrupted=self.interrupted,
            last_lateness=self.lateness[-1] if self.lateness else None,
        )

    # -- load ---------------------------------------------------------------------------------

    def _on_load(self, finished: WaitFinished) -> None:
        if finished.status != "ok":
            raise RuntimeError(f"the scheduler could not load its jobs from {os.fspath(self.options.store_file)!r}: {finished.status} {finished.error}")
        snapshot, imported = finished.value
        now = self.options.clock()
        self._loaded_at = now
        self.runs = dict(snapshot.runs)
        self.last = dict(snapshot.latest)
        for occurrence in snapshot.open:
            self.interrupted += 1
            if self.last.get(occurrence.job_id) == occurrence:
                self.last[occurrence.job_id] = msgspec.structs.replace(
                    occurrence, status="interrupted", ended_at=now, detail="the server stopped during this run; it is not run again"
                )
            self.store.tell(
                SettleOccurrence(
                    job_id=occurrence.job_id,
                    at=occurrence.at,
                    status="interrupted",
                    ended_at=now,
                    detail="the server stopped during this run; it is not run again",
                    token=self._token(),
                    reply_to=self.actor_ref,
                )
            )
        for job in snapshot.jobs:
            self._install(job, last_at=snapshot.last[job.id].at if job.id in snapshot.last else None)
        if imported and not snapshot.jobs:
            for job in imported:
                token = self._token()
                self._imports.add(token)
                self._pending[token] = _Pending(reply_to=None, request_id="", kind="save", job=job)
                self.store.tell(SaveJob(job=job, token=token, reply_to=self.actor_ref))
            log.info("importing %d job(s) from Hermes's cron/jobs.json", len(imported))
        self._arm()
        early, self._early = self._early, []
        for message in early:
            self.receive(message)

    def _install(self, job: Job, *, last_at: float | None, now: float | None = None) -> None:
        """Put ``job`` in memory with its next occurrence (after ``last_at``, or from ``now``)."""
        self.jobs[job.id] = job
        try:
            schedule = schedule_of(job, default_zone=self.options.default_zone)
        except ScheduleError as exc:
            log.warning("job %s: its schedule no longer parses (%s); it will not run until edited", job.id, exc)
            self.schedules.pop(job.id, None)
            self.next_at[job.id] = None
            return
        self.schedules[job.id] = schedule
        if not job.enabled or (job.repeat is not None and self.runs.get(job.id, 0) >= job.repeat):
            self.next_at[job.id] = None
            return
        if now is not None and job.created_at < now - 1:
            # resumed: what fell due while it was paused is skipped, not caught up
            nxt = first_occurrence(schedule, job.created_at, max(now, last_at or now))
        else:
            nxt = first_occurrence(schedule, job.created_at, last_at)
        self.next_at[job.id] = nxt
        if nxt is not None:
            heapq.heappush(self._heap, (nxt, job.id))

    # -- timers -------------------------------------------------------------------------------

    def _arm(self) -> None:
        while self._heap and not self._valid(self._heap[0]):
            heapq.heappop(self._heap)
        if not self._heap:
            self._cancel_timer()
            return
        at = self._heap[0][0]
        if self._timer is not None and self._timer_at == at:
            return
        self._cancel_timer()
        self._generation += 1
        delay = min(MAX_SLEEP, max(0.0, at - self.options.clock()))
        self._timer = self.send_after(delay, SchedulerTick(generation=self._generation))
        self._timer_at = at

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self.cancel_wait(self._timer)
        self._timer = None
        self._timer_at = None

    def _valid(self, entry: tuple[float, str]) -> bool:
        at, job_id = entry
        job = self.jobs.get(job_id)
        return job is not None and job.enabled and self.next_at.get(job_id) == at

    def _tick(self) -> None:
        now = self.options.clock()
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if self._valid(entry):
                self._due(entry[1], entry[0], now)
        self._arm()

    def _due(self, job_id: str, at: float, now: float) -> None:
        job, schedule = self.jobs[job_id], self.schedules[job_id]
        late_start = self._loaded_at is not None and at < self._loaded_at and not self.options.catch_up_missed
        grace = 0.0 if late_start else grace_seconds(schedule, _utc(at))
        decision = decide(schedule, at, now, grace)
        if decision.missed is not None:
            self.missed += decision.missed.count
            occurrence = Occurrence(job_id=job_id, at=decision.missed.last, status="missed", claimed_at=now, ended_at=now, detail=decision.missed.describe())
            self._claim(occurrence, _Pending(reply_to=None, request_id="", kind="missed", job=job, at=decision.missed.last))
        nxt = decision.next_at
        if decision.fire is not None:
            self.fired += 1
            self.lateness.append(now - decision.fire)
            self.runs[job_id] = self.runs.get(job_id, 0) + 1
            if job.repeat is not None and self.runs[job_id] >= job.repeat:
                nxt = None
            sid = session_id_of(job_id, decision.fire, manual=False)
            occurrence = Occurrence(job_id=job_id, at=decision.fire, status="claimed", session_id=sid, claimed_at=now)
            self._claim(occurrence, _Pending(reply_to=None, request_id="", kind="fire", job=job, at=decision.fire))
        self.next_at[job_id] = nxt
        if nxt is not None:
            heapq.heappush(self._heap, (nxt, job_id))

    def _claim(self, occurrence: Occurrence, pending: _Pending) -> None:
        token = self._token()
        self._pending[token] = pending
        self.last[occurrence.job_id] = occurrence
        self.store.tell(ClaimOccurrence(occurrence=occurrence, token=token, reply_to=self.actor_ref))

    # -- store replies ------------------------------------------------------------------------

    def _on_claimed(self, claimed: OccurrenceClaimed) -> None:
        pending = self._pending.pop(claimed.token, None)
        if pending is None or pending.job is None:
            return
        if pending.kind == "missed":
            return
        if not claimed.won:
            log.warning("job %s: occurrence %s was claimed already; it is not run again", claimed.job_id, claimed.at)
            _tell(pending.reply_to, JobReply(request_id=pending.request_id, ok=False, status=409, error="this occurrence was claimed already"))
            return
        job = self.jobs.get(claimed.job_id, pending.job)
        sid = session_id_of(job.id, claimed.at, manual=pending.kind == "run")
        self._queue.append((job, claimed.at, sid))
        if pending.kind == "run":  # shown as the job's latest occurrence, as the store will read it back
            now = self.options.clock()
            self.last[job.id] = Occurrence(job_id=job.id, at=claimed.at, status="claimed", session_id=sid, claimed_at=now, manual=True)
            _tell(pending.reply_to, JobReply(request_id=pending.request_id, ok=True, jobs=(self._view(job),)))
        self._start_runs()

    def _on_saved(self, token: str) -> None:
        pending = self._pending.pop(token, None)
        if pending is None or pending.job is None:
            return
        job = pending.job
        previous = self.jobs.get(job.id)
        now = self.options.clock()
        last = self.last.get(job.id)
        if previous is None or previous.schedule != job.schedule or previous.timezone != job.timezone or not previous.enabled:
            self._install(job, last_at=last.at if last is not None else None, now=now)
        else:
            self.jobs[job.id] = job
            if not job.enabled:
                self.next_at[job.id] = None
        if token in self._imports:
            self._imports.discard(token)
            if not self._imports:
                self.start_wait(_mark_imported, self.options.home, tag="imported", timeout=10.0)
        self._arm()
        _tell(pending.reply_to, JobReply(request_id=pending.request_id, ok=True, status=201 if pending.kind == "create" else 200, jobs=(self._view(job),)))

    def _on_deleted(self, token: str) -> None:
        pending = self._pending.pop(token, None)
        if pending is None or pending.job is None:
            return
        job = pending.job
        self.jobs.pop(job.id, None)
        self.schedules.pop(job.id, None)
        self.next_at.pop(job.id, None)
        self._arm()
        _tell(pending.reply_to, JobReply(request_id=pending.request_id, ok=True, jobs=(self._view(job, removed=True),)))

    def _on_store_failed(self, token: str, error: str) -> None:
        pending = self._pending.pop(token, None)
        if pending is None:
            return
        if pending.kind in ("fire", "missed"):
            log.error("job %s: the occurrence at %s could not be recorded, so it does not run: %s", pending.job.id if pending.job else "?", pending.at, error)
            return
        _tell(pending.reply_to, JobReply(request_id=pending.request_id, ok=False, status=503, error=f"the job was not saved: {error}"))

    # -- runs ---------------------------------------------------------------------------------

    def _start_runs(self) -> None:
        while self._queue and len(self._running) < self.options.max_parallel:
            job, at, sid = self._queue.popleft()
            handle = self.start_wait(run_job, self.env, job, at, sid, tag="run", timeout=job.deadline + self.options.run_slack)
            self._running[handle.wait_id] = (job.id, at, sid)

    def _on_run_finished(self, finished: WaitFinished) -> None:
        entry = self._running.pop(finished.wait_id, None)
        if entry is None:
            return
        job_id, at, sid = entry
        if finished.status == "ok" and isinstance(finished.value, RunOutcome):
            outcome: RunOutcome = finished.value
        else:
            outcome = RunOutcome(status="failed", detail=f"the run ended {finished.status}: {finished.error}"[:500], delivered="")
        now = self.options.clock()
        self.store.tell(
            SettleOccurrence(
                job_id=job_id,
                at=at,
                status=outcome.status,
                ended_at=now,
                detail=outcome.detail,
                delivered=outcome.delivered,
                token=self._token(),
                reply_to=self.actor_ref,
            )
        )
        last = self.last.get(job_id)
        if last is not None and last.at == at:
            self.last[job_id] = Occurrence(
                job_id=job_id,
                at=at,
                status=outcome.status,
                session_id=sid,
                claimed_at=last.claimed_at,
                ended_at=now,
                detail=outcome.detail,
                delivered=outcome.delivered,
            )
        log.info("job %s: occurrence %s %s (%s)", job_id, at, outcome.status, outcome.delivered or outcome.detail[:80])
        self._start_runs()

    # -- requests -----------------------------------------------------------------------------

    def _on_request(self, request: JobRequest) -> None:
        try:
            self._handle(request)
        except JobError as exc:
            _tell(request.reply_to, JobReply(request_id=request.request_id, ok=False, status=400, error=str(exc)))

    def _job(self, request: JobRequest) -> Job:
        job = self.jobs.get(request.job_id)
        if job is None:
            raise _NotFound(request.job_id)
        return job

    def _handle(self, request: JobRequest) -> None:
        now = self.options.clock()
        reply = request.reply_to
        pending = functools_partial_pending(reply, request)
        try:
            match request.action:
                case "list":
                    views = tuple(self._view(j) for j in sorted(self.jobs.values(), key=lambda j: (j.created_at, j.id)))
                    _tell(reply, JobReply(request_id=request.request_id, ok=True, jobs=views))
                case "get":
                    _tell(reply, JobReply(request_id=request.request_id, ok=True, jobs=(self._view(self._job(request)),)))
                case "create":
                    fields = dict(request.fields)
                    origin = str(fields.pop("origin", "") or "")
                    source = str(fields.pop("source", "") or "api")
                    if fields.get("id") is not None and str(fields["id"]) in self.jobs:
                        raise JobError(f"a job with id {fields['id']!r} exists already")
                    job = create_job(fields, now=now, platforms=self.options.platforms, origin=origin, source=source, default_zone=self.options.default_zone)
                    self._save(job, pending("create", job))
                case "update":
                    job = apply_fields(self._job(request), request.fields, now=now, platforms=self.options.platforms, default_zone=self.options.default_zone)
                    self._save(job, pending("update", job))
                case "pause" | "resume":
                    job = self._job(request)
                    changed = apply_fields(
                        job, {"enabled": request.action == "resume"}, now=now, platforms=self.options.platforms, default_zone=self.options.default_zone
                    )
                    self._save(changed, pending(request.action, changed))
                case "remove":
                    job = self._job(request)
                    token = self._token()
                    self._pending[token] = pending("remove", job)
                    self.store.tell(DeleteJob(job_id=job.id, token=token, reply_to=self.actor_ref))
                case "run":
                    job = self._job(request)
                    sid = session_id_of(job.id, now, manual=True)
                    occurrence = Occurrence(job_id=job.id, at=now, status="claimed", session_id=sid, claimed_at=now, manual=True)
                    token = self._token()
                    p = pending("run", job)
                    p.at = now
                    self._pending[token] = p
                    self.store.tell(ClaimOccurrence(occurrence=occurrence, token=token, reply_to=self.actor_ref))
        except _NotFound as exc:
            _tell(reply, JobReply(request_id=request.request_id, ok=False, status=404, error=f"no job {exc.args[0]!r}; list the jobs to see their ids"))

    def _save(self, job: Job, pending: _Pending) -> None:
        token = self._token()
        self._pending[token] = pending
        self.store.tell(SaveJob(job=job, token=token, reply_to=self.actor_ref))

    def _view(self, job: Job, *, removed: bool = False) -> JobView:
        running = any(jid == job.id for jid, _, _ in self._running.values())
        nxt = None if removed else self.next_at.get(job.id)
        state: JobState = "running" if running else "paused" if not job.enabled else "finished" if nxt is None else "scheduled"
        schedule = self.schedules.get(job.id)
        return JobView(
            job=job,
            state=state,
            next_run_at=nxt,
            runs=self.runs.get(job.id, 0),
            last=self.last.get(job.id),
            schedule_display=describe(schedule) if schedule is not None else job.schedule,
        )

    def _token(self) -> str:
        return f"s{next(self._tokens)}"


class _NotFound(Exception):
    pass


def functools_partial_pending(reply_to: Any, request: JobRequest) -> Callable[[str, Job], _Pending]:
    def make(kind: str, job: Job) -> _Pending:
        return _Pending(reply_to=reply_to, request_id=request.request_id, kind=kind, job=job)

    return make


def _utc(ts: float) -> Any:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _tell(reply_to: Any, message: Message) -> None:
    if reply_to is None:
        return
    try:
        reply_to.tell(message)
    except Exception as exc:
        log.debug("could not deliver %s to %r: %s", type(message).__name__, reply_to, exc)


async def _load(store_file: str, home: Path) -> tuple[Any, list[Job]]:
    import trio

    from actors.store._jobs_rows import read_jobs

    def read() -> tuple[Any, list[Job]]:
        return read_jobs(store_file), import_hermes_jobs(home)

    return await trio.to_thread.run_sync(read)


async def _mark_imported(home: Path) -> None:
    import trio

    def mark() -> None:
        marker = home / "cron" / ".imported"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("Hermes's cron/jobs.json was imported into state.db; it is not read again.\n")

    await trio.to_thread.run_sync(mark)
