"""Consent for shell hooks: each (event, command) pair is run only once a person said yes.

The answers live in ``HERMES_HOME/shell-hooks-allowlist.json``, keyed by the exact command
text (editing the script does not void a yes; ``hermes hooks doctor`` shows the edit by the
script's modification time, recorded with the yes). Three bypasses accept every hook without
asking: ``--accept-hooks``, ``HERMES_ACCEPT_HOOKS=1``, ``hooks_auto_accept: true``. Without a
terminal and without a bypass, a hook not yet allowed stays unregistered and is reported.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from actors._atomic import write_atomic

from ._shell import ShellHook

ALLOWLIST = "shell-hooks-allowlist.json"

Verdict = Literal["allowed", "ask", "refused"]


@dataclasses.dataclass(frozen=True, slots=True)
class Approval:
    event: str
    command: str
    approved_at: float
    script_mtime: float | None
    """The script's modification time when the yes was given (None: no script file)."""


def decide(allowed: bool, bypass: bool, tty: bool) -> Verdict:
    """Whether a configured hook runs: allowed already or bypassed; asked on a terminal; else refused."""
    if allowed or bypass:
        return "allowed"
    return "ask" if tty else "refused"


def bypass_source(flag: bool, env: Mapping[str, str], auto_accept: bool) -> str | None:
    """Which bypass accepts every hook (for the start-up line), or None."""
    if flag:
        return "--accept-hooks"
    if env.get("HERMES_ACCEPT_HOOKS", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HERMES_ACCEPT_HOOKS=1"
    if auto_accept:
        return "hooks_auto_accept: true"
    return None


def script_of(hook: ShellHook) -> Path | None:
    """The file the command runs, when its first word is a path."""
    first = hook.argv[0] if hook.argv else ""
    return Path(first) if os.sep in first else None


def script_mtime(hook: ShellHook) -> float | None:
    path = script_of(hook)
    try:
        return path.stat().st_mtime if path is not None else None
    except OSError:
        return None


def load_approvals(home: Path) -> list[Approval]:
    """The allowlist; a missing or unreadable file allows nothing (never raises)."""
    try:
        data = json.loads((home / ALLOWLIST).read_text())
    except (OSError, ValueError):
        return []
    approvals = []
    for item in data.get("approvals", []) if isinstance(data, dict) else []:
        if isinstance(item, dict) and isinstance(item.get("event"), str) and isinstance(item.get("command"), str):
            mtime = item.get("script_mtime")
            approvals.append(
                Approval(item["event"], item["command"], float(item.get("approved_at") or 0), float(mtime) if isinstance(mtime, int | float) else None)
            )
    return approvals


def find(approvals: list[Approval], hook: ShellHook) -> Approval | None:
    return next((a for a in approvals if a.event == hook.event and a.command == hook.command), None)


def save_approvals(home: Path, approvals: list[Approval]) -> None:
    body = {"approvals": [dataclasses.asdict(a) for a in approvals]}
    write_atomic(home / ALLOWLIST, (json.dumps(body, indent=2) + "\n").encode(), new_mode=0o600)


def approve(home: Path, hooks: list[ShellHook]) -> None:
    """Record a yes for each of ``hooks`` (replacing an older yes for the same pair)."""
    approvals = load_approvals(home)
    for hook in hooks:
        approvals = [a for a in approvals if (a.event, a.command) != (hook.event, hook.command)]
        approvals.append(Approval(hook.event, hook.command, time.time(), script_mtime(hook)))
    save_approvals(home, approvals)


def revoke(home: Path, command: str) -> int:
    approvals = load_approvals(home)
    kept = [a for a in approvals if a.command != command]
    save_approvals(home, kept)
    return len(approvals) - len(kept)


def admit(hooks: list[ShellHook], home: Path, *, bypass: bool, tty: bool, ask: Callable[[ShellHook], bool] | None = None) -> tuple[list[ShellHook], list[str]]:
    """The hooks that may run, and one line for each that may not (and why).

    A bypass or a yes on the terminal is recorded, so the next start does not ask again.
    """
    approvals = load_approvals(home)
    admitted: list[ShellHook] = []
    fresh: list[ShellHook] = []
    lines: list[str] = []
    for hook in hooks:
        verdict = decide(find(approvals, hook) is not None, bypass, tty)
        if verdict == "ask" and ask is not None and ask(hook):
            verdict = "allowed"
            fresh.append(hook)
        elif verdict == "allowed" and find(approvals, hook) is None:
            fresh.append(hook)
        if verdict == "allowed":
            admitted.append(hook)
        else:
            lines.append(
                f"shell hook {hook.event}: {hook.command!r} is not allowed yet and stays unregistered; "
                "allow it with --accept-hooks, HERMES_ACCEPT_HOOKS=1 or hooks_auto_accept: true (or start once on a terminal and answer yes)"
            )
    if fresh:
        try:
            approve(home, fresh)
        except OSError as exc:
            lines.append(f"could not record the shell hooks' consent in {home / ALLOWLIST}: {exc}")
    return admitted, lines


def drift(approval: Approval | None, hook: ShellHook) -> str | None:
    """Whether the script changed since the yes (by its modification time)."""
    now = script_mtime(hook)
    if approval is None or approval.script_mtime is None or now is None:
        return None
    if abs(now - approval.script_mtime) > 1e-6:
        return f"the script changed since it was allowed ({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}): read it, then allow it again"
    return None
