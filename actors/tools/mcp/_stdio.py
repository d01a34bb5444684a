"""The stdio transport: the server as a subprocess in its own process group.

Ours rather than the SDK's ``stdio_client`` because the group must never outlive the link:
the SDK's clean-up awaits inside a cancelled scope (so a cancelled link could leave the
server running) and kills only the child on some paths. Here the group is recorded in the
process-group ledger (a SIGKILLed ``hermes`` leaves nothing its successor cannot reap), and
on every exit, cancellation included, it gets SIGTERM, then SIGKILL after a grace period,
shielded. The last lines of the server's stderr are kept to say why it stopped.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable

import anyio
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from actors import kill_group
from actors._groups import forget, record

from ._settings import McpSettings

log = logging.getLogger(__name__)

GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL when the link ends."""
STDERR_LINES = 8

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class StderrTail:
    """The last lines a server wrote to stderr."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.closed = trio.Event()

    def text(self) -> str:
        return " | ".join(line for line in self.lines if line)

    async def drain(self, stream: trio.abc.ReceiveStream, server: str) -> None:
        pending = b""
        try:
            while chunk := await stream.receive_some(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace").rstrip()
                    self.lines.append(text[:300])
                    log.debug("mcp %s stderr: %s", server, text)
        finally:
            self.closed.set()


async def _read_messages(stream: trio.abc.ReceiveStream, out: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
    async with out:
        pending = b""
        while chunk := await stream.receive_some(65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except ValueError as exc:  # a server printing to stdout by mistake: reported, not fatal
                    await out.send(exc)
                    continue
                await out.send(SessionMessage(message))


async def _write_messages(stream: trio.abc.SendStream, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
    async with source:
        async for message in source:
            data = message.message.model_dump_json(by_alias=True, exclude_none=True)
            try:
                await stream.send_all(data.encode() + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the server stopped reading; its exit says why


async def _end_group(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    with trio.move_on_after(GRACE):
        await process.wait()
    await kill_group(process.pid)
    with trio.move_on_after(GRACE):
        await process.wait()


@contextlib.asynccontextmanager
async def open_stdio(settings: McpSettings, on_exit: Callable[[str], object]) -> AsyncIterator[Streams]:
    """Start the server; yield the message streams the SDK's ``ClientSession`` reads and writes.

    ``on_exit`` is called with a reason when the server exits by itself (the link is broken).

    Raises:
        OSError: the command cannot be started (not found, not executable).
    """
    argv = [settings.command, *settings.args]
    env = {**get_default_environment(), **settings.env}
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=settings.cwd or None,
        env=env,
    )
    record(process.pid, argv)  # a SIGKILLed hermes leaves nothing its successor cannot reap
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    tail = StderrTail()

    async def watch_exit() -> None:
        code = await process.wait()
        with trio.move_on_after(GRACE):  # what the server wrote last says why it stopped
            await tail.closed.wait()
        said = tail.text()
        on_exit(f"the server exited with status {code}" + (f"; its stderr: {said}" if said else ""))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_messages, process.stdout, read_in)
            nursery.start_soon(_write_messages, process.stdin, write_out)
            nursery.start_soon(tail.drain, process.stderr, settings.name)
            nursery.start_soon(watch_exit)
            try:
                yield read_out, write_in
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await _end_group(process)
            for stream in (process.stdin, process.stdout, process.stderr, read_in, read_out, write_in, write_out):
                await stream.aclose()
            forget(process.pid)
