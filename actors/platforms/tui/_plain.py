"""Plain mode: no full screen, for scripts, pipes and dumb terminals.

``hermes chat -q "question"`` prints the answer on stdout as it streams and exits with a
status that says how the turn ended; tool lines and notices go to stderr, so stdout is
the answer alone. Without ``-q`` each line of stdin is a question. Ctrl+C cancels the
running turn (a second one stops waiting for the cancellation).

Approvals and clarifying questions are asked on the terminal when stdin is one; otherwise
approvals are denied (nothing dangerous runs unattended) and the session is attached as an
observer, so the agent is told at once that nobody can answer its questions.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TextIO

from protocols import (
    ApprovalChoice,
    ApprovalRequested,
    ClarificationRequested,
    ContextCompressed,
    ModelFallback,
    ModelRetrying,
    SessionEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
    TurnStarted,
)

from ._handle import SessionHandle, StreamItem, StreamNotice, TuiError
from ._widgets import argument_preview, duration

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_CANCELLED = 0, 1, 2, 130
APPROVAL_KEYS: dict[str, ApprovalChoice] = {"o": "once", "s": "session", "a": "always", "d": "deny", "": "deny"}


class Interrupt:
    """Ctrl+C, as an item in the event queue."""


LineReader = Callable[[], "asyncio.Future[str]"]


def stdin_reader(stream: TextIO) -> LineReader:
    """Reads a line in a daemon thread: a read that never returns cannot hold up the exit."""

    def read() -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()

        def deliver(line: str) -> None:
            if not future.done():
                future.set_result(line)

        def run() -> None:
            line = stream.readline()
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(deliver, line)

        threading.Thread(target=run, name="hermes-stdin", daemon=True).start()
        return future

    return read


class PlainChat:
    """Runs turns of one session and prints them; one instance per ``asyncio.run``."""

    def __init__(self, handle: SessionHandle, session_id: str, *, out: TextIO, err: TextIO, ask: LineReader | None) -> None:
        self.handle = handle
        self.session_id = session_id
        self.out = out
        self.err = err
        self.ask = ask
        """Reads a line from the person; None when nobody can answer (stdin is not a terminal)."""
        self.queue: asyncio.Queue[StreamItem | Interrupt] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._started: dict[str, float] = {}
        self.attached = asyncio.Event()
        """Set once the session's events are followed (a turn started from then on is seen whole)."""
        self.turns_ended = 0
        self._turn_ended = asyncio.Event()

    def sink(self, item: StreamItem | Interrupt) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed after the run
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)

    @contextlib.contextmanager
    def interrupts(self) -> Iterator[None]:
        """Ctrl+C goes into the queue instead of raising KeyboardInterrupt."""
        try:
            self._loop.add_signal_handler(signal.SIGINT, self.sink, Interrupt())
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            yield
            return
        try:
            yield
        finally:
            self._loop.remove_signal_handler(signal.SIGINT)

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    async def run(self, questions: Iterable[str] | LineReader) -> int:
        """Ask each question in turn; the status of the last turn (130 stops at a cancelled one)."""
        status = EXIT_OK
        attachment = await self.handle.attach(self.session_id, self.sink, observer=self.ask is None)
        self.attached.set()
        try:
            with self.interrupts():
                first = True
                async for text in _texts(questions):
                    if not text.strip():
                        continue
                    title = " ".join(text.split())[:60] if first else None
                    first = False
                    turn_id = await self.handle.start_turn(self.session_id, text, title=title)
                    status = await self.follow(turn_id)
                    if status == EXIT_CANCELLED:
                        break
        except TuiError as exc:
            self.note(f"hermes: {exc}")
            status = getattr(exc, "exit_code", EXIT_FAILED)
        finally:
            attachment.close()
        return status

    async def watch(self) -> int:
        """Print every turn of the session until Ctrl+C (``hermes attach --plain``).

        Ctrl+C cancels a running turn; at an idle session it ends the watch (status 0).
        """
        attachment = await self.handle.attach(self.session_id, self.sink, observer=self.ask is None)
        self.attached.set()
        self.note(f"hermes: following session {self.session_id} (Ctrl+C cancels a running turn, or leaves)")
        running: str | None = None
        printed = ""
        try:
            with self.interrupts():
                while True:
                    item = await self.queue.get()
                    if isinstance(item, Interrupt):
                        if running is None:
                            return EXIT_OK
                        self.note("hermes: cancelling the turn")
                        await self.handle.cancel_turn(self.session_id)
                        continue
                    if isinstance(item, StreamNotice):
                        self.note(f"hermes: {item.text}")
                        if item.kind == "failed":
                            return EXIT_FAILED
                        continue
                    if isinstance(item, TurnStarted):
                        running, printed = item.turn_id, ""
                        self.out.write(f"> {item.text}\n")
                    if await self.show(item, printed) is not None:
                        running = None
                        self.turns_ended += 1
                        self._turn_ended.set()
                        self._turn_ended = asyncio.Event()
                    elif isinstance(item, TextDelta):
                        printed += item.text
        except TuiError as exc:
            self.note(f"hermes: {exc}")
            return getattr(exc, "exit_code", EXIT_FAILED)
        finally:
            attachment.close()

    async def wait_turns_ended(self, count: int) -> None:
        """Barrier for watchers: ``count`` turns have ended in :meth:`watch`."""
        while self.turns_ended < count:
            await self._turn_ended.wait()

    async def follow(self, turn_id: str) -> int:
        """Print one turn until it ends; its exit status."""
        printed = ""
        interrupts = 0
        while True:
            item = await self.queue.get()
            if isinstance(item, Interrupt):
                interrupts += 1
                if interrupts > 1:
                    self.note("hermes: stopped waiting for the cancellation")
                    return EXIT_CANCELLED
                self.note("hermes: cancelling the turn (Ctrl+C again to stop waiting)")
                await self.handle.cancel_turn(self.session_id)
                continue
            if isinstance(item, StreamNotice):
                self.note(f"hermes: {item.text}")
                if item.kind == "failed":
                    return EXIT_FAILED
                continue
            if item.turn_id != turn_id:
                continue  # another client's turn in the same session
            status = await self.show(item, printed)
            if isinstance(item, TextDelta):
                printed += item.text
            if status is not None:
                return status

    async def show(self, event: SessionEvent, printed: str) -> int | None:
        """Print ``event``; an exit status when it ended the turn."""
        match event:
            case TextDelta(text=text):
                self.out.write(text)
                self.out.flush()
            case ToolStarted(call_id=call_id, name=name, arguments=arguments):
                self._started[call_id] = time.monotonic()
                self.note(f"[{name}] {argument_preview(arguments)}")
            case ToolFinished(call_id=call_id, name=name, ok=ok):
                took = time.monotonic() - self._started.pop(call_id, time.monotonic())
                self.note(f"[{name}] {'ok' if ok else 'error'} in {duration(took)}")
            case ModelRetrying(reason=reason, delay_s=delay):
                self.note(f"hermes: the model call failed ({reason}); retrying in {delay:.1f}s")
            case ModelFallback(from_provider=old, to_provider=new, model=model, reason=reason):
                self.note(f"hermes: {old} cannot answer ({reason}); this turn goes on with {new} ({model})")
            case ContextCompressed(tokens_before=before, tokens_after=after, summarised=count):
                self.note(f"hermes: context compressed: {count} messages summarised, about {before:,} -> {after:,} tokens")
            case ApprovalRequested():
                choice = await self.approval(event)
                await self.handle.resolve_approval(self.session_id, event.request_id, choice)
            case ClarificationRequested():
                if self.ask is not None:
                    choices = f" ({' / '.join(event.choices)})" if event.choices else ""
                    self.err.write(f"\nThe agent asks: {event.question}{choices}\n> ")
                    self.err.flush()
                    answer = (await self.ask()).strip()
                    await self.handle.answer_clarification(self.session_id, event.request_id, answer)
            case TurnCompleted(text=text):
                if not printed and text:
                    self.out.write(text)
                    printed = text
                if printed and not printed.endswith("\n"):
                    self.out.write("\n")
                self.out.flush()
                return EXIT_OK
            case TurnFailed(error=error):
                self._end_line(printed)
                self.note(f"hermes: the turn failed: {error}")
                return EXIT_FAILED
            case TurnCancelled(reason=reason):
                self._end_line(printed)
                self.note(f"hermes: the turn was cancelled: {reason}")
                return EXIT_CANCELLED
            case TurnRejected(reason=reason):
                self.note(f"hermes: the message was not taken: {reason}")
                return EXIT_FAILED
            case TurnStarted() | _:
                pass
        return None

    def _end_line(self, printed: str) -> None:
        if printed and not printed.endswith("\n"):
            self.out.write("\n")
            self.out.flush()

    async def approval(self, event: ApprovalRequested) -> ApprovalChoice:
        reasons = "; ".join(event.reasons)
        if self.ask is None:
            self.note(f"hermes: denied '{event.command}' ({reasons}): nobody can approve it here; run it in the full-screen chat")
            return "deny"
        self.err.write(f"\nThe agent asks to run: {event.command}\n  because: {reasons}\nAllow? [o]nce / [s]ession / [a]lways / [d]eny: ")
        self.err.flush()
        return APPROVAL_KEYS.get((await self.ask()).strip().lower()[:1], "deny")


async def _texts(questions: Iterable[str] | LineReader) -> AsyncIterator[str]:
    if callable(questions):
        while line := await questions():
            yield line.rstrip("\n")
    else:
        for text in questions:
            yield text


async def run_plain(
    handle: SessionHandle, session_id: str, questions: Iterable[str] | LineReader | None, *, out: TextIO, err: TextIO, ask: LineReader | None
) -> int:
    """Open ``handle``, ask ``questions`` in ``session_id`` (None: watch it), and close; the exit status."""
    try:
        await handle.open()
    except TuiError as exc:
        err.write(f"hermes: {exc}\n")
        await handle.aclose()
        return getattr(exc, "exit_code", EXIT_FAILED)
    try:
        chat = PlainChat(handle, session_id, out=out, err=err, ask=ask)
        return await (chat.watch() if questions is None else chat.run(questions))
    finally:
        await handle.aclose()
