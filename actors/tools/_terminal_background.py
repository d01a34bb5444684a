"""Background commands: ``terminal(background=true)`` starts one, the ``process`` tool watches it.

Ownership: a background command must outlive the tool call that started it, so it cannot
be that call's wait. Each runs as a trio *system task* of the reactor (the one place a
task may outlive every actor's wait), inside :func:`actors.run_process`, so:

- ``process kill`` cancels its scope: TERM to the whole process group, KILL after a second;
- an optional lifetime (``timeout`` given with ``background=true``) does the same on expiry;
- when the reactor stops, trio cancels all system tasks: every group is killed before the
  reactor thread ends, so none outlives the runtime;
- at session end, the session closes its ``Workspace`` (in the reactor thread), whose
  closer :func:`table_of` registered kills the session's commands; as a fallback, a
  finalizer on the ``Workspace`` does the same when the workspace is garbage-collected.

State lives in ``workspace.extras["terminal.processes"]``: ids (``bg1``, ``bg2``, ...) are
per session, and one session cannot see or kill another's commands. A system task never
raises (that would end the reactor): failures become the process's ``failed`` state.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import shutil
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits, Workspace

from ._registry import tool
from ._terminal_output import HeadTail, OutputRing
from ._terminal_run import ShellChannel, run_shell

log = logging.getLogger(__name__)

EXTRAS_KEY = "terminal.processes"
MAX_RUNNING = 16
"""Background commands one session may have running at once."""
KEEP_FINISHED = 32
"""Finished commands still listed (and pollable) per session."""
GRACE = 1.0
"""Seconds between TERM and KILL when a background command is stopped."""
MAX_WAIT = 600.0

State = Literal["running", "exited", "killed", "timed out", "failed", "stopped"]


def _complete_utf8(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead byte
        if byte & 0x80 == 0:
            return len(data)
        needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return len(data) if back >= needed else len(data) - back
    return len(data)


@dataclasses.dataclass(eq=False)
class BackgroundProcess:
    """One background command of a session."""

    id: str
    command: str
    cwd: Path
    channel: ShellChannel
    started: float = dataclasses.field(default_factory=time.monotonic)
    output: OutputRing = dataclasses.field(default_factory=OutputRing)
    scope: trio.CancelScope = dataclasses.field(default_factory=trio.CancelScope)
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    state: State = "running"
    returncode: int | None = None
    error: str | None = None
    finished: float | None = None
    read_offset: int = 0
    """How far ``poll`` has read (absolute byte offset)."""
    kill_requested: bool = False

    def status(self) -> str:
        if self.state == "running":
            return f"running for {time.monotonic() - self.started:.0f} s"
        if self.state == "exited":
            return f"exited with code {self.returncode}"
        if self.state == "failed":
            return f"failed: {self.error}"
        if self.state == "stopped":
            return "stopped (the runtime shut down)"
        return self.state

    def new_output(self) -> str:
        """Output since the last call (ANSI stripped, secrets redacted, capped)."""
        if not self.channel.closed:
            self.channel.drain(self.output.feed)
        lost, data = self.output.since(self.read_offset)
        keep = len(data) if self.state != "running" else _complete_utf8(data)
        self.read_offset += lost + keep
        capture = HeadTail()
        capture.feed(data[:keep])
        text = capture.text().rstrip("\n")
        if lost:
            text = f"[... {lost:,} earlier bytes were dropped before this poll ...]\n{text}"
        return text

    def kill_nowait(self) -> None:
        if self.state == "running":
            self.kill_requested = True
            self.scope.cancel()


class ProcessTable:
    """The background commands of one session. Touched only in the reactor thread."""

    def __init__(self) -> None:
        self._procs: dict[str, BackgroundProcess] = {}
        self._ids = itertools.count(1)

    def __iter__(self) -> Iterator[BackgroundProcess]:
        return iter(list(self._procs.values()))

    def running(self) -> list[BackgroundProcess]:
        return [p for p in self._procs.values() if p.state == "running"]

    def get(self, process_id: str) -> BackgroundProcess | None:
        return self._procs.get(process_id)

    def add(self, command: str, cwd: Path) -> BackgroundProcess:
        finished = [p for p in self._procs.values() if p.state != "running"]
        for old in finished[: max(0, len(finished) - KEEP_FINISHED + 1)]:
            del self._procs[old.id]
        proc = BackgroundProcess(id=f"bg{next(self._ids)}", command=command, cwd=cwd, channel=ShellChannel())
        self._procs[proc.id] = proc
        return proc

    def kill_all_nowait(self) -> int:
        """Stop every running command (their groups die shortly, in their own tasks)."""
        killed = 0
        try:
            for proc in self.running():
                proc.kill_nowait()
                killed += 1
        except Exception:  # runs as a trio callback: it must never raise
            log.exception("could not stop the background commands")
        return killed


def _kill_soon(token: trio.lowlevel.TrioToken, table: ProcessTable) -> None:
    """The workspace is gone (any thread): stop its commands in the reactor."""
    try:
        token.run_sync_soon(table.kill_all_nowait)
    except trio.RunFinishedError:
        pass  # the reactor ended; its system tasks, and so the commands, are gone already


def table_of(workspace: Workspace) -> ProcessTable:
    """The session's process table, created on first use."""
    table = workspace.extras.get(EXTRAS_KEY)
    if not isinstance(table, ProcessTable):
        table = workspace.extras[EXTRAS_KEY] = ProcessTable()
        workspace.closers.append(table.kill_all_nowait)  # the session's end stops its background commands
        workspace.running.append(lambda: any(p.state == "running" for p in table))  # read from the session actor: iterating copies first
        finalizer = weakref.finalize(workspace, _kill_soon, trio.lowlevel.current_trio_token(), table)
        finalizer.atexit = False
    return table


async def _supervise(proc: BackgroundProcess, lifetime: float | None) -> None:
    try:
        with proc.scope:
            if lifetime is not None:
                proc.scope.deadline = trio.current_time() + lifetime
            result = await run_shell(proc.command, cwd=proc.cwd, channel=proc.channel, sink=proc.output.feed, record_cwd=False, grace=GRACE)
            proc.returncode = result.returncode
            proc.state = "exited"
        if proc.scope.cancelled_caught:
            proc.state = "killed" if proc.kill_requested else "timed out"
    except Exception as exc:  # a raising system task would end the reactor's whole trio run
        log.warning("background command %s failed: %s: %s", proc.id, type(exc).__name__, exc)
        proc.state = "failed"
        proc.error = f"{type(exc).__name__}: {exc}"
    finally:
        if proc.state == "running":
            proc.state = "stopped"
        proc.finished = time.monotonic()
        proc.channel.close()
        proc.done.set()


def start_background(context: ToolContext, command: str, cwd: Path, lifetime: float | None) -> ToolOutput:
    """Start ``command`` as a background process of the session and return at once."""
    table = table_of(context.workspace)
    running = table.running()
    if len(running) >= MAX_RUNNING:
        ids = ", ".join(p.id for p in running)
        return ToolOutput(f"[error] {len(running)} background commands are running already ({ids}); kill one first.", ok=False)
    proc = table.add(command, cwd)
    trio.lowlevel.spawn_system_task(_supervise, proc, lifetime, name=f"terminal background {proc.id}")
    limit = f", stopped after {lifetime:g} s" if lifetime is not None else ""
    return ToolOutput(
        f"[started {proc.id} in the background{limit}] {command}\n"
        f"Use the process tool: poll {proc.id} for new output, wait for it to finish, kill {proc.id} to stop it."
    )


class ProcessArgs(msgspec.Struct, kw_only=True):
    action: Annotated[
        Literal["list", "poll", "wait", "kill"],
        msgspec.Meta(
            description=(
                "list: this session's background commands. poll: new output since the last poll, and whether it still runs. "
                "wait: block until it finishes (or `timeout` s pass), then poll. kill: stop it and every process it started."
            )
        ),
    ]
    process_id: Annotated[str | None, msgspec.Meta(description="The id terminal(background=true) returned, e.g. bg1.")] = None
    timeout: Annotated[float, msgspec.Meta(gt=0, description="For wait: seconds to wait at most (default 30, at most 600).")] = 30.0


def _report(proc: BackgroundProcess) -> str:
    text = proc.new_output()
    return f"[{proc.id} {proc.status()}]\n{text or '(no new output)'}"


@tool(
    name="process",
    toolset="terminal",
    description=(
        "Manage commands started with terminal(background=true) in this session: list them, poll one for new output, "
        "wait for one to finish, or kill one (with every process it started)."
    ),
    traits=ToolTraits(),
    available=lambda: os.name == "posix" and shutil.which("bash") is not None,
)
async def process(context: ToolContext, args: ProcessArgs) -> ToolOutput:
    table = table_of(context.workspace)
    if args.action == "list":
        lines = [f"{p.id}  {p.status()}  {p.command if len(p.command) <= 120 else p.command[:117] + '...'}" for p in table]
        return ToolOutput("\n".join(lines) or "No background commands in this session.")
    proc = table.get(args.process_id or "")
    if proc is None:
        known = ", ".join(p.id for p in table) or "none"
        return ToolOutput(f"[error] no background command {args.process_id!r} in this session (known: {known}).", ok=False)
    if args.action == "wait":
        with trio.move_on_after(min(args.timeout, MAX_WAIT)):
            await proc.done.wait()
    elif args.action == "kill":
        proc.kill_nowait()
        with trio.move_on_after(GRACE + 10):
            await proc.done.wait()
    return ToolOutput(_report(proc))
