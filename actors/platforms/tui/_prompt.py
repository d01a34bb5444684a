"""The prompt: a multi-line input with history and slash-command completion.

Enter sends. Ctrl+J, Shift+Enter or Alt+Enter (where the terminal reports them) start a new
line, and so does Enter after a trailing backslash (every terminal sends that). Up on the
first line and Down on the last walk the history, which is kept as JSON lines so that
multi-line entries survive. Tab completes a slash command when one matches.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
from textual import events
from textual.message import Message
from textual.widgets import TextArea

from ._commands import complete

log = logging.getLogger(__name__)

NEWLINE_KEYS = frozenset({"ctrl+j", "shift+enter", "alt+enter", "ctrl+enter"})
HISTORY_LIMIT = 1000


class History:
    """What was sent, oldest first; optionally kept in a file between runs."""

    def __init__(self, path: Path | None = None, *, limit: int = HISTORY_LIMIT) -> None:
        self.path = path
        self.limit = limit
        self.entries: list[str] = self._load()
        self._index = len(self.entries)
        self._draft = ""

    def _load(self) -> list[str]:
        if self.path is None:
            return []
        try:
            lines = self.path.read_bytes().splitlines()
        except OSError:
            return []
        entries = []
        for line in lines[-self.limit :]:
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue  # a torn last line after a crash
            if isinstance(entry, str):
                entries.append(entry)
        return entries

    def add(self, text: str) -> None:
        if text.strip() and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
            del self.entries[: -self.limit]
            if self.path is not None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    with self.path.open("ab") as f:
                        f.write(msgspec.json.encode(text) + b"\n")
                except OSError as exc:
                    log.warning("the prompt history could not be saved: %s", exc)
        self._index = len(self.entries)
        self._draft = ""

    def previous(self, current: str) -> str | None:
        if self._index == 0:
            return None
        if self._index == len(self.entries):
            self._draft = current
        self._index -= 1
        return self.entries[self._index]

    def next(self) -> str | None:
        if self._index >= len(self.entries):
            return None
        self._index += 1
        return self._draft if self._index == len(self.entries) else self.entries[self._index]


class PromptArea(TextArea):
    """The input box."""

    class Submitted(Message):
        """The person pressed Enter on some text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, history: History, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus", compact=True, placeholder="Ask anything, or /help")
        self.prompt_history = history

    def put(self, text: str) -> None:
        """Replace the input with ``text``, cursor at the end (for editing it)."""
        self.load_text(text)
        self.move_cursor(self.document.end)

    _set = put

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        handled = True
        if key == "enter":
            text = self.text
            if text.endswith("\\") and self.cursor_location == self.document.end:
                self._set(text[:-1] + "\n")
            elif text.strip():
                self.prompt_history.add(text)
                self.load_text("")
                self.post_message(self.Submitted(text))
        elif key in NEWLINE_KEYS:
            self.insert("\n")
        elif key == "tab" and (completed := complete(self.text)) is not None:
            self._set(completed)
        elif key == "up" and self.cursor_at_first_line and (earlier := self.prompt_history.previous(self.text)) is not None:
            self._set(earlier)
        elif key == "down" and self.cursor_at_last_line and (later := self.prompt_history.next()) is not None:
            self._set(later)
        else:
            handled = False
        if handled:
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)
