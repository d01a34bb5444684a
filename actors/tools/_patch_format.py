"""The multi-file patch text: ``*** Begin Patch`` ... ``*** End Patch``, parsed into operations.

::

    *** Begin Patch
    *** Add File: docs/new.md            every line of the new file, prefixed "+"
    +# Title
    *** Update File: src/app.py
    *** Move to: src/main.py             optional: the file is renamed as well
    @@ def save(path, data):             optional: a line the hunk comes after
     context line                        " " context, "-" removed, "+" added
    -    old line
    +    new line
    *** End of File                      optional: the hunk ends at the end of the file
    *** Delete File: old.txt
    *** End Patch

A hunk starts at each ``@@`` line (the first hunk of a section may leave it out); several
``@@`` lines in a row narrow the place step by step. An empty line inside a hunk is an
empty context line (models drop the lone space). Line numbers after ``@@`` (``@@ -3,4
+3,5 @@``) are ignored: hunks are found by their lines.

Pure: :func:`parse_patch` turns the text into :data:`Operation` values or raises
:class:`MalformedPatch` naming the line.
"""

from __future__ import annotations

import dataclasses
import re

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File:", "*** Delete File:", "*** Update File:", "*** Move to:"
END_OF_FILE = "*** End of File"
_UNIFIED_HEADER = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@\s*(.*)$")
"""The rest of a ``@@ -3,4 +3,5 @@ text`` line after its leading ``@@ ``: only ``text`` is kept."""


class MalformedPatch(Exception):
    """The patch text does not follow the format; the message names the line and what was expected."""


@dataclasses.dataclass(frozen=True, slots=True)
class Hunk:
    """One change inside a file: lines to find (context and removed) and what they become."""

    anchors: tuple[str, ...]
    """The ``@@`` lines' text, each a line the hunk comes after (in order); may be empty."""
    lines: tuple[tuple[str, str], ...]
    """``(" " | "-" | "+", text)`` for each line of the hunk."""
    at_end: bool
    """``*** End of File`` followed it: the hunk's lines end the file."""
    line: int
    """The 1-based line of the patch where the hunk starts (for messages)."""

    @property
    def old(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    @property
    def new(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]

    def title(self) -> str:
        """How messages name the hunk: its last ``@@`` text, or its first line to find."""
        if self.anchors and self.anchors[-1].strip():
            return f"@@ {self.anchors[-1].strip()}"
        first = next((text.strip() for text in self.old if text.strip()), "")
        return f"at {first!r}" if first else f"at patch line {self.line}"


@dataclasses.dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    lines: tuple[str, ...]
    line: int


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str
    line: int


@dataclasses.dataclass(frozen=True, slots=True)
class UpdateFile:
    path: str
    move_to: str | None
    hunks: tuple[Hunk, ...]
    line: int


Operation = AddFile | DeleteFile | UpdateFile


def _path(row: str, marker: str, number: int) -> str:
    path = row[len(marker) :].strip()
    if not path:
        raise MalformedPatch(f"line {number}: {marker!r} needs a file path after it.")
    return path


class _Reader:
    """The patch's lines with a cursor; ``number`` is 1-based for messages."""

    def __init__(self, text: str) -> None:
        self.rows = [row.removesuffix("\r") for row in text.strip().split("\n")]
        self.at = 0

    @property
    def number(self) -> int:
        return self.at + 1

    def peek(self) -> str | None:
        return self.rows[self.at] if self.at < len(self.rows) else None

    def next_section(self) -> int:
        """Index of the next row that starts a section (or ends the patch), or the end."""
        return next((i for i in range(self.at, len(self.rows)) if _is_section(self.rows[i])), len(self.rows))

    def take(self) -> str:
        row = self.rows[self.at]
        self.at += 1
        return row


def _is_section(row: str) -> bool:
    return row.startswith((ADD, DELETE, UPDATE)) or row.rstrip() == END


def _anchor(row: str) -> str:
    rest = row[2:].strip()
    unified = _UNIFIED_HEADER.match(rest)
    return unified.group(1) if unified else rest


def _hunks(reader: _Reader, path: str) -> tuple[Hunk, ...]:
    hunks: list[Hunk] = []
    while (row := reader.peek()) is not None and not _is_section(row):
        start = reader.number
        anchors: list[str] = []
        while (row := reader.peek()) is not None and row.startswith("@@"):
            anchors.append(_anchor(reader.take()))
        lines: list[tuple[str, str]] = []
        blank = 0  # empty rows just read: context lines, unless they only separate this hunk from the next
        at_end = False
        while (row := reader.peek()) is not None and not _is_section(row) and not row.startswith("@@"):
            if row.rstrip() == END_OF_FILE:
                reader.take()
                at_end = True
                break
            if row == "" or row[0] in " -+":
                lines.append((row[:1] or " ", row[1:]))
                blank = blank + 1 if row == "" else 0
                reader.take()
                continue
            raise MalformedPatch(
                f"line {reader.number}: in the hunk of {path}, every line starts with ' ' (context), '-' (removed) or '+' (added); got {row[:60]!r}."
            )
        if blank and not at_end:
            del lines[-blank:]
        if not lines:
            raise MalformedPatch(f"line {start}: a hunk of {path} has no lines; give its ' ', '-' and '+' lines after the @@ line.")
        hunks.append(Hunk(anchors=tuple(anchors), lines=tuple(lines), at_end=at_end, line=start))
    return tuple(hunks)


def _section(reader: _Reader) -> Operation:
    number, head = reader.number, reader.take()
    if head.startswith(ADD):
        path = _path(head, ADD, number)
        lines: list[str] = []
        while (row := reader.peek()) is not None and not _is_section(row):
            if row == "" and all(not later for later in reader.rows[reader.at : reader.next_section()]):
                reader.take()  # empty rows before the next section only separate it
                continue
            if not row.startswith("+"):
                raise MalformedPatch(f"line {reader.number}: every line of an added file starts with '+'; got {row[:60]!r} in {path}.")
            lines.append(reader.take()[1:])
        return AddFile(path=path, lines=tuple(lines), line=number)
    if head.startswith(DELETE):
        return DeleteFile(path=_path(head, DELETE, number), line=number)
    if head.startswith(UPDATE):
        path = _path(head, UPDATE, number)
        move_to = None
        if (row := reader.peek()) is not None and row.startswith(MOVE):
            move_to = _path(row, MOVE, reader.number)
            reader.take()
        hunks = _hunks(reader, path)
        if not hunks and move_to is None:
            raise MalformedPatch(f"line {number}: *** Update File: {path} has no hunks; give at least one @@ hunk (or a *** Move to: line).")
        return UpdateFile(path=path, move_to=move_to, hunks=hunks, line=number)
    expected = f"'{ADD} <path>', '{UPDATE} <path>', '{DELETE} <path>' or '{END}'"
    raise MalformedPatch(f"line {number}: expected {expected}; got {head[:60]!r}.")


def parse_patch(text: str) -> tuple[Operation, ...]:
    """The operations of a ``*** Begin Patch`` ... ``*** End Patch`` text, in order.

    Raises:
        MalformedPatch: the text does not follow the format (the message names the line).
    """
    reader = _Reader(text)
    if reader.peek() is None or reader.take().strip() != BEGIN:
        raise MalformedPatch(f"line 1: a patch starts with the line '{BEGIN}' and ends with '{END}'.")
    operations: list[Operation] = []
    while (row := reader.peek()) is not None and row.rstrip() != END:
        operations.append(_section(reader))
    if reader.peek() is None:
        raise MalformedPatch(f"line {reader.number - 1}: the patch has no '{END}' line; end it with '{END}'.")
    reader.take()
    if reader.peek() is not None:
        raise MalformedPatch(f"line {reader.number}: nothing may follow '{END}'; got {reader.peek()!r:.60}.")
    if not operations:
        raise MalformedPatch("the patch is empty: add at least one *** Add File, *** Update File or *** Delete File section.")
    return tuple(operations)
