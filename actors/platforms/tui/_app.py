"""The full-screen chat: transcript, prompt, status bar; questions as modals; slash commands.

The app starts with only Textual and the typed messages imported. The session handle
(the runtime, or an HTTP client) is built by ``connect`` in a worker thread, so the prompt
takes input at once; what is sent before the handle is ready goes out when it is.

Events reach the app from any thread through :meth:`ChatApp.post_message` (thread-safe, it
never blocks the hub or the reactor) and are handled one at a time, in sequence order, on
the app's loop.
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
    SessionEvent,
    SessionRecord,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

from ._commands import Parsed, did_you_mean, help_text, matching, parse
from ._conversation import Conversation
from ._handle import Attachment, SessionHandle, StreamItem, TuiError
from ._modals import ApprovalScreen, ClarifyScreen, SessionsScreen
from ._prompt import History, PromptArea
from ._widgets import NoticeKind, StatusBar

log = logging.getLogger(__name__)

QUIT_WINDOW = 2.0
"""Seconds within which a second Ctrl+C at an idle prompt quits."""
TITLE_LENGTH = 60

CSS = """
Screen { layout: vertical; }
#log { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
#hint { height: auto; padding: 0 1; color: $text-muted; display: none; }
#hint.-shown { display: block; }
#prompt { height: auto; max-height: 10; border-top: solid $primary; padding: 0 1; }
#status { height: 1; padding: 0 1; background: $panel; }
.user { margin-top: 1; color: $accent; text-style: bold; }
.notice { color: $text-muted; }
.notice.warn { color: $warning; }
.notice.error { color: $error; }
.assistant { height: auto; }
.answer { margin: 0; padding: 0; }
.reasoning { color: $text-muted; text-style: italic; border: none; padding: 0; margin: 0; }
.reasoning Contents { padding: 0 0 0 2; }
.tool { height: auto; }
.tool-header { color: $text; }
.tool-header:focus { background: $boost; }
.tool-output { color: $text-muted; padding: 0 0 0 2; max-height: 20; overflow-y: auto; }
ModalScreen.question { align: center middle; }
.dialog { width: 90%; max-width: 100; height: auto; max-height: 90%; border: thick $accent; background: $surface; padding: 1 2; }
.dialog .command { margin: 1 0; padding: 0 1; background: $boost; }
.dialog .dim { color: $text-muted; }
.dialog .buttons { height: auto; margin-top: 1; }
.dialog Button { margin-right: 1; }
.dialog.sessions OptionList { height: auto; max-height: 20; }
"""


def new_session_id() -> str:
    return f"sess_{uuid.uuid4().hex[:24]}"


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
        """``connect`` builds the handle (it may block: it runs in a worker thread).

        ``session_id`` with ``resume`` shows that session's transcript and follows it
        (``hermes attach``, ``hermes chat --resume``); otherwise a new session starts.
        """
        super().__init__()
        self._connect = connect
        self.handle: SessionHandle | None = None
        self.session_id = session_id or new_session_id()
        self._resume_first = resume
        self.history = history or History()
        self.clock = clock
        self.exit_code = 0
        self.failure: str | None = None
        """Why there is no session runtime (printed again after the screen closes)."""
        self.seen: list[StreamItem] = []
        """Every event handled (rendered) so far, in order; :meth:`wait_for_event` reads it."""
        self._changed = asyncio.Event()
        self.opened = asyncio.Event()
        """Set once connecting ended: the handle follows the session, or the app said why not."""
        self._attachment: Attachment | None = None
        self._holding: list[StreamItem] | None = None
        self._waiting: list[str] = []
        self._fresh = True
        self._last_text: str | None = None
        self._cancelling = False
        self._turn_started = 0.0
        self._last_interrupt = -QUIT_WINDOW
        self._questions: dict[str, ApprovalScreen | ClarifyScreen] = {}
        self.last_usage: tuple[int, int] | None = None
        self.total_usage = (0, 0)
        self.state = "starting..."

    # -- layout ---------------------------------------------------------------------------------

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
        await self._close_handle()

    async def _close_handle(self) -> None:
        handle, self.handle = self.handle, None
        if self._attachment is not None:
            self._attachment.close()
            self._attachment = None
        if handle is not None:
            await handle.aclose()

    def _refresh_status(self) -> None:
        state = self.state
        if state == "running":
            state = f"running {self.clock() - self._turn_started:.1f}s"
        label = self.handle.label if self.handle else "..."
        model = self.handle.model if self.handle else "..."
        self.query_one(StatusBar).show(label=label, model=model, session_id=self.session_id, state=state, last=self.last_usage, total=self.total_usage)

    def _tick(self) -> None:
        self.conversation.tick()
        if self.state == "running":
            self._refresh_status()

    # -- connecting and switching sessions ------------------------------------------------------

    async def _open_and_signal(self) -> None:
        try:
            await self._open()
        finally:
            self.opened.set()

    async def _open(self) -> None:
        try:
            handle = await asyncio.to_thread(self._connect)
        except TuiError as exc:
            await self._unavailable(str(exc), getattr(exc, "exit_code", 1))
            return
        except Exception as exc:  # noqa: BLE001 - shown to the person, who can only quit
            log.exception("the session runtime could not start")
            await self._unavailable(f"the session runtime could not start: {exc}", 1)
            return
        try:
            await handle.open()
        except TuiError as exc:
            await handle.aclose()
            await self._unavailable(str(exc), getattr(exc, "exit_code", 1))
            return
        self.handle = handle
        try:
            await self._switch(self.session_id, fresh=not self._resume_first)
        except TuiError as exc:
            await self._unavailable(str(exc), getattr(exc, "exit_code", 1))
            return
        waiting, self._waiting = self._waiting, []
        for text in waiting:
            await self._send(text)

    async def _unavailable(self, why: str, exit_code: int) -> None:
        self.exit_code = exit_code
        self.failure = why
        self.state = "not connected"
        await self.conversation.notice(why, "error")
        await self.conversation.notice("Nothing can be sent. Fix the above and start again; Ctrl+C twice quits.", "dim")
        self._refresh_status()

    def _sink(self, item: StreamItem) -> None:
        self.post_message(SessionEventArrived(item))

    async def _switch(self, session_id: str, *, fresh: bool) -> None:
        """Follow ``session_id``: a new one (``fresh``), or an existing one with its transcript."""
        assert self.handle is not None
        if self._attachment is not None:
            self._attachment.close()
        self.session_id = session_id
        self._fresh = fresh
        self._questions.clear()
        self.last_usage, self.total_usage = None, (0, 0)
        self.state, self._cancelling = "idle", False
        await self.conversation.clear()
        self._refresh_status()
        if fresh:
            self._attachment = await self.handle.attach(session_id, self._sink, after_seq=0)
            return
        # Attach first (new events only), show the stored transcript, then the events that
        # arrived meanwhile: nothing is missed, and the order on screen is the real one.
        self._holding = []
        try:
            self._attachment = await self.handle.attach(session_id, self._sink)
            record = await self.handle.get_session(session_id)
            messages = await self.handle.transcript(session_id)
            await self.conversation.show_transcript(messages)
            if record is not None:
                self.total_usage = (record.input_tokens, record.output_tokens)
                self._fresh = False
            else:
                self._fresh = True
                await self.conversation.notice(f"session {session_id} has no stored messages yet; following its events", "dim")
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
            case TurnCompleted(input_tokens=tokens_in, output_tokens=tokens_out):
                self.last_usage = (tokens_in, tokens_out)
                self.total_usage = (self.total_usage[0] + tokens_in, self.total_usage[1] + tokens_out)
                self._turn_ended(item)
            case TurnFailed() | TurnCancelled():
                self._turn_ended(item)
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

    def _call(self, request: Callable[[SessionHandle], Awaitable[object]]) -> None:
        """Send a request to the session in the background; failures become a notice."""

        async def run() -> None:
            if self.handle is None:
                return
            try:
                await request(self.handle)
            except TuiError as exc:
                await self.conversation.notice(str(exc), "error")

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
            self.run_worker(self._command(command), group="command", exit_on_error=False)
            return
        text = message.text[1:] if message.text.lstrip().startswith("//") else message.text
        if self.state == "not connected":
            await self.conversation.user(text, pending=False)
            await self.conversation.notice("not sent: there is no session runtime (see above)", "error")
            return
        await self.conversation.user(text)
        if self.handle is None:
            self._waiting.append(text)
            return
        await self._send(text)

    async def _send(self, text: str) -> None:
        handle = self.handle
        assert handle is not None
        self._last_text = text
        title = " ".join(text.split())[:TITLE_LENGTH] if self._fresh else None
        self._fresh = False
        session_id = self.session_id

        async def start() -> None:
            try:
                await handle.start_turn(session_id, text, title=title)
            except TuiError as exc:
                if text in self.conversation.sent:
                    self.conversation.sent.remove(text)
                await self.conversation.notice(f"not sent: {exc}", "error")

        self.run_worker(start(), exit_on_error=False)

    # -- keys -----------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn runs, or a message was sent and its turn has not started yet."""
        return self.conversation.running is not None or bool(self.conversation.sent) or self._cancelling

    async def action_stop(self) -> None:
        if self.busy:
            await self._cancel()

    async def action_interrupt(self) -> None:
        if self.busy and self.handle is not None:
            await self._cancel()
            return
        now = self.clock()
        if now - self._last_interrupt < QUIT_WINDOW:
            self.exit(self.exit_code, return_code=self.exit_code)
            return
        self._last_interrupt = now
        self.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW)

    async def action_quit(self) -> None:
        self.exit(self.exit_code, return_code=self.exit_code)

    async def _cancel(self) -> None:
        if self.handle is None:
            return
        if not self._cancelling:
            self._cancelling = True
            self.state = "cancelling..."
            await self.conversation.cancelling()
            self._refresh_status()
        session_id = self.session_id
        self._call(lambda handle: handle.cancel_turn(session_id))

    # -- slash commands -------------------------------------------------------------------------

    async def _say(self, text: str, kind: NoticeKind = "info") -> None:
        await self.conversation.notice(text, kind)

    async def _command(self, command: Parsed) -> None:
        try:
            await self._run_command(command)
        except TuiError as exc:
            await self._say(str(exc), "error")

    async def _run_command(self, command: Parsed) -> None:
        name, argument = command.name, command.argument
        if name in ("quit", "exit", "q"):
            self.exit(self.exit_code, return_code=self.exit_code)
            return
        if name == "help":
            await self._say(help_text())
            return
        if name not in {"new", "resume", "sessions", "model", "tools", "stop", "retry", "undo", "usage", "tree"}:
            await self._say(did_you_mean(name), "error")
            return
        if name == "undo":
            await self._say(
                "/undo is not available yet: the session store cannot take messages back, and hiding them on screen "
                "would not change what the model sees. Start over with /new (or fork the session through the API).",
                "error",
            )
            return
        handle = self.handle
        if handle is None:
            await self._say("the session runtime is still starting; try again in a moment", "error")
            return
        match name:
            case "new":
                await self._switch(new_session_id(), fresh=True)
                await self._say(f"new session {self.session_id}", "dim")
            case "resume" if not argument:
                await self._pick_session("")
            case "resume":
                await self._resume(handle, argument)
            case "sessions":
                await self._pick_session(argument)
            case "model":
                text = f"model: {handle.model} (sessions run at {handle.label})"
                if argument:
                    text += ". Switching models from here is not available yet: set model.default in HERMES_HOME/config.yaml and start again."
                await self._say(text)
            case "tools":
                tools = await handle.tools()
                await self._say("tools: " + ", ".join(tools) if tools is not None else "the server does not publish its tool list")
            case "stop":
                if self.busy:
                    await self._cancel()
                else:
                    await self._say("no turn is running", "dim")
            case "retry":
                if self._last_text is None:
                    await self._say("nothing to retry yet: send a message first", "dim")
                else:
                    await self.conversation.user(self._last_text)
                    await self._send(self._last_text)
            case "usage":
                await self._usage(handle)
            case "tree":
                await self._say(await handle.tree())

    async def _usage(self, handle: SessionHandle) -> None:
        last = f"last turn: {self.last_usage[0]} in, {self.last_usage[1]} out" if self.last_usage else "no turn finished yet"
        record = await handle.get_session(self.session_id)
        stored = ""
        if record is not None:
            tokens = f", {record.input_tokens} in, {record.output_tokens} out" if record.input_tokens or record.output_tokens else ""
            stored = f"; the session in the store: {record.message_count} messages{tokens}"
        await self._say(f"{last}; this session here: {self.total_usage[0]} in, {self.total_usage[1]} out{stored}")

    async def _resume(self, handle: SessionHandle, wanted: str) -> None:
        record = await handle.get_session(wanted)
        if record is None:
            records = await handle.list_sessions()
            lowered = wanted.lower()
            found = [r for r in records if (r.title or "").lower() == lowered]
            found = found or [r for r in records if r.id.startswith(wanted) or lowered in (r.title or "").lower()]
            if not found:
                await self._say(f"no session has the id or title {wanted!r}; /sessions lists them", "error")
                return
            if len(found) > 1:
                await self._pick_session(wanted, found)
                return
            record = found[0]
        await self._switch(record.id, fresh=False)
        await self._say(f"resumed {record.title or record.id}", "dim")

    async def _pick_session(self, query: str, records: list[SessionRecord] | None = None) -> None:
        assert self.handle is not None
        found = records if records is not None else await self.handle.list_sessions()
        if not found:
            await self._say("there are no stored sessions yet", "dim")
            return

        def chosen(session_id: str | None) -> None:
            if session_id is not None and self.handle is not None:
                self.run_worker(self._command(Parsed(name="resume", argument=session_id)), group="command", exit_on_error=False)

        await self.push_screen(SessionsScreen(found, "" if records is not None else query), chosen)


def default_history(home: Path) -> History:
    return History(home / "tui_history.jsonl")
