"""Modal questions: an approval (once / session / always / deny), a clarification, the session picker."""

from __future__ import annotations

import datetime
from typing import TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from protocols import ApprovalChoice, ApprovalRequested, ClarificationRequested, SessionRecord

R = TypeVar("R")


class Question(ModalScreen[R]):
    """A modal that the session may withdraw (answered elsewhere, timed out, turn ended)."""

    withdrawn = False

    def withdraw(self) -> None:
        """Close with no answer, now if on top, else as soon as it comes back on top."""
        if self.app.screen is self:
            self.dismiss(None)
        else:
            self.withdrawn = True

    def on_screen_resume(self) -> None:
        if self.withdrawn:
            self.dismiss(None)


CHOICES: tuple[tuple[ApprovalChoice, str, str], ...] = (
    ("once", "o", "Allow once"),
    ("session", "s", "Allow for this session"),
    ("always", "a", "Always allow"),
    ("deny", "d", "Deny"),
)


class ApprovalScreen(Question[ApprovalChoice | None]):
    """A tool wants to run something dangerous. Esc denies; None means the question went away."""

    BINDINGS = [
        *(Binding(key, f"choose('{choice}')", label, show=False) for choice, key, label in CHOICES),
        Binding("escape", "choose('deny')", "Deny", show=False),
    ]

    def __init__(self, request: ApprovalRequested) -> None:
        super().__init__(classes="question")
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content.styled("The agent asks to run:", "bold"))
            yield Static(Content(self.request.command), classes="command")
            for reason in self.request.reasons:
                yield Static(Content(f"• {reason}"), classes="reason")
            yield Static(Content(f"Denied by itself after {self.request.timeout_s:.0f} s without an answer."), classes="dim")
            with Horizontal(classes="buttons"):
                for choice, key, label in CHOICES:
                    yield Button(Content(f"{label} ({key})"), id=f"choice-{choice}", variant="error" if choice == "deny" else "primary")

    def action_choose(self, choice: ApprovalChoice) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        choice = (event.button.id or "").removeprefix("choice-")
        for known, _, _ in CHOICES:
            if known == choice:
                self.dismiss(known)


class ClarifyScreen(Question[str | None]):
    """The agent asks the person something. A choice's number or free text answers; Esc leaves it unanswered."""

    BINDINGS = [Binding("escape", "leave", "Leave unanswered", show=False)]

    def __init__(self, request: ClarificationRequested) -> None:
        super().__init__(classes="question")
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content.styled("The agent asks:", "bold"))
            yield Static(Content(self.request.question), classes="command")
            for number, choice in enumerate(self.request.choices, 1):
                yield Button(Content(f"{number}. {choice}"), id=f"option-{number}")
            hint = "a number, or your own answer" if self.request.choices else "your answer"
            yield Input(placeholder=f"Type {hint} and press Enter", id="answer")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    def action_leave(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        number = int((event.button.id or "option-0").removeprefix("option-"))
        if 1 <= number <= len(self.request.choices):
            self.dismiss(self.request.choices[number - 1])

    @on(Input.Submitted, "#answer")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text.isdigit() and 1 <= int(text) <= len(self.request.choices):
            text = self.request.choices[int(text) - 1]
        if text:
            self.dismiss(text)


def session_label(record: SessionRecord) -> Content:
    when = datetime.datetime.fromtimestamp(record.started_at).strftime("%Y-%m-%d %H:%M") if record.started_at else "?"
    return Content.assemble(
        (when, "dim"), "  ", (record.title or "(untitled)", "bold"), "  ", (record.id, "dim"), "  ", (f"{record.message_count} messages", "dim")
    )


def matches(record: SessionRecord, words: str) -> bool:
    """Every word of ``words`` appears in the session's title, id, source or model."""
    haystack = " ".join(filter(None, (record.title, record.id, record.source, record.model))).lower()
    return all(word in haystack for word in words.lower().split())


class SessionsScreen(ModalScreen[str | None]):
    """A searchable list of sessions; Enter resumes the highlighted one, Esc closes."""

    BINDINGS = [Binding("escape", "close", "Close", show=False), Binding("down", "into_list", show=False)]

    def __init__(self, records: list[SessionRecord], query: str = "") -> None:
        super().__init__(classes="question")
        self.records = records
        self.query_text = query

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog sessions"):
            yield Static(Content.styled("Sessions (type to filter, Enter resumes, Esc closes)", "bold"))
            yield Input(value=self.query_text, placeholder="words in the title or id", id="filter")
            yield OptionList(id="sessions")

    def on_mount(self) -> None:
        self._fill(self.query_text)
        self.query_one("#filter", Input).focus()

    def _fill(self, words: str) -> None:
        found = [r for r in self.records if matches(r, words)]
        options = self.query_one("#sessions", OptionList)
        options.clear_options()
        options.add_options([Option(session_label(r), id=r.id) for r in found] or [Option("no session matches", disabled=True)])
        options.highlighted = 0 if found else None

    @on(Input.Changed, "#filter")
    def _filter(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#filter")
    def _take_first(self, event: Input.Submitted) -> None:
        options = self.query_one("#sessions", OptionList)
        if options.highlighted is not None:
            option = options.get_option_at_index(options.highlighted)
            if option.id is not None:
                self.dismiss(option.id)

    @on(OptionList.OptionSelected, "#sessions")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(event.option.id)

    def action_into_list(self) -> None:
        self.query_one("#sessions", OptionList).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    @property
    def shown(self) -> list[str]:
        """Ids of the sessions listed now (for tests and screen readers)."""
        options = self.query_one("#sessions", OptionList)
        return [o.id for o in (options.get_option_at_index(i) for i in range(options.option_count)) if o.id is not None]
