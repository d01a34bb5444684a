"""Subprocesses for the reactor: each in its own process group, the group never outlives the call.

Invariant: when :func:`run_process` returns, raises or is cancelled, no process of its
group is left running: on cancel the group gets SIGTERM, then SIGKILL after ``grace``
seconds; on a normal exit, stragglers the leader left behind get SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

import trio

from protocols import ProcessResult

from . import _groups

DEFAULT_MAX_OUTPUT = 1 << 20
"""Bytes of stdout (and, separately, stderr) kept; the rest is read and dropped."""


class _Capture:
    __slots__ = ("chunks", "limit", "size", "truncated")

    def __init__(self, limit: int) -> None:
        self.chunks: list[bytes] = []
        self.limit = limit
        self.size = 0
        self.truncated = False

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        while chunk := await stream.receive_some(65536):
            room = self.limit - self.size
            if len(chunk) > room:
                self.truncated = True
                chunk = chunk[: max(room, 0)]
            if chunk:
                self.chunks.append(bytes(chunk))
                self.size += len(chunk)

    def value(self) -> bytes:
        return b"".join(self.chunks)


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal a whole process group; False if it has no members left."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_running(pgid: int) -> bool:
    """True while any process of the group is alive (zombies count as gone). Linux only."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] is the state, fields[2] the process group id.
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def kill_group(pgid: int) -> None:
    """SIGKILL a process group and wait (bounded, off the reactor thread) until none of it runs."""
    if not _signal_group(pgid, signal.SIGKILL):
        return
    # Killed members die asynchronously. Scanning /proc costs ~10 µs per process on the
    # machine, so it runs in a worker thread, never on the reactor thread.
    delay = 0.001
    with trio.move_on_after(1.0):
        while await trio.to_thread.run_sync(_group_running, pgid):
            await trio.sleep(delay)
            delay = min(0.05, delay * 2)


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except trio.BrokenResourceError:
        pass  # the process stopped reading; its exit status says why
    finally:
        await stream.aclose()


async def _terminate_group(process: trio.Process, grace: float) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    with trio.move_on_after(grace):
        await process.wait()
    await kill_group(process.pid)
    await process.wait()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    grace: float = 2.0,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> ProcessResult:
    """Run ``argv`` in a new session (its own process group) and collect its output.

    Cancelling the calling task terminates the whole group (TERM, then KILL after
    ``grace`` seconds) before the cancellation propagates.
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=cwd,
        env=dict(env) if env is not None else None,
    )
    _groups.record(process.pid, argv)  # so a successor can reap it if this process is SIGKILLed
    out, err = _Capture(max_output), _Capture(max_output)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None and process.stderr is not None
            nursery.start_soon(out.drain, process.stdout)
            nursery.start_soon(err.drain, process.stderr)
            if stdin is not None:
                assert process.stdin is not None
                nursery.start_soon(_feed, process.stdin, stdin)
            await process.wait()
            # The group must not outlive the call: stragglers would also hold the pipes open.
            await kill_group(process.pid)
    except BaseException:
        with trio.CancelScope(shield=True):
            await _terminate_group(process, grace)
        raise
    finally:
        with trio.CancelScope(shield=True):
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()
        _groups.forget(process.pid)
    return ProcessResult(
        argv=tuple(argv),
        returncode=process.returncode if process.returncode is not None else -1,
        stdout=out.value(),
        stderr=err.value(),
        truncated=out.truncated or err.truncated,
    )
