"""The ``terminal`` tool: run a shell command for the model, after the danger check and approval.

Order of a call (invariant: nothing runs before step 3 allows it):

1. the working directory: ``workdir`` for this call, else the session's (``workspace.cwd``,
   which ``cd`` moves from call to call);
2. :func:`check_command` (with the session's HERMES_HOME, so writes to the agent's own
   configuration need a person's yes): ``blocked`` is refused outright, even with ``yolo``;
   ``dangerous`` asks ``workspace.approvals`` and waits; no gate, ``deny``, a timeout or
   a cancel refuse; only a decision in ``ALLOWING`` goes on;
3. run with ``bash -c`` in its own process group (``_terminal_run``): the timeout or a
   cancel kills the group; or, with ``background=true``, start it and return its id
   (``_terminal_background``, which also registers the ``process`` tool).

The result is the output (stdout and stderr interleaved, ANSI stripped, secrets redacted,
at most 50,000 characters: head and tail with a note) and a last line with the exit code or
what stopped it. A non-zero exit is still an ``ok`` result: it is the command's answer.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits, Workspace
from actors.hooks import first_text

from ._command_approval import DEFAULT_APPROVAL_TIMEOUT as DEFAULT_APPROVAL_TIMEOUT
from ._command_approval import DENY_GLOBS_KEY as DENY_GLOBS_KEY
from ._command_approval import judged
from ._registry import tool
from ._terminal_background import start_background
from ._terminal_output import HeadTail
from ._terminal_run import ShellChannel, run_shell

MAX_TIMEOUT = 600.0


class TerminalArgs(msgspec.Struct, kw_only=True):
    command: Annotated[
        str,
        msgspec.Meta(description=("The bash command to run. Non-interactive: stdin is empty, no pager. `cd` carries over to later calls.")),
    ]
    timeout: Annotated[
        Annotated[float, msgspec.Meta(gt=0)] | None,
        msgspec.Meta(
            description=(
                "Seconds before the command and every process it started are killed (default 180 unless the user set another, at most 600). "
                "With background=true: its lifetime (default: until killed or the session ends)."
            )
        ),
    ] = None
    background: Annotated[
        bool,
        msgspec.Meta(description="Start the command and return at once with an id for the process tool (servers, long builds)."),
    ] = False
    workdir: Annotated[
        str | None,
        msgspec.Meta(description="Run in this directory (absolute, or relative to the current one) for this call only."),
    ] = None


def _start_directory(workspace: Workspace, workdir: str | None) -> tuple[Path, str | None]:
    """Where the command starts, and a note if that is not what was asked."""
    cwd = workspace.cwd
    if workdir:
        wanted = (cwd / Path(workdir).expanduser()).resolve()
        if not wanted.is_dir():
            raise NotADirectoryError(f"workdir {workdir!r} is not a directory (resolved to {wanted})")
        return wanted, None
    if cwd.is_dir():
        return cwd, None
    parent = next((p for p in cwd.parents if p.is_dir()), Path("/"))
    return parent, f"[note: the working directory {cwd} no longer exists; ran in {parent}]"


def _exit_line(returncode: int) -> str:
    if returncode >= 0:
        return f"[exit code {returncode}]"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"[killed by {name}]"


async def run_foreground(context: ToolContext, command: str, cwd: Path, timeout: float, *, record_cwd: bool) -> ToolOutput:
    """Run to completion (or timeout); ``record_cwd``: the session's directory follows the command's ``cd``."""
    capture = HeadTail()
    channel = ShellChannel()
    returncode: int | None = None
    try:
        with trio.move_on_after(timeout):
            result = await run_shell(command, cwd=cwd, channel=channel, sink=capture.feed, record_cwd=record_cwd)
            returncode = result.returncode
        final_cwd = channel.final_cwd() if record_cwd and returncode is not None else None
    finally:
        channel.close()
    capture = await _transformed(context, command, cwd, capture, returncode)
    lines = [capture.text().rstrip("\n") or "(no output)"]
    if returncode is None:
        lines.append(f"[timed out after {timeout:g} s: the command and every process it started were killed]")
    else:
        lines.append(_exit_line(returncode))
    if final_cwd is not None and Path(final_cwd) != context.workspace.cwd:
        context.workspace.cwd = Path(final_cwd)
        lines.append(f"[working directory is now {final_cwd}]")
    return ToolOutput("\n".join(lines), ok=returncode is not None)


async def _transformed(context: ToolContext, command: str, cwd: Path, capture: HeadTail, returncode: int | None) -> HeadTail:
    """The output a ``transform_terminal_output`` hook returned in place of the command's, if any.

    The hooks see the output before it is cleaned and redacted; what they return is capped,
    cleaned and redacted like the command's own output.
    """
    hooks = context.hooks
    if hooks is None or not hooks.wants("transform_terminal_output"):
        return capture
    kwargs = {
        "command": command,
        "output": capture.raw(),
        "exit_code": returncode if returncode is not None else -1,
        "cwd": str(cwd),
        "task_id": context.session_id,
        "session_id": context.session_id,
    }
    answers = await hooks.call("transform_terminal_output", kwargs, session_id=context.session_id, cwd=str(cwd), tool_name="terminal", publish=context.publish)
    text = first_text(answers)
    if text is None:
        return capture
    replaced = HeadTail(capture.head_limit, capture.tail_limit)
    replaced.feed(text.encode("utf-8", errors="replace"))
    return replaced


@tool(
    name="terminal",
    toolset="terminal",
    description=(
        "Run a shell command (bash) on this machine and get its output and exit code. The working directory carries over "
        "between calls (`cd`). Dangerous commands ask the user first; some (deleting /, formatting disks, shutdown) never run. "
        "Use background=true for servers and other long-running commands, then the process tool."
    ),
    traits=ToolTraits(read_only=False, path_argument=None, exclusive=False),
    available=lambda: os.name == "posix" and shutil.which("bash") is not None,
)
async def terminal(context: ToolContext, args: TerminalArgs) -> ToolOutput:
    command = args.command
    if not command.strip():
        return ToolOutput("[error] the command is empty.", ok=False)
    try:
        cwd, note = _start_directory(context.workspace, args.workdir)
    except OSError as exc:
        return ToolOutput(f"[error] {exc}", ok=False)
    refusal = await judged(context, command, cwd)
    if refusal is not None:
        return refusal
    if args.background:
        lifetime = min(args.timeout, MAX_TIMEOUT) if args.timeout is not None else None
        return start_background(context, command, cwd, lifetime)
    timeout = min(args.timeout or context.settings.terminal_timeout, MAX_TIMEOUT)
    output = await run_foreground(context, command, cwd, timeout, record_cwd=args.workdir is None)
    if note:
        return ToolOutput(f"{note}\n{output.content}", ok=output.ok)
    return output
