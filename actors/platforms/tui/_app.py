"""The full-screen chat: transcript, prompt, status bar; questions as modals; slash commands.

The app starts with only Textual and the typed messages imported. The session handle
(the runtime, or an HTTP client) is built by ``connect`` in its own thread once the first
frame is drawn, so the prompt takes input at once; what is sent before the handle is
ready goes out when it is.

Events reach the app from any thread through ``post_message`` (thread-safe; it never
blocks the hub or the reactor) and are handled one at a time, in sequence order, on the
app's loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message as UiMessage
from textual.widgets import Static, TextArea

from protocols import (
    ApprovalChoice,
    ApprovalRequested,
    ApprovalResolved,
    ClarificationRequested,
    ContextCompressed,
    SessionEvent,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

from ._builder import HandleBuilder
from ._commands import matching, parse
from ._conversation import Conversation
from ._handle import Attachment, SessionHandle, StreamItem, TuiError
from ._modals import ApprovalScreen, ClarifyScreen
from ._prompt import History, PromptArea
from ._slash import SlashCommands
from ._style import CSS
from ._widgets import NoticeKind, StatusBar

log = logging.getLogger(__name__)

QUIT_WINDOW = 2.0
"""Seconds within which a second Ctrl+C at an idle prompt quits."""
TITLE_LENGTH = 60


def new_session_id() -> str:
    return f"sess_{uuid.uuid4().hex[:24]}"


def default_history(home: Path) -> History:
    return History(home / "tui_history.jsonl")


class SessionEventArrived(UiMessage):
    """A session event (or a stream notice), posted from whatever thread the handle uses."""

    def __init__(self, item: StreamItem) -> None:
        super().__init__()
        self.item = item


class ChatApp(App[int]):
    """``hermes chat`` and ``hermes attach``: one session at a time, switchable."""

    TITLE = "hermes"
    CSS = CSS
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Cancel the turn / quit", priority=True, show=False),
        Binding("escape", "stop", "Cancel the turn", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True, show=False),
    ]

    def __init__(
        self,
        connect: Callable[[], SessionHandle],
        *,
        session_id: str | None = None,
        resume: bool = False,
        history: History | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``connect`` builds the handle (it may block: it runs in its own thread).

        ``session_id`` with ``resume`` shows that session's transcript and follows it
        (``hermes attach``, ``hermes chat --resume``); otherwise a new session starts.
        """
        super().__init__()
        self._builder = HandleBuilder(connect)
        self.handle: SessionHandle | None = None
        self.session_id = session_id or new_session_id()
        self._resume_first = resume
        self.history = history or History()
        self.clock = clock
        self.commands = SlashCommands(self)
        self.exit_code = 0
        self.failure: str | None = None
        """Why there is no session runtime (printed again after the screen closes)."""
        self.opened = asyncio.Event()
        """Set once connecting ended: the handle follows the session, or the app said why not."""
        self.seen: list[StreamItem] = []
        """Every event handled (rendered) so far, in order; :meth:`wait_for_event` reads it."""
        self._changed = asyncio.Event()
        self.state = "starting..."
        self.last_text: str | None = None
        """The last message sent (for /retry)."""
        self.last_usage: tuple[int, int] | None = None
        self.last_cached = 0
        """Of the last turn's input tokens, those the provider read from its prompt cache."""
        self.total_usage = (0, 0)
        self.last_cost: float | None = None
        self.total_cost: float | None = None
        """USD, when the session reports costs (``pricing:`` in config.yaml)."""
        self.compressions = 0
        """Context compressions of this session seen here (shown in the status line)."""
        self.session_model: str | None = None
        """The model this session chose (``/model``, or stored with it); None: the runtime's."""
        self._attachment: Attachment | None = None
        self._holding: list[StreamItem] | None = None
        """Events that arrive while a stored transcript loads; shown after it."""
        self._waiting: list[str] = []
        """Messages sent before the handle was ready."""
        self._fresh = True
        """The session has no stored messages: the first one names it."""
        self._cancelling = False
        self._turn_started = 0.0
        self._last_interrupt = -QUIT_WINDOW
        self._questions: dict[str, ApprovalScreen | ClarifyScreen] = {}

    # -- layout and lifecycle -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="log")
        yield Static("", id="hint")
        yield PromptArea(self.history, id="prompt")
        yield StatusBar("", id="status")

    @property
    def conversation(self) -> Conversation:
        return self._conversation

    def on_mount(self) -> None:
        transcript = self.query_one("#log", VerticalScroll)
        transcript.anchor()
        self._conversation = Conversation(transcript, clock=self.clock)
        self.query_one(PromptArea).focus()
        self._refresh_status()
        self.set_interval(0.1, self._tick)
        # Build the runtime after the first frame is drawn: its imports hold the GIL for a
        # second, and the prompt should be on screen (and typing buffered) before that.
        self.call_after_refresh(self._start_connecting)

    def _start_connecting(self) -> None:
        self.run_worker(self._open_and_signal(), name="connect", exit_on_error=False)

    async def on_unmount(self) -> None:
        handle, self.handle = self.handle, None
        if self._attachment is not None:
            self._attachment.close()
            self._attachment = None
        if handle is not None:
            await handle.aclose()

    def finish_connecting(self, timeout: float) -> SessionHandle | None:
        """After the app ended: wait for ``connect`` to return; what it built (the caller closes it)."""
        return self._builder.finish(timeout)

    def quit(self) -> None:
        self.exit(self.exit_code, return_code=self.exit_code)

    @property
    def model_name(self) -> str:
        """The model the current session calls, as far as the UI knows."""
        return self.session_model or (self.handle.model if self.handle else "...")

    def _refresh_status(self) -> None:
        state = self.state
        if state == "running":
            state = f"running {self.clock() - self._turn_started:.1f}s"
        label = self.handle.label if self.handle else "..."
        model = self.model_name
        self.query_one(StatusBar).show(
            label=label,
            model=model,
            session_id=self.session_id,
            state=state,
            last=self.last_usage,
            total=self.total_usage,
            cost=(self.last_cost, self.total_cost),
            compressions=self.compressions,
            cached=self.last_cached,
        )

    def _tick(self) -> None:
        self.conversation.tick()
        if self.state == "running":
            self._refresh_status()

    async def say(self, text: str, kind: NoticeKind = "info") -> None:
        """A line in the transcript from the app itself."""
        await self.conversation.notice(text, kind)

    # -- connecting and switching sessions ------------------------------------------------------

    async def _open_and_signal(self) -> None:
        try:
            await self._open()
        finally:
            self.opened.set()

    async def _open(self) -> None:
        try:
            handle = await self._builder.start()
            try:
                await handle.open()
            except TuiError:
                await handle.aclose()
                raise
            self.handle = handle
            await self.switch_session(self.session_id, resume=self._resume_first)
        except TuiError as exc:
            await self._unavailable(str(exc), getattr(exc, "exit_code", 1))
            return
        except Exception as exc:
            log.exception("the session runtime could not start")
            await self._unavailable(f"the session runtime could not start: {exc}", 1)
            return
        waiting, self._waiting = self._waiting, []
        for text in waiting:
            await self.send(text)

    async def _unavailable(self, why: str, exit_code: int) -> None:
        self.exit_code = exit_code
        self.failure = why
        self.state = "not connected"
        await self.say(why, "error")
        await self.say("Nothing can be sent. Fix the above and start again; Ctrl+C twice quits.", "dim")
        self._refresh_status()

    def _sink(self, item: StreamItem) -> None:
        self.post_message(SessionEventArrived(item))

    async def switch_session(self, session_id: str | None, *, resume: bool = True) -> None:
        """Follow ``session_id`` with its stored transcript (``resume``), or a new session (None)."""
        assert self.handle is not None
        if self._attachment is not None:
            self._attachment.close()
            self._attachment = None
        self.session_id = session_id or new_session_id()
        self._fresh = True
        self._questions.clear()
        self.last_usage, self.total_usage = None, (0, 0)
        self.last_cost = self.total_cost = None
        self.compressions = 0
        self.session_model = None
        self.state, self._cancelling = "idle", False
        await self.conversation.clear()
        self._refresh_status()
        if session_id is None or not resume:
            self._attachment = await self.handle.attach(self.session_id, self._sink, after_seq=0)
            return
        # Attach first (new events only), show the stored transcript, then the events that
        # arrived meanwhile: nothing is missed, and the order on screen is the real one.
        self._holding = []
        try:
            self._attachment = await self.handle.attach(session_id, self._sink)
            try:
                record = await self.handle.get_session(session_id)
                await self.conversation.show_transcript(await self.handle.transcript(session_id))
            except TuiError as exc:  # the events still flow: show what can be shown
                await self.say(f"the stored transcript could not be read ({exc}); following new events", "warn")
            else:
                if record is None:
                    await self.say(f"session {session_id} has no stored messages yet; following its events", "dim")
                else:
                    self._fresh = False
                    self.session_model = record.model if record.model and record.model != self.handle.model else None
        finally:
            held, self._holding = self._holding, None
            for item in held or ():
                await self._handle(item)
        self._refresh_status()

    # -- events ---------------------------------------------------------------------------------

    @on(SessionEventArrived)
    async def _arrived(self, message: SessionEventArrived) -> None:
        item = message.item
        if item.session_id != self.session_id:
            return  # from a session we left
        if self._holding is not None:
            self._holding.append(item)
            return
        await self._handle(item)

    async def _handle(self, item: StreamItem) -> None:
        await self.conversation.handle(item)
        match item:
            case TurnStarted():
                self.state, self._turn_started, self._cancelling = "running", self.clock(), False
            case ApprovalRequested(request_id=request_id):
                screen = ApprovalScreen(item)
                self._questions[request_id] = screen
                await self.push_screen(screen, lambda choice: self._approved(item, choice))
            case ClarificationRequested(request_id=request_id):
                question = ClarifyScreen(item)
                self._questions[request_id] = question
                await self.push_screen(question, lambda answer: self._answered(item, answer))
            case ApprovalResolved(request_id=request_id):
                self._withdraw(request_id)
            case TurnCompleted(input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost, cache_read_tokens=cached):
                self.last_usage = (tokens_in, tokens_out)
                self.last_cached = cached
                self.total_usage = (self.total_usage[0] + tokens_in, self.total_usage[1] + tokens_out)
                self.last_cost = cost
                if cost is not None:
                    self.total_cost = (self.total_cost or 0.0) + cost
                self._turn_ended(item)
            case TurnFailed() | TurnCancelled():
                self._turn_ended(item)
            case ContextCompressed():
                self.compressions += 1
            case _:
                pass
        self.seen.append(item)
        self._changed.set()
        self._changed = asyncio.Event()
        self._refresh_status()

    def _turn_ended(self, event: SessionEvent) -> None:
        for request_id, screen in list(self._questions.items()):
            if screen.request.turn_id == event.turn_id:
                self._withdraw(request_id)
        if self.conversation.running is None:
            self.state, self._cancelling = "idle", False

    def _withdraw(self, request_id: str) -> None:
        """The question was answered elsewhere, timed out, or its turn ended: close it."""
        screen = self._questions.pop(request_id, None)
        if screen is not None and screen in self.screen_stack:
            screen.withdraw()

    def _approved(self, request: ApprovalRequested, choice: ApprovalChoice | None) -> None:
        if self._questions.pop(request.request_id, None) is None or choice is None:
            return
        self._call(lambda handle: handle.resolve_approval(request.session_id, request.request_id, choice))

    def _answered(self, request: ClarificationRequested, answer: str | None) -> None:
        if self._questions.pop(request.request_id, None) is None:
            return
        if answer is None:
            self.notify("The question is left unanswered; the agent goes on without an answer when it times out.")
            return
        self._call(lambda handle: handle.answer_clarification(request.session_id, request.request_id, answer))

    def _call(self, request: Callable[[SessionHandle], Awaitable[object]], *, failed: Callable[[], None] | None = None) -> None:
        """Send a request to the session in the background; a failure becomes a notice."""
        handle = self.handle
        if handle is None:
            return

        async def run() -> None:
            try:
                await request(handle)
            except TuiError as exc:
                if failed is not None:
                    failed()
                await self.say(f"not done: {exc}", "error")

        self.run_worker(run(), exit_on_error=False)

    async def wait_for_event(self, predicate: Callable[[StreamItem], bool], *, timeout: float = 10.0, start: int = 0) -> StreamItem:
        """The first handled event from index ``start`` on that satisfies ``predicate`` (waits up to ``timeout``)."""
        async with asyncio.timeout(timeout):
            while True:
                for item in self.seen[start:]:
                    if predicate(item):
                        return item
                start = len(self.seen)
                await self._changed.wait()

    # -- the prompt -----------------------------------------------------------------------------

    @on(TextArea.Changed, "#prompt")
    def _typed(self, event: TextArea.Changed) -> None:
        hint = self.query_one("#hint", Static)
        found = matching(event.text_area.text)
        hint.update(Content("   ".join(f"{c.usage} — {c.help}" for c in found[:4])))
        hint.set_class(bool(found), "-shown")

    @on(PromptArea.Submitted)
    async def _submitted(self, message: PromptArea.Submitted) -> None:
        command = parse(message.text)
        if command is not None:
            self.run_worker(self.commands.run(command), group="command", exit_on_error=False)
            return
        text = message.text[1:] if message.text.lstrip().startswith("//") else message.text
        if self.state == "not connected":
            await self.conversation.user(text, pending=False)
            await self.say("not sent: there is no session runtime (see above)", "error")
            return
        await self.conversation.user(text)
        if self.handle is None:
            self._waiting.append(text)
            return
        await self.send(text)

    async def send(self, text: str) -> None:
        """Start a turn with ``text`` (already shown); the first message of a new session names it."""
        self.last_text = text
        title = " ".join(text.split())[:TITLE_LENGTH] if self._fresh else None
        self._fresh = False
        session_id = self.session_id

        def unsent() -> None:
            if text in self.conversation.sent:
                self.conversation.sent.remove(text)

        self._call(lambda handle: handle.start_turn(session_id, text, title=title), failed=unsent)

    async def compress(self, focus: str) -> None:
        """``/compress [topic]``: a turn of the session's own (queued behind a running one)."""
        if self._fresh:
            await self.say("nothing to compress yet: this session has no messages", "dim")
            return
        shown = f"/compress {focus}".rstrip()
        await self.conversation.user(shown)
        session_id = self.session_id

        def unsent() -> None:
            if shown in self.conversation.sent:
                self.conversation.sent.remove(shown)

        self._call(lambda handle: handle.compress(session_id, focus), failed=unsent)

    # -- keys -----------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn runs, or a message was sent and its turn has not started yet."""
        return self.conversation.running is not None or bool(self.conversation.sent) or self._cancelling

    async def action_stop(self) -> None:
        if self.busy:
            await self.cancel_turn()

    async def action_interrupt(self) -> None:
        if self.busy and self.handle is not None:
            await self.cancel_turn()
            return
        now = self.clock()
        if now - self._last_interrupt < QUIT_WINDOW:
            self.quit()
            return
        self._last_interrupt = now
        self.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW)

    async def action_quit(self) -> None:
        self.quit()

    async def cancel_turn(self) -> None:
        """Cancel the running turn; the transcript says so at once, the session's answer follows."""
        if self.handle is None:
            return
        if not self._cancelling:
            self._cancelling = True
            self.state = "cancelling..."
            await self.conversation.cancelling()
            self._refresh_status()
        session_id = self.session_id
        self._call(lambda handle: handle.cancel_turn(session_id))
