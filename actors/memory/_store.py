"""The built-in memory: MEMORY.md (the agent's notes) and USER.md (about the user).

Both live in ``HERMES_HOME/memories/``, as in Hermes. A file is a list of entries joined by
a line holding only ``§``. Each target has a character limit (not tokens: the limit should
not depend on the model): 2,200 for memory, 1,375 for the user profile, counted over the
entries and their separators.

Changes are read-modify-write cycles under the file's lock (:func:`exclusive`), and every
write replaces the file atomically. Each operation re-reads the file, so two sessions
sharing a HERMES_HOME never overwrite each other's entries.

:class:`MemoryStore` is plain synchronous code doing file I/O: never call it from the reactor
itself. In a runtime, its one user is the built-in provider's actor ``/memory/builtin``
(``_builtin.py``, ``_actor.py``), which serves the memory tool's requests as messages, one at a
time; the per-file lock still keeps out other processes sharing the HERMES_HOME.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from actors import UsageError

from ._errors import EntryAmbiguous, EntryNotFound, InvalidEntry, OverLimit, ThreatBlocked
from ._files import atomic_write_text, exclusive
from ._threats import scan_text

MemoryTarget = Literal["memory", "user"]

MEMORY_FOLDER = "memories"
SEPARATOR = "\n§\n"
"""Between two entries in the file (Hermes's format)."""
MEMORY_LIMIT = 2_200
USER_LIMIT = 1_375
FILE_NAMES: dict[MemoryTarget, str] = {"memory": "MEMORY.md", "user": "USER.md"}

_NAMES: dict[str, str] = {target: name for target, name in FILE_NAMES.items()}
_SEPARATOR_LINE = re.compile(r"\n[ \t]*§[ \t]*\n")


def parse_entries(text: str) -> list[str]:
    """The entries of a memory file: split at separator lines, stripped, empty and repeated ones dropped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = (part.strip() for part in _SEPARATOR_LINE.split(f"\n{text}\n"))
    return list(dict.fromkeys(part for part in parts if part))


def render_entries(entries: list[str] | tuple[str, ...]) -> str:
    """The entries as stored (without the final newline); its length is what the limit counts."""
    return SEPARATOR.join(entries)


@dataclasses.dataclass(frozen=True, slots=True)
class MemorySettings:
    """``memory:`` in config.yaml: which files are in use and their limits."""

    memory_enabled: bool = True
    user_enabled: bool = True
    memory_limit: int = MEMORY_LIMIT
    user_limit: int = USER_LIMIT

    def enabled(self, target: MemoryTarget) -> bool:
        return self.memory_enabled if target == "memory" else self.user_enabled

    def store(self, home: Path) -> MemoryStore:
        return MemoryStore(home, memory_limit=self.memory_limit, user_limit=self.user_limit)


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryChange:
    """The outcome of one operation: what the file holds now."""

    target: MemoryTarget
    file_name: str
    entries: tuple[str, ...]
    used: int
    """Characters the entries take, separators included."""
    limit: int
    changed: bool
    """False when the file already held what was asked (a repeated entry)."""
    note: str
    """One line on what happened, for the model."""


class MemoryStore:
    """Owns ``memories/MEMORY.md`` and ``memories/USER.md`` under one HERMES_HOME."""

    def __init__(self, home: Path, *, memory_limit: int = MEMORY_LIMIT, user_limit: int = USER_LIMIT) -> None:
        self.folder = home / MEMORY_FOLDER
        self._limits: dict[MemoryTarget, int] = {"memory": memory_limit, "user": user_limit}

    def path(self, target: MemoryTarget) -> Path:
        return self.folder / _file_name(target)

    def limit(self, target: MemoryTarget) -> int:
        _file_name(target)
        return self._limits[target]

    def entries(self, target: MemoryTarget) -> list[str]:
        """The entries on disk now (empty when the file does not exist)."""
        return self._read(self.path(target))

    def add(self, target: MemoryTarget, content: str) -> MemoryChange:
        """Append an entry (a repeat of an existing entry changes nothing).

        Raises:
            InvalidEntry, ThreatBlocked, OverLimit: nothing was written.
        """
        entry = self._checked(target, content)

        def mutate(entries: list[str]) -> tuple[list[str], str]:
            if entry in entries:
                return entries, "that entry is there already; nothing added"
            return [*entries, entry], "entry added"

        return self._change(target, mutate)

    def replace(self, target: MemoryTarget, old_text: str, content: str) -> MemoryChange:
        """Replace the one entry containing ``old_text`` (an entry equal to it wins) by ``content``.

        Raises:
            EntryNotFound, EntryAmbiguous, InvalidEntry, ThreatBlocked, OverLimit: nothing was written.
        """
        entry = self._checked(target, content)

        def mutate(entries: list[str]) -> tuple[list[str], str]:
            index = self._find(target, entries, old_text)
            if entries[index] == entry:
                return entries, "the entry already says that; nothing changed"
            if entry in entries:
                del entries[index]
                return entries, "entry replaced (the new text equals another entry, so the two were merged)"
            entries[index] = entry
            return entries, "entry replaced"

        return self._change(target, mutate)

    def remove(self, target: MemoryTarget, old_text: str) -> MemoryChange:
        """Remove the one entry containing ``old_text`` (an entry equal to it wins).

        Raises:
            EntryNotFound, EntryAmbiguous: nothing was written.
        """

        def mutate(entries: list[str]) -> tuple[list[str], str]:
            del entries[self._find(target, entries, old_text)]
            return entries, "entry removed"

        return self._change(target, mutate)

    # -- internals --------------------------------------------------------------------------

    def _change(self, target: MemoryTarget, mutate: Callable[[list[str]], tuple[list[str], str]]) -> MemoryChange:
        path = self.path(target)
        limit = self.limit(target)
        with exclusive(path):
            before = self._read(path)
            after, note = mutate(list(before))
            changed = after != before
            if changed:
                used = len(render_entries(after))
                if used > limit and used > len(render_entries(before)):
                    over = used - limit
                    msg = (
                        f"{path.name} would hold {used:,}/{limit:,} characters, over the limit by {over:,} characters: "
                        "replace or remove entries first (or save a shorter entry); nothing was written"
                    )
                    raise OverLimit(msg, over)
                atomic_write_text(path, render_entries(after) + "\n" if after else "", mode=0o600)
        return MemoryChange(
            target=target,
            file_name=path.name,
            entries=tuple(after),
            used=len(render_entries(after)),
            limit=limit,
            changed=changed,
            note=note,
        )

    def _checked(self, target: MemoryTarget, content: str) -> str:
        name = _file_name(target)
        entry = content.strip()
        if not entry:
            msg = f"the entry for {name} is empty: give the text to remember"
            raise InvalidEntry(msg)
        if _SEPARATOR_LINE.search(f"\n{entry}\n"):
            msg = "an entry may not contain a line holding only '§': that line separates entries; save them one by one"
            raise InvalidEntry(msg)
        threat = scan_text(entry)
        if threat is not None:
            msg = (
                f"refused to save to {name}: {threat.reason}. Memory goes into the system prompt of new sessions, "
                "so it may not hold instructions that override it, commands that leak secrets, secrets, or invisible characters"
            )
            raise ThreatBlocked(msg)
        return entry

    def _find(self, target: MemoryTarget, entries: list[str], old_text: str) -> int:
        name = _file_name(target)
        needle = old_text.strip()
        if not needle:
            msg = f"old_text is empty: quote a part of the {name} entry to change"
            raise InvalidEntry(msg)
        if needle in entries:
            return entries.index(needle)  # a whole entry matches: no ambiguity with longer ones
        hits = [index for index, entry in enumerate(entries) if needle in entry]
        if not hits:
            msg = f"no {name} entry contains {_short(needle)!r}; nothing changed"
            raise EntryNotFound(msg)
        if len(hits) > 1:
            msg = f"{len(hits)} {name} entries contain {_short(needle)!r}; quote more of the one you mean so that exactly one matches"
            raise EntryAmbiguous(msg, len(hits))
        return hits[0]

    @staticmethod
    def _read(path: Path) -> list[str]:
        try:
            return parse_entries(path.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            return []


def _file_name(target: str) -> str:
    name = _NAMES.get(target)
    if name is None:
        msg = f"unknown memory target {target!r}: use 'memory' (your notes) or 'user' (about the user)"
        raise UsageError(msg)
    return name


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
