"""What the transcript is made of: user lines, assistant blocks, tool lines, notices, the status bar.

Text that comes from the model, tools or the person is never read as markup.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Collapsible, Static

if TYPE_CHECKING:  # the Markdown widget (and its parser) load with the first answer, not at start-up
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownStream

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PREVIEW_KEYS = ("command", "code", "path", "pattern", "query", "url", "question", "goal", "action", "name")
NoticeKind = Literal["info", "dim", "warn", "error"]


def argument_preview(arguments: str, width: int = 60) -> str:
    """A one-line glimpse of a tool call's arguments: the telling field when there is one."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        text = arguments
    else:
        found = next((value[k] for k in PREVIEW_KEYS if isinstance(value, dict) and isinstance(value.get(k), str)), None)
        text = found if found is not None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if text == "{}":
            text = ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s"


class UserLine(Static):
    """What the person sent."""

    def __init__(self, text: str) -> None:
        super().__init__(Content.assemble(("› ", "bold"), text), classes="user")
        self.text = text


class Notice(Static):
    """A line about the conversation rather than in it (cancelled, failed, retrying...)."""

    def __init__(self, text: str, kind: NoticeKind = "info") -> None:
        super().__init__(Content(text), classes=f"notice {kind}")
        self.text = text
        self.kind = kind

    def set_text(self, text: str) -> None:
        self.text = text
        self.update(Content(text))


class AssistantBlock(Vertical):
    """One stretch of assistant text, with its reasoning (dimmed, collapsible) above it."""

    def __init__(self) -> None:
        super().__init__(classes="assistant")
        self.text = ""
        self.reasoning = ""
        self._stream: MarkdownStream | None = None
        self._reasoning_box: Collapsible | None = None

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown

        yield Markdown("", classes="answer")

    @property
    def body(self) -> Markdown:
        from textual.widgets import Markdown

        return self.query_one(Markdown)

    async def add_text(self, text: str) -> None:
        if self._stream is None:
            from textual.widgets import Markdown

            self._stream = Markdown.get_stream(self.body)
            if self._reasoning_box is not None:
                self._reasoning_box.collapsed = True  # the answer has started: fold the thinking away
        self.text += text
        await self._stream.write(text)

    async def add_reasoning(self, text: str) -> None:
        self.reasoning += text
        if self._reasoning_box is None:
            self._reasoning_box = Collapsible(
                Static(Content(self.reasoning), classes="reasoning-text"), title="Reasoning", collapsed=self._stream is not None, classes="reasoning"
            )
            await self.mount(self._reasoning_box, before=self.body)
        else:
            self._reasoning_box.query_one(".reasoning-text", Static).update(Content(self.reasoning))

    async def finish(self, final_text: str | None = None) -> None:
        """Stop streaming; show ``final_text`` instead when the stream did not carry all of it."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()
        if final_text is not None and final_text != self.text:
            self.text = final_text
            await self.body.update(final_text)


ToolState = Literal["running", "ok", "error", "cancelled"]


class ToolHeader(Static, can_focus=True):
    """The live line of a tool call; Enter or a click shows its output."""

    BINDINGS = [Binding("enter", "show_output", "Show output", show=False)]

    def action_show_output(self) -> None:
        parent = self.parent
        if isinstance(parent, ToolLine):
            parent.toggle()

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.action_show_output()


class ToolLine(Vertical):
    """A tool call: spinner, name, argument preview, duration, then ok or error; expandable to its output."""

    def __init__(self, call_id: str, name: str, arguments: str, started: float, *, timed: bool = True) -> None:
        super().__init__(classes="tool")
        self.timed = timed
        """False for calls from a stored transcript: their duration is not known."""
        self.call_id = call_id
        self.tool_name = name
        self.preview = argument_preview(arguments)
        self.started = started
        self.elapsed = 0.0
        self.state: ToolState = "running"
        self.output = ""
        self._frame = 0

    def compose(self) -> ComposeResult:
        yield ToolHeader(self._header(), classes="tool-header")
        output = Static("", classes="tool-output")
        output.display = False
        yield output

    def _header(self) -> Content:
        marks = {"ok": ("✓", "green"), "error": ("✗", "red"), "cancelled": ("■", "yellow")}
        mark = marks.get(self.state, (SPINNER[self._frame % len(SPINNER)], "bold"))
        tail = (duration(self.elapsed) if self.timed else "") + (" cancelled" if self.state == "cancelled" else "")
        return Content.assemble(mark, " ", (self.tool_name, "bold"), "  ", (self.preview, "dim"), "  ", (tail.strip(), "dim"))

    def _refresh(self) -> None:
        if self.is_mounted:
            self.query_one(ToolHeader).update(self._header())

    def tick(self, now: float) -> None:
        """Advance the spinner and the clock of a running call."""
        if self.state == "running":
            self._frame += 1
            self.elapsed = now - self.started
            self._refresh()

    def finish(self, ok: bool, output: str, now: float) -> None:
        self.state = "ok" if ok else "error"
        self.elapsed = now - self.started
        self.output = output
        if self.is_mounted:
            self.query_one(".tool-output", Static).update(Content(output or "(no output)"))
        self._refresh()

    def interrupt(self, now: float) -> None:
        """The turn was cancelled before this call finished."""
        if self.state == "running":
            self.state = "cancelled"
            self.elapsed = now - self.started
            self._refresh()

    def toggle(self) -> None:
        output = self.query_one(".tool-output", Static)
        output.display = not output.display

    @property
    def expanded(self) -> bool:
        return bool(self.query_one(".tool-output", Static).display)


class StatusBar(Static):
    """One line: where, which model, which session, what is happening, tokens."""

    def show(
        self,
        *,
        label: str,
        model: str,
        session_id: str,
        state: str,
        last: tuple[int, int] | None,
        total: tuple[int, int],
        cost: tuple[float | None, float | None] = (None, None),
        compressions: int = 0,
        cached: int = 0,
    ) -> None:
        """``cost``: (last turn, this session) in USD; None where the model has no prices.
        ``compressions``: how often the session's context was compressed (shown when any).
        ``cached``: of the last turn's input tokens, those read from the provider's prompt cache."""
        parts: list[str | tuple[str, str]] = [(state, "bold"), "  ", model, "  ", (session_id, "dim"), "  ", (label, "dim")]
        if last is not None:
            read = f" ({cached} cached)" if cached else ""
            parts += ["  ", f"last turn ↑{last[0]}{read} ↓{last[1]}" + (f" {usd(cost[0])}" if cost[0] is not None else "")]
        if total != (0, 0):
            parts += ["  ", (f"session ↑{total[0]} ↓{total[1]}" + (f" {usd(cost[1])}" if cost[1] is not None else ""), "dim")]
        if compressions:
            parts += ["  ", (f"compressed ×{compressions}", "dim")]
        self.update(Content.assemble(*parts))


def usd(amount: float) -> str:
    """A cost for people: cents and up to 2 decimals, smaller amounts to 4."""
    return f"${amount:.2f}" if amount >= 0.01 else f"${amount:.4f}"
