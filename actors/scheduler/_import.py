"""The one-time import of Hermes's ``HERMES_HOME/cron/jobs.json`` (read in a worker thread).

Hermes keeps its jobs in that file; this build keeps them in the store. When the store has no
jobs and the marker ``cron/.imported`` is absent, each job of the file is converted (its
schedule back to the text a user writes, its origin chat to ``<platform>:<chat_id>``) and
saved; the marker is written once every job is committed. The file itself is left as it was.
A job that cannot be converted is skipped with a warning naming it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from protocols._scheduler import Job

log = logging.getLogger(__name__)


def _schedule_text(raw: Any) -> str | None:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict):
        return None
    kind = raw.get("kind")
    if kind == "cron" and isinstance(raw.get("expr"), str):
        return str(raw["expr"])
    if kind == "interval" and isinstance(raw.get("minutes"), int | float):
        return f"every {int(raw['minutes'])}m"
    if kind == "once" and isinstance(raw.get("run_at"), str):
        return str(raw["run_at"])
    display = raw.get("display")
    return display if isinstance(display, str) else None


def _origin(raw: Any) -> str:
    if isinstance(raw, dict) and raw.get("platform") and raw.get("chat_id") is not None:
        return f"{raw['platform']}:{raw['chat_id']}"
    return ""


def _created(raw: Any) -> float:
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        import datetime as dt

        try:
            return dt.datetime.fromisoformat(raw).timestamp()
        except ValueError:
            pass
    return time.time()


def convert(entry: dict[str, Any]) -> Job | None:
    """One Hermes job as ours (None: it lacks an id, a prompt or a schedule)."""
    schedule = _schedule_text(entry.get("schedule"))
    job_id, prompt = entry.get("id"), entry.get("prompt")
    if not (isinstance(job_id, str) and job_id and isinstance(prompt, str) and prompt and schedule):
        return None
    repeat = entry.get("repeat")
    times = repeat.get("times") if isinstance(repeat, dict) else repeat
    skills = entry.get("skills") or ([entry["skill"]] if isinstance(entry.get("skill"), str) else [])
    return Job(
        id=job_id,
        name=str(entry.get("name") or prompt[:40]),
        prompt=prompt,
        schedule=schedule,
        created_at=_created(entry.get("created_at")),
        enabled=bool(entry.get("enabled", True)) and entry.get("state") != "paused",
        deliver=str(entry.get("deliver") or "local"),
        origin=_origin(entry.get("origin")),
        model=str(entry.get("model") or ""),
        skills=tuple(str(s) for s in skills if isinstance(s, str)),
        script=str(entry.get("script") or ""),
        repeat=int(times) if isinstance(times, int) and times > 0 else None,
        source="hermes-jobs.json",
    )


def import_hermes_jobs(home: Path) -> list[Job]:
    """The jobs of ``home/cron/jobs.json`` not imported yet (empty when there is none, or already imported)."""
    path = home / "cron" / "jobs.json"
    if (home / "cron" / ".imported").exists() or not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("%s could not be read (%s); its jobs are not imported", path, exc)
        return []
    entries = data.get("jobs", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    jobs = []
    for entry in entries:
        job = convert(entry) if isinstance(entry, dict) else None
        if job is None:
            log.warning("%s: a job without an id, a prompt or a schedule was skipped: %.80r", path, entry)
        else:
            jobs.append(job)
    return jobs
