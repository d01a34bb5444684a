"""The ``cronjob`` tool (toolset "cronjob"): the agent schedules, lists and changes jobs.

Each call is one ``JobRequest`` to ``/scheduler`` (answered once the store committed a change).
A job made here remembers this session as its origin, so ``deliver: origin`` (the default here)
brings each answer back to this conversation's stream.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput
from protocols._scheduler import JobReply, JobRequest, JobView

from ._registry import tool

REPLY_TIMEOUT = 15.0

DESCRIPTION = """\
Schedule tasks that run later or repeatedly, each in a fresh session with no memory of this
chat (write a self-contained prompt). Actions: 'create' (prompt, schedule; optional name,
deliver, timezone, repeat, model, skills, script), 'list', 'update' (job_id and the fields to change),
'pause', 'resume', 'remove', 'run' (run it now), each but create/list with job_id.
schedule: a duration ('30m', once), 'every 2h', a cron expression ('0 8 * * 1-5') or an ISO
time ('2026-05-01T08:00'). deliver: 'origin' (back to this conversation, the default),
'local' (a file only), '<platform>:<chat_id>'. A run whose answer is exactly [SILENT] delivers
nothing."""


class CronjobArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Annotated[Literal["create", "list", "update", "pause", "resume", "remove", "run"], msgspec.Meta(description="What to do.")]
    job_id: Annotated[str | None, msgspec.Meta(description="The job (all actions but create and list).")] = None
    prompt: Annotated[str | None, msgspec.Meta(description="create/update: the self-contained task.")] = None
    schedule: Annotated[str | None, msgspec.Meta(description="create/update: when it runs.")] = None
    name: Annotated[str | None, msgspec.Meta(description="A short name.")] = None
    deliver: Annotated[str | None, msgspec.Meta(description="Where answers go.")] = None
    timezone: Annotated[str | None, msgspec.Meta(description="IANA zone of a cron expression or ISO time.")] = None
    repeat: Annotated[int | None, msgspec.Meta(description="How many runs in all (none: no limit).")] = None
    model: Annotated[str | None, msgspec.Meta(description="The model of its runs.")] = None
    skills: Annotated[list[str] | None, msgspec.Meta(description="Skills whose instructions each run follows (loaded in full).")] = None
    script: Annotated[
        str | None, msgspec.Meta(description="A script under HERMES_HOME/scripts/ run before each run; its output is the run's context ('' removes it).")
    ] = None


def _line(view: JobView) -> str:
    nxt = dt.datetime.fromtimestamp(view.next_run_at, dt.UTC).isoformat(timespec="minutes") if view.next_run_at else "-"
    last = f", last {view.last.status}" if view.last is not None else ""
    return f"{view.job.id}  {view.job.name!r}  {view.schedule_display}  {view.state}  next {nxt}  deliver {view.job.deliver}{last}"


@tool(name="cronjob", toolset="cronjob", description=DESCRIPTION)
async def cronjob(context: ToolContext, args: CronjobArgs) -> ToolOutput:
    from actors.agent._reader import TrioSubscriber
    from actors.scheduler import SCHEDULER_PATH

    delegation = context.delegation
    if delegation is None:
        return ToolOutput(content="[error] cronjob: scheduling is not available in this session (no runtime)", ok=False)
    try:
        address = delegation.registry.lookup(SCHEDULER_PATH)
    except LookupError:
        return ToolOutput(content="[error] cronjob: this process runs no scheduler; jobs run under 'hermes serve'", ok=False)
    fields: dict[str, Any] = {
        k: v for k in ("prompt", "schedule", "name", "deliver", "timezone", "repeat", "model", "skills", "script") if (v := getattr(args, k)) is not None
    }
    if args.action == "create":
        fields = {"deliver": "origin", **fields, "origin": context.session_id, "source": "tool"}
    elif args.action != "list" and not args.job_id:
        return ToolOutput(content=f"[error] cronjob: {args.action} needs 'job_id' (list the jobs to see their ids)", ok=False)
    action = {"remove": "remove", "run": "run"}.get(args.action, args.action)
    reader = TrioSubscriber(delegation.reactor)
    address.tell(JobRequest(action=action, job_id=args.job_id or "", fields=fields, reply_to=reader))  # type: ignore[arg-type]
    with trio.move_on_after(REPLY_TIMEOUT):
        reply = await reader.get()
        if isinstance(reply, JobReply):
            if not reply.ok:
                return ToolOutput(content=f"[error] cronjob: {reply.error}", ok=False)
            if args.action == "list":
                return ToolOutput(content="\n".join(_line(v) for v in reply.jobs) or "No scheduled jobs.")
            verb = {"create": "created", "update": "updated", "pause": "paused", "resume": "resumed", "remove": "removed", "run": "started"}[args.action]
            return ToolOutput(content=f"Job {verb}: {_line(reply.jobs[0])}")
    return ToolOutput(content=f"[error] cronjob: the scheduler did not answer within {REPLY_TIMEOUT:g} s; try again", ok=False)
