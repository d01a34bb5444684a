"""run_process: output, stdin, caps, and a process group that never outlives the call."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from actors import run_process
from tests.conftest import DEADLINE
from tests.processes import live_processes_with


async def test_run_process_collects_output_and_exit_status() -> None:
    result = await run_process(["bash", "-c", "echo hello; echo oops >&2; exit 7"])
    assert (result.returncode, result.stdout, result.stderr, result.truncated) == (7, b"hello\n", b"oops\n", False)


async def test_run_process_feeds_stdin() -> None:
    result = await run_process(["cat"], stdin=b"through the pipe")
    assert result.stdout == b"through the pipe"


async def test_run_process_caps_output_and_says_so() -> None:
    result = await run_process(["bash", "-c", "head -c 100000 /dev/zero"], max_output=1000)
    assert len(result.stdout) == 1000
    assert result.truncated


async def test_a_background_straggler_is_killed_when_the_leader_exits() -> None:
    marker = f"31.{os.getpid()}3"
    with trio.fail_after(DEADLINE):  # without the group kill, the straggler holds stdout open
        result = await run_process(["bash", "-c", f"sleep {marker} & echo leader done"])
    assert result.stdout == b"leader done\n"
    assert live_processes_with(f"sleep {marker}") == []


async def _cancel_when_ready(tmp_path: Path, script: str, marker: str, grace: float) -> None:
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    await run_process(["bash", "-c", script.format(fifo=fifo)], grace=grace)

                nursery.start_soon(run)
                await trio.lowlevel.wait_readable(fd)
                assert live_processes_with(f"sleep {marker}")
                nursery.cancel_scope.cancel()
    finally:
        os.close(fd)
    assert live_processes_with(f"sleep {marker}") == []


async def test_cancelling_run_process_terminates_the_whole_group(tmp_path: Path) -> None:
    marker = f"32.{os.getpid()}4"
    await _cancel_when_ready(tmp_path, "echo go > {fifo}; sleep " + marker + "; echo", marker, grace=2.0)


async def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    marker = f"33.{os.getpid()}5"
    script = "trap '' TERM; echo go > {fifo}; sleep " + marker + "; echo"
    await _cancel_when_ready(tmp_path, script, marker, grace=0.2)
