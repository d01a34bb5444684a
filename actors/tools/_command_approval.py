"""The danger check and approval every command-running tool goes through before it runs.

``terminal`` judges its shell command; ``execute_code`` judges its script as the inline code it
is (``python3 -c SCRIPT``: shell strings, argv lists, tree deletes, writes to protected files,
a socket handed a shell). :func:`judged` runs :func:`check_command` (in a worker thread for long
text), then: ``blocked`` never runs; ``dangerous`` asks ``workspace.approvals`` and waits; no
gate, ``deny``, a timeout or an ended request means it does not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio

from actors.agent import ApprovalGate, ToolContext, ToolOutput, Workspace
from actors.agent._approvals import ALLOWING

from ._danger import Verdict, check_command, display_command

DEFAULT_APPROVAL_TIMEOUT = 300.0
"""Seconds an approval request waits when the gate does not say (``gate.timeout``)."""
INLINE_CHECK_CHARS = 4_096
"""Longer commands are checked in a worker thread."""
DENY_GLOBS_KEY = "terminal.deny_globs"
"""``workspace.extras[DENY_GLOBS_KEY]``: the user's deny globs (a list of ``fnmatch`` patterns)."""


async def judged(context: ToolContext, command: str, cwd: Path) -> ToolOutput | None:
    """None when ``command`` may run (checked, approved if it had to be); else the result saying why not."""
    globs = deny_globs(context.workspace)
    if len(command) > INLINE_CHECK_CHARS:  # a long script takes milliseconds to read: not on the reactor thread
        verdict = await trio.to_thread.run_sync(lambda: check_command(command, deny_globs=globs, cwd=cwd, hermes_home=context.home))
    else:
        verdict = check_command(command, deny_globs=globs, cwd=cwd, hermes_home=context.home)
    return await _refusal(context, command, verdict)


def _approval_timeout(gate: ApprovalGate) -> float:
    value = getattr(gate, "timeout", None)
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_APPROVAL_TIMEOUT


async def _refusal(context: ToolContext, command: str, verdict: Verdict) -> ToolOutput | None:
    """None when the command may run; otherwise the result that says why it did not."""
    if verdict.ok:
        return None
    reasons = "; ".join(verdict.reasons)
    if verdict.blocked:
        return ToolOutput(
            f"[blocked] This command was not run: {reasons}. Blocked commands never run, whatever is approved; "
            "find another way, or ask the user to run it themselves.",
            ok=False,
        )
    gate = context.workspace.approvals
    if gate is None:
        return ToolOutput(
            f"[denied] This command needs approval ({reasons}) but no client can answer approval requests here; it was not run.",
            ok=False,
        )
    decision = await gate.request(
        turn_id=context.turn_id,
        call_id=context.call_id,
        command=display_command(command),
        reasons=verdict.reasons,
        keys=verdict.keys,
        timeout=_approval_timeout(gate),
    )
    if decision in ALLOWING:
        return None
    if decision == "deny":
        why = "the user denied it"
    elif decision == "timeout":
        why = "nobody answered the approval request in time"
    else:
        why = f"the approval request ended ({decision})"
    return ToolOutput(f"[denied] This command was not run: {why} ({reasons}). Do not retry it as is; ask the user.", ok=False)


def deny_globs(workspace: Workspace) -> Sequence[str]:
    """The user's deny globs: ``approvals.deny`` in config.yaml, plus any a caller put in ``extras``."""
    globs = workspace.extras.get(DENY_GLOBS_KEY, ())
    extra = [g for g in globs if isinstance(g, str)] if isinstance(globs, (list, tuple)) else []
    configured = workspace.approvals.deny_globs if workspace.approvals is not None else ()
    return [*configured, *extra]
