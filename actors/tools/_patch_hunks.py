"""Apply the hunks of one ``*** Update File`` section to a file's text, in memory.

Each hunk's context and removed lines are found with the fuzzy chain of :mod:`._fuzzy`
(same strategies, same escape-drift guard as a single replacement), with three rules of
the patch format on top:

- a hunk matches whole lines only;
- it is searched after the previous hunk (and after each of its ``@@`` lines, in order),
  and the first match there is taken: hunks are in file order. (A hunk whose first line
  repeats its ``@@`` line is also looked for from that line on.);
- a hunk marked ``*** End of File`` must end the file (the last match is taken).

A hunk with nothing to find (only ``+`` lines) goes after its ``@@`` line, or at the end
of the file when it has none. A file without a final newline keeps lacking one.

Pure functions of strings; :class:`HunkFailed` names the hunk that could not be applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ._escapes import drift_message, real_controls
from ._fuzzy import STRATEGIES, Edit, Text, find
from ._patch_format import Hunk
from ._replace import similar_hint

OLD_NAME = "the hunk's text to find (its ' ' and '-' lines)"
"""What messages call a hunk's counterpart of old_string."""


class HunkFailed(Exception):
    """A hunk could not be applied; ``index`` is 1-based, the message says why."""

    def __init__(self, index: int, hunk: Hunk, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.hunk = hunk


@dataclasses.dataclass(frozen=True, slots=True)
class Applied:
    text: str
    strategies: tuple[str, ...]
    """The strategy that found each hunk (``"insert"`` for a hunk with nothing to find)."""
    lines: tuple[int, ...]
    """The 1-based line of the original text where each hunk was found (or inserted)."""


def _lines(rows: Sequence[str]) -> str:
    return "".join(row + "\n" for row in rows)


def _anchor_line(text: Text, anchor: str, cursor: int) -> tuple[int, int] | None:
    """The span (with its newline) of the first line at or after ``cursor`` that reads ``anchor`` (as a key)."""
    want = Text(anchor).keys[0]
    for i in range(text.line_of(cursor), len(text.lines)):
        if text.starts[i] >= cursor and text.keys[i] == want:
            return text.span(i, i, trailing_newline=True)
    return None


def _whole_lines(content: str, cursor: int, at_end: bool) -> Callable[[Edit], bool]:
    def accept(edit: Edit) -> bool:
        starts_line = edit.start == 0 or content[edit.start - 1] == "\n"
        ends_line = edit.end == len(content) or content[edit.end - 1] == "\n"
        return starts_line and ends_line and edit.start >= cursor and (not at_end or edit.end == len(content))

    return accept


def apply_hunks(content: str, hunks: Sequence[Hunk], *, crlf: bool = False) -> Applied:
    """``content`` with every hunk applied in order.

    Args:
        crlf: the file's lines end in CRLF (taken out of ``content``); an escaped ``\\r``
            in a hunk's ``+`` lines is then a real one (:func:`._escapes.real_controls`).

    Raises:
        HunkFailed: a hunk's lines (or an ``@@`` line) were not found, or escape drift.
    """
    missing_newline = bool(content) and not content.endswith("\n")
    text = content + "\n" if missing_newline else content
    original_lines = Text(content)
    strategies: list[str] = []
    found_at: list[int] = []
    cursor = 0
    shift = 0  # how much longer ``text`` is than ``content`` before ``cursor`` (to report original lines)
    for index, hunk in enumerate(hunks, 1):
        after = f" after hunk {index - 1}" if index > 1 else ""
        current = Text(text)
        anchor_start: int | None = None
        for anchor in hunk.anchors:
            if not anchor.strip():
                continue
            span = _anchor_line(current, anchor, cursor)
            if span is None:
                raise HunkFailed(index, hunk, f"its @@ line {anchor.strip()!r} was not found{after}.")
            anchor_start, cursor = span
        old, new = _lines(hunk.old), real_controls(_lines(hunk.new), content, crlf=crlf)
        if not hunk.old:
            at = cursor if anchor_start is not None else len(text)
            edit, strategy = Edit(at, at, new), "insert"
        else:
            found = find(current, old, new, accept=_whole_lines(text, cursor, hunk.at_end))
            if found is None and anchor_start is not None:
                found = find(current, old, new, accept=_whole_lines(text, anchor_start, hunk.at_end))
            if found is None:
                where = " at the end of the file" if hunk.at_end else after
                message = f"its context and '-' lines were not found{where} (all {len(STRATEGIES)} strategies tried)."
                message += similar_hint(original_lines, old)  # the file as it is: nothing will be written
                raise HunkFailed(index, hunk, message + "\nRead the file again and copy the hunk's ' ' and '-' lines from it.")
            strategy, edits = found
            edit = edits[-1] if hunk.at_end else edits[0]
            drift = drift_message(text, old, strategy, [edit], old_name=OLD_NAME, new_name="its '+' lines")
            if drift is not None:
                raise HunkFailed(index, hunk, drift)
        found_at.append(original_lines.line_of(min(len(content), max(0, edit.start - shift))) + 1)
        strategies.append(strategy)
        text = text[: edit.start] + edit.replacement + text[edit.end :]
        shift += len(edit.replacement) - (edit.end - edit.start)
        cursor = edit.start + len(edit.replacement)
    if missing_newline and text.endswith("\n"):
        text = text[:-1]
    return Applied(text=text, strategies=tuple(strategies), lines=tuple(found_at))
