"""One run of a job: a fresh session ``cron:<job>:<occurrence>``, its answer, its delivery.

Runs as a reactor wait the scheduler started (after the claim committed), under the job's
deadline (the pre-run script and the skills' reading included, see ``_prerun`` / ``_prompt``): the session's turn is cancelled when the deadline passes or the wait is cancelled,
so a stuck run holds its slot until its deadline and no longer, and never delays another job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import trio

from actors import Address, Reactor, Registry
from protocols import SessionInbox, StartTurn, SwitchModel, TurnCompleted, TurnFailed
from protocols._scheduler import Job, OccurrenceStatus

from ._delivery import Senders, deliver, is_silent, parse_target, resolve, save_output
from ._prerun import DEFAULT_TIMEOUT, ScriptResult, run_script
from ._prompt import load_skills, run_prompt


@dataclasses.dataclass(frozen=True, slots=True)
class RunEnv:
    """What every run of a scheduler needs from the runtime."""

    registry: Registry
    reactor: Reactor
    hubs: object
    """The ``HubRegistry`` of the sessions (``.get(session_id)`` gives a hub)."""
    home: Path
    tool_names: frozenset[str]
    max_iterations: int = 90
    senders: Senders = dataclasses.field(default_factory=Senders)
    resolve_toolsets: object = None
    """``actors.tools.resolve_toolsets`` (a job's toolsets to tool names); None: all tools."""
    default_model: str = ""
    """``cron.model``: the model of runs whose job names none (empty: the server's)."""
    script_timeout: float = DEFAULT_TIMEOUT
    """Seconds a job's pre-run script may run (``HERMES_CRON_SCRIPT_TIMEOUT``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunOutcome:
    status: OccurrenceStatus
    detail: str
    delivered: str


def session_id_of(job_id: str, at: float, *, manual: bool) -> str:
    """``cron:<job>:<occurrence>``: the occurrence as a UTC stamp (a manual run marked as such)."""
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"cron:{job_id}:{stamp}" + (f"-manual{int(at * 1000) % 1000:03d}" if manual else "")


def _blocked(env: RunEnv, job: Job) -> frozenset[str]:
    from actors.agent._delegation import BLOCKED_IN_CHILDREN

    blocked = set(BLOCKED_IN_CHILDREN) | {"cronjob", "clarify"}  # nobody is there to answer; no job makes jobs
    if job.toolsets and callable(env.resolve_toolsets):
        allowed = set(env.resolve_toolsets(list(job.toolsets)))
        blocked |= set(env.tool_names) - allowed
    return frozenset(blocked)


async def _prepare(env: RunEnv, job: Job, at: float) -> tuple[str, list[str]]:
    """The run's message (skills read, the pre-run script run) and the notes the occurrence keeps."""
    notes: list[str] = []
    loaded, missing = await trio.to_thread.run_sync(load_skills, env.home, job.skills) if job.skills else ([], [])
    if missing:
        notes.append("skill(s) not found, skipped: " + "; ".join(f"{name}: {why}" for name, why in missing))
    script: ScriptResult | None = None
    if job.script:
        script = await run_script(env.home, job.script, timeout=env.script_timeout)
        if script.note:
            notes.append(script.note)
    return run_prompt(job, at, skills=loaded, missing=[name for name, _ in missing], script=script), notes


async def _turn(env: RunEnv, job: Job, session_id: str, text: str) -> tuple[OccurrenceStatus, str]:
    from actors.agent import SESSIONS_PATH
    from actors.agent._delegation import SessionOverrides
    from actors.agent._reader import run_turn
    from supervisor import start_child

    overrides = SessionOverrides(parent_session_id=None, depth=0, blocked_tools=_blocked(env, job), max_iterations=env.max_iterations, source="cron")
    address: Address[SessionInbox] = start_child(env.registry, env.registry.lookup(SESSIONS_PATH), session_id, session_id, overrides)
    hub = env.hubs.get(session_id)  # type: ignore[attr-defined]
    model = job.model or env.default_model
    start = StartTurn(text=text, turn_id=f"{session_id}.run", policy="reject")
    before = (SwitchModel(model=model),) if model else ()
    end = await run_turn(env.reactor, hub, address, start, before=before, cancel_reason="the job's deadline passed, or the scheduler stopped")
    if isinstance(end, TurnCompleted):
        return "completed", end.text
    return "failed", end.error if isinstance(end, TurnFailed) else end.reason


async def run_job(env: RunEnv, job: Job, at: float, session_id: str) -> RunOutcome:
    """Run one occurrence to its end within ``job.deadline``; deliver a non-silent answer."""
    notes: list[str] = []
    with trio.move_on_after(job.deadline) as scope:
        message, notes = await _prepare(env, job, at)
        status, text = await _turn(env, job, session_id, message)
    noted = "".join(f"[{note}] " for note in notes)
    if scope.cancelled_caught:
        return RunOutcome(status="failed", detail=f"{noted}the run passed its deadline of {job.deadline:g} s and was cancelled", delivered="")
    if status != "completed":
        return RunOutcome(status=status, detail=(noted + text)[:1000], delivered="")
    if is_silent(text):
        return RunOutcome(status="silent", detail=f"{noted}[SILENT]", delivered="not delivered: the answer was [SILENT]")
    path = await save_output(env.home, job.id, job.name, at, text)
    target = resolve(parse_target(job.deliver), job.origin)
    payload: Mapping[str, object] = {"job_id": job.id, "job_name": job.name, "occurrence": at, "session_id": session_id, "answer": text}
    with trio.move_on_after(120.0):  # delivery has its own deadline, past the run's
        delivered = await deliver(target, env.senders, payload)
        return RunOutcome(status="completed", detail=(noted + text)[:1000], delivered=f"{delivered}; saved {path}")
    return RunOutcome(status="completed", detail=(noted + text)[:1000], delivered=f"failed: {target.describe()}: delivery took over 120 s; saved {path}")
