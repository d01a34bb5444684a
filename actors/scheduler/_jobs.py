"""Making and changing a job from what a surface sent (pure): every field checked, one clear error.

The API, the ``cronjob`` tool and ``hermes cron`` send the same field names (Hermes's):
``name``, ``prompt``, ``schedule``, ``timezone``, ``deliver``, ``model``, ``toolsets``,
``skills``, ``script``, ``repeat``, ``deadline``, ``enabled``.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from typing import Any

import msgspec

from protocols._scheduler import Job

from ._delivery import parse_target
from ._schedule import Once, Schedule, ScheduleError, parse_schedule

EDITABLE = frozenset({"name", "prompt", "schedule", "timezone", "deliver", "model", "toolsets", "skills", "script", "repeat", "deadline", "enabled"})
MAX_DEADLINE = 24 * 3600.0


class JobError(ValueError):
    """A job's fields are wrong; the message says which and what is allowed."""


def new_job_id() -> str:
    return secrets.token_hex(6)


def schedule_of(job: Job, *, default_zone: str = "") -> Schedule:
    """The parsed schedule of a stored job (its zone, else ``default_zone``)."""
    created = dt.datetime.fromtimestamp(job.created_at, dt.UTC)
    return parse_schedule(job.schedule, created=created, zone=job.timezone or default_zone)


def _text(fields: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = fields.get(key)
    if value is None:
        if required:
            raise JobError(f"'{key}' is required")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise JobError(f"'{key}' must be a non-empty string")
    return value


def _names(fields: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise JobError(f"'{key}' must be a list of names")
    return tuple(value)


def apply_fields(job: Job, fields: Mapping[str, Any], *, now: float, platforms: frozenset[str], default_zone: str = "") -> Job:
    """``job`` with ``fields`` applied and the result checked.

    Raises:
        JobError: an unknown field, a bad value, a schedule that is not one, a target not configured.
    """
    unknown = sorted(set(fields) - EDITABLE - {"id"})
    if unknown:
        raise JobError(f"unknown field(s) {', '.join(unknown)}; a job has {', '.join(sorted(EDITABLE))}")
    changes: dict[str, Any] = {}
    for key in ("name", "prompt", "schedule", "timezone", "deliver", "model"):
        value = _text(fields, key, required=key in ("prompt", "schedule") and key in fields)
        if value is not None:
            changes[key] = value.strip() if key != "prompt" else value
    if "script" in fields:  # empty or null: no script
        script = fields["script"]
        if script is not None and not isinstance(script, str):
            raise JobError("'script' must be the name of a script under HERMES_HOME/scripts/ (or empty: none)")
        changes["script"] = (script or "").strip()
    for key in ("toolsets", "skills"):
        names = _names(fields, key)
        if names is not None:
            changes[key] = names
    if "repeat" in fields:
        repeat = fields["repeat"]
        if repeat is not None and (not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1):
            raise JobError("'repeat' must be a whole number of runs, at least 1 (or null: no limit)")
        changes["repeat"] = repeat
    if "deadline" in fields:
        deadline = fields["deadline"]
        if not isinstance(deadline, int | float) or isinstance(deadline, bool) or not 0 < deadline <= MAX_DEADLINE:
            raise JobError(f"'deadline' must be seconds, more than 0 and at most {MAX_DEADLINE:g}")
        changes["deadline"] = float(deadline)
    if "enabled" in fields:
        if not isinstance(fields["enabled"], bool):
            raise JobError("'enabled' must be true or false")
        changes["enabled"] = fields["enabled"]
    if changes.get("schedule", job.schedule) != job.schedule:
        changes["created_at"] = now  # a new schedule counts from now ("30m" is 30 minutes from the edit)
    updated = msgspec.structs.replace(job, **changes)
    if not updated.prompt.strip():
        raise JobError("'prompt' is required: what the agent is asked at each run")
    if not updated.name:
        updated = msgspec.structs.replace(updated, name=updated.prompt.strip().splitlines()[0][:40])
    try:
        schedule = schedule_of(updated, default_zone=default_zone)
    except ScheduleError as exc:
        raise JobError(str(exc)) from exc
    if updated.schedule != job.schedule and isinstance(schedule, Once) and schedule.at.timestamp() <= now:
        raise JobError(f"{updated.schedule!r} is in the past ({schedule.at.isoformat()}); give a future time")
    try:
        target = parse_target(updated.deliver)
    except ValueError as exc:
        raise JobError(str(exc)) from exc
    if target.platform and target.platform not in platforms:
        configured = ", ".join(sorted(platforms)) or "none"
        raise JobError(f"deliver: platform {target.platform!r} is not configured (configured under 'platforms:': {configured}); use 'local' or 'origin'")
    if target.kind == "origin" and not updated.origin:
        raise JobError("deliver 'origin' needs a job created from a session or chat; use 'local' or '<platform>:<chat_id>'")
    return updated


def create_job(fields: Mapping[str, Any], *, now: float, platforms: frozenset[str], origin: str = "", source: str = "api", default_zone: str = "") -> Job:
    """A new job from ``fields`` (checked: see :func:`apply_fields`)."""
    if not isinstance(fields.get("schedule"), str):
        raise JobError("'schedule' is required: a duration ('30m'), 'every 2h', a cron expression ('0 8 * * *') or an ISO time")
    blank = Job(id=str(fields.get("id") or new_job_id()), name="", prompt="", schedule="", created_at=now, origin=origin, source=source)
    deliver = fields.get("deliver") or ("origin" if origin else "local")
    return apply_fields(blank, {**{k: v for k, v in fields.items() if k != "id"}, "deliver": deliver}, now=now, platforms=platforms, default_zone=default_zone)
