"""What a run asks the model (pure), and the job's skills read from the skill library.

As Hermes builds a cron run's message: the pre-run script's output (or its error) first, as
context; then the scheduled-run header; then each named skill's SKILL.md in full, announced as
invoked; then the job's prompt. A skill that does not exist is skipped: the message says so
and asks the model to begin its answer with a notice, and the occurrence records it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from protocols._scheduler import Job

from ._prerun import ScriptResult


def load_skills(home: Path, names: Sequence[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(loaded, missing)``: each name's SKILL.md text, or why it could not be read. File I/O: call from a thread."""
    from actors.memory import SkillError, SkillLibrary

    library = SkillLibrary(home)
    loaded: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    for name in names:
        try:
            loaded.append((name, library.read(name).strip()))
        except SkillError as exc:
            missing.append((name, str(exc)))
    return loaded, missing


def run_prompt(job: Job, at: float, *, skills: Sequence[tuple[str, str]] = (), missing: Sequence[str] = (), script: ScriptResult | None = None) -> str:
    """The user message of one run of ``job`` at ``at``."""
    when = dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="seconds")
    parts: list[str] = []
    if script is not None:
        if not script.ok:
            parts.append(f"## Script Error\nThe job's pre-run script failed; say so in your answer.\n\n```\n{script.output}\n```")
        elif script.output:
            parts.append(f"## Script Output\nA pre-run script collected this data; use it as context.\n\n```\n{script.output}\n```")
        else:
            parts.append("[The pre-run script ran and printed nothing.]")
    parts.append(
        f"[Scheduled job {job.name!r} ({job.id}), occurrence {when}. Nobody is watching this run: do the task and give the result. "
        "If there is nothing worth reporting, answer exactly [SILENT].]"
    )
    if missing:
        names = ", ".join(missing)
        parts.append(
            f"[The skill(s) {names} named by this job were not found and were skipped. Begin your answer with a short notice: 'Skill(s) not found: {names}'.]"
        )
    for name, text in skills:
        parts.append(f"[The job invokes the skill {name!r}: follow its instructions, given in full below.]\n\n{text}")
    parts.append(f"The job's instruction: {job.prompt}" if skills else job.prompt)
    return "\n\n".join(parts)
