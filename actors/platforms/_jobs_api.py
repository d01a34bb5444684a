"""``/api/jobs``: scheduled jobs over HTTP (Hermes's routes: list, create, get, patch, delete, pause, resume, run).

Each route sends one ``JobRequest`` to ``/scheduler`` and answers with its ``JobReply``: a
change is answered once the store has committed it. Bodies use Hermes's field names
(``name``, ``prompt``, ``schedule``, ``deliver``, ...); a job made here delivers ``local``
unless told otherwise (an API client has no chat to return to).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import trio

from protocols._scheduler import JobAction, JobReply, JobRequest, JobView, SchedulerStatus

from ._app import ApiContext
from ._asgi import HttpError, Request, Send, send_json
from ._bridge import TrioSubscriber

REPLY_TIMEOUT = 15.0


def _iso(ts: float | None) -> str | None:
    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")


def job_json(view: JobView) -> dict[str, Any]:
    """A job as the API shows it."""
    job, last = view.job, view.last
    return {
        "id": job.id,
        "name": job.name,
        "prompt": job.prompt,
        "schedule": job.schedule,
        "schedule_display": view.schedule_display,
        "timezone": job.timezone,
        "enabled": job.enabled,
        "state": view.state,
        "deliver": job.deliver,
        "origin": job.origin or None,
        "model": job.model or None,
        "toolsets": list(job.toolsets),
        "skills": list(job.skills),
        "script": job.script or None,
        "repeat": {"times": job.repeat, "completed": view.runs},
        "deadline": job.deadline,
        "created_at": _iso(job.created_at),
        "next_run_at": _iso(view.next_run_at),
        "last_run_at": _iso(last.at) if last is not None else None,
        "last_status": last.status if last is not None else None,
        "last_error": last.detail if last is not None and last.status in ("failed", "missed", "interrupted") else None,
        "last_detail": last.detail if last is not None and last.detail else None,
        "last_delivery": last.delivered if last is not None and last.delivered else None,
        "last_session_id": last.session_id if last is not None and last.session_id else None,
    }


async def ask_scheduler(ctx: ApiContext, action: JobAction, job_id: str = "", fields: dict[str, Any] | None = None) -> JobReply:
    """Send one request to ``/scheduler`` and wait for its reply (with a deadline)."""
    from actors.scheduler import SCHEDULER_PATH

    try:
        address = ctx.registry.lookup(SCHEDULER_PATH)
    except LookupError:
        # a server built without the scheduler has no jobs to show: the routes do not exist here
        raise HttpError(404, "this server runs no scheduler; jobs live in 'hermes serve'", code="scheduler_unavailable") from None
    reader = TrioSubscriber(ctx.reactor)
    address.tell(JobRequest(action=action, job_id=job_id, fields=fields or {}, reply_to=reader))
    with trio.move_on_after(REPLY_TIMEOUT):
        reply = await reader.get()
        if isinstance(reply, JobReply):
            return reply
    raise HttpError(503, f"the scheduler did not answer within {REPLY_TIMEOUT:g} s; retry shortly", type="server_error", code="scheduler_busy")


async def scheduler_health(ctx: ApiContext) -> dict[str, Any] | None:
    """``/health/detailed``'s ``scheduler``: jobs, next due, running, last lateness (None: no scheduler here)."""
    from actors.scheduler import SCHEDULER_PATH, GetSchedulerStatus

    try:
        address = ctx.registry.lookup(SCHEDULER_PATH)
    except LookupError:
        return None
    reader = TrioSubscriber(ctx.reactor)
    address.tell(GetSchedulerStatus(reply_to=reader))
    with trio.move_on_after(REPLY_TIMEOUT):
        status = await reader.get()
        if isinstance(status, SchedulerStatus):
            return {
                "loaded": status.loaded,
                "jobs": status.jobs,
                "enabled": status.enabled,
                "running": status.running,
                "queued": status.queued,
                "max_parallel": status.max_parallel,
                "next_run_at": _iso(status.next_run_at),
                "fired": status.fired,
                "missed": status.missed,
                "interrupted": status.interrupted,
                "last_lateness_ms": None if status.last_lateness is None else round(status.last_lateness * 1000, 1),
            }
    return {"loaded": False, "error": f"the scheduler did not answer within {REPLY_TIMEOUT:g} s"}


def _check(reply: JobReply) -> JobReply:
    if not reply.ok:
        code = {400: "invalid_job", 404: "job_not_found", 409: "conflict"}.get(reply.status, "scheduler_error")
        raise HttpError(reply.status, reply.error, type="invalid_request_error" if reply.status < 500 else "server_error", code=code)
    return reply


async def list_jobs(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = _check(await ask_scheduler(ctx, "list"))
    await send_json(send, 200, {"jobs": [job_json(v) for v in reply.jobs]})


async def create_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json()
    fields = {k: v for k, v in body.items() if k not in ("origin", "source")}
    reply = _check(await ask_scheduler(ctx, "create", fields={**fields, "source": "api"}))
    await send_json(send, 201, {"job": job_json(reply.jobs[0])})


async def get_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = _check(await ask_scheduler(ctx, "get", params["job_id"]))
    await send_json(send, 200, {"job": job_json(reply.jobs[0])})


async def patch_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    body = await request.json()
    reply = _check(await ask_scheduler(ctx, "update", params["job_id"], fields=body))
    await send_json(send, 200, {"job": job_json(reply.jobs[0])})


async def delete_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    _check(await ask_scheduler(ctx, "remove", params["job_id"]))
    await send_json(send, 200, {"id": params["job_id"], "deleted": True})


async def pause_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = _check(await ask_scheduler(ctx, "pause", params["job_id"]))
    await send_json(send, 200, {"job": job_json(reply.jobs[0])})


async def resume_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = _check(await ask_scheduler(ctx, "resume", params["job_id"]))
    await send_json(send, 200, {"job": job_json(reply.jobs[0])})


async def run_job(ctx: ApiContext, request: Request, send: Send, params: dict[str, str]) -> None:
    reply = _check(await ask_scheduler(ctx, "run", params["job_id"]))
    await send_json(send, 202, {"job": job_json(reply.jobs[0]), "status": "started"})
