"""Run a command with ``bash -c`` through :func:`actors.run_process`, its output streamed through a FIFO.

``run_process`` gives the process group guarantees (its own group; TERM then KILL of the
whole group on cancel; stragglers killed when the leader exits) but collects output only
at the end, and keeps just the first bytes. So the script first sends its stdout and
stderr, interleaved as a terminal shows them, into a FIFO that we read as it runs: a
foreground command keeps its head and tail, a background one its latest output, and
``process poll`` can read what was written so far.

The final working directory comes back through a side file: an ``EXIT`` trap writes
``pwd`` there, so ``cd`` in one call carries over to the next (also after ``exit 3``; not
after a kill, a syntax error on the first line, or a command that replaces the trap).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import trio

from actors import run_process
from protocols import ProcessResult

Sink = Callable[[bytes], None]

_ENV_OVERRIDES = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
"""No pager and no password prompt: nobody is at this terminal to press q or type."""


class ShellChannel:
    """A private temp directory with the output FIFO and the final-``pwd`` file of one command."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="hermes-terminal-"))  # mode 0700: ours alone
        self.fifo = self.dir / "output"
        self.cwd_file = self.dir / "cwd"
        self.closed = False
        try:
            os.mkfifo(self.fifo, 0o600)
            self.read_fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
            # Our own write end: the reader never sees end-of-file before the shell opens the
            # FIFO, nor after it exits; we stop reading when the process group is gone.
            self.write_fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def drain(self, sink: Sink) -> None:
        """Read whatever is buffered in the FIFO now, without waiting."""
        while not self.closed:
            try:
                data = os.read(self.read_fd, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            sink(data)

    async def pump(self, sink: Sink) -> None:
        """Read the FIFO as the command writes, until cancelled."""
        while True:
            await trio.lowlevel.wait_readable(self.read_fd)
            self.drain(sink)

    def final_cwd(self) -> str | None:
        try:
            text = self.cwd_file.read_text(encoding="utf-8", errors="surrogateescape").rstrip("\n")
        except OSError:
            return None
        return text if text.startswith("/") else None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self.read_fd, self.write_fd):
            trio.lowlevel.notify_closing(fd)
            os.close(fd)
        shutil.rmtree(self.dir, ignore_errors=True)


def shell_script(command: str, channel: ShellChannel, *, record_cwd: bool) -> str:
    """The ``bash -c`` script: redirect into the FIFO, arm the ``pwd`` trap, then the command.

    The preamble shares the command's first line, so bash's error messages keep the
    user's line numbers.
    """
    preamble = f"exec >{shlex.quote(str(channel.fifo))} 2>&1; "
    if record_cwd:
        preamble += f"trap {shlex.quote('pwd >| ' + shlex.quote(str(channel.cwd_file)))} EXIT; "
    return preamble + command


def shell_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(_ENV_OVERRIDES)
    return env


async def run_shell(command: str, *, cwd: Path, channel: ShellChannel, sink: Sink, record_cwd: bool, grace: float = 2.0) -> ProcessResult:
    """Run ``command`` in ``cwd``; everything it prints goes to ``sink`` as it arrives.

    Cancelling kills the whole process group (``run_process``); what was printed until
    then has reached ``sink``.
    """
    script = shell_script(command, channel, record_cwd=record_cwd)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.pump, sink)
            result = await run_process(["bash", "-c", script], cwd=cwd, env=shell_env(), grace=grace, max_output=64 * 1024)
            nursery.cancel_scope.cancel()
    finally:
        channel.drain(sink)
    # Anything bash printed before its output went to the FIFO (a syntax error on line one).
    sink(result.stdout)
    sink(result.stderr)
    return result
