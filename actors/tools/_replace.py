"""Apply a find-and-replace: pick the matches (:mod:`._fuzzy`), refuse what is unsafe, splice.

Refused, each with a message the model can act on (:class:`PatchRefused`): an empty or
unchanged ``old_string``, no match, several matches without ``replace_all``, and escape
drift. Escape drift: a loosely matched ``old_string`` whose ``new_string`` would write
escape sequences (``\\n``, ``\\t``, ``\\r``, ``\\"``, ``\\'``) as two literal characters
into a file that has none of them. That is what text escaped twice on its way from the
model looks like, and writing it corrupts code. An exact match is trusted: the model
showed it sees the file's characters as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ._fuzzy import STRATEGIES, Edit, Text, closest, find

DRIFT_SEQUENCES = ("\\n", "\\t", "\\r", '\\"', "\\'")
HINT_LINES = 12


class PatchRefused(Exception):
    """The replacement was not made; the message says why and what to send instead."""


@dataclasses.dataclass(frozen=True, slots=True)
class Patched:
    text: str
    strategy: str
    edits: tuple[Edit, ...]
    """Where each replacement went, as offsets into the original text."""
    lines: tuple[int, ...]
    """The 1-based line of the original where each replacement starts."""


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{first + i:6d}|{line}" for i, line in enumerate(lines))


def _not_found(text: Text, old: str, strategies: Sequence[str]) -> PatchRefused:
    tried = ", ".join(strategies)
    message = f"old_string was not found in the file (tried: {tried})."
    near = closest(text, old)
    if near is not None:
        first, last, score = near
        shown = text.lines[first : min(last + 1, first + HINT_LINES)]
        message += f"\nThe most similar text is at lines {first + 1}-{last + 1} ({score:.0%} alike):\n{_numbered(shown, first + 1)}"
    message += "\nRead the file again (read_file) and copy old_string from it exactly, including indentation."
    return PatchRefused(message)


def _check_drift(content: str, old: str, strategy: str, edits: Sequence[Edit]) -> None:
    if strategy == "exact":
        return
    for edit in edits:
        for sequence in DRIFT_SEQUENCES:
            if sequence not in edit.replacement or sequence in content:
                continue
            if sequence in old and strategy != "escape_normalized":
                continue  # old_string had it too: the model means those characters
            msg = (
                f"new_string would write the escape sequence {sequence} as two literal characters, which the file "
                f"does not contain anywhere, and old_string matched only loosely (strategy {strategy}): this looks "
                "like escape drift (text escaped twice on its way here), so nothing was written. Send real "
                "characters (a real newline, a plain quote) instead of escape sequences; if the file really needs "
                f"the characters {sequence}, make old_string match the file exactly."
            )
            raise PatchRefused(msg)


def fuzzy_replace(
    content: str, old: str, new: str, *, replace_all: bool = False, strategies: Sequence[str] = STRATEGIES
) -> Patched:
    """Replace ``old`` with ``new`` in ``content`` using the first strategy that finds ``old``.

    Raises:
        PatchRefused: empty or unchanged ``old``, not found, ambiguous, or escape drift.
    """
    if not old:
        raise PatchRefused("old_string is empty; give the text to replace (to create or overwrite a whole file, use write_file).")
    if old == new:
        raise PatchRefused("old_string and new_string are identical, so nothing would change; put the text you want in new_string.")
    text = Text(content)
    found = find(text, old, new, strategies=strategies)
    if found is None:
        raise _not_found(text, old, strategies)
    strategy, edits = found
    lines = tuple(content.count("\n", 0, edit.start) + 1 for edit in edits)
    if len(edits) > 1 and not replace_all:
        where = ", ".join(str(line) for line in lines[:10]) + (", ..." if len(lines) > 10 else "")
        msg = (
            f"Found {len(edits)} matches for old_string (at lines {where}; strategy {strategy}); "
            "add surrounding lines to make it unique, or set replace_all to change every one."
        )
        raise PatchRefused(msg)
    _check_drift(content, old, strategy, edits)
    pieces, position = [], 0
    for edit in edits:
        pieces += [content[position : edit.start], edit.replacement]
        position = edit.end
    pieces.append(content[position:])
    return Patched(text="".join(pieces), strategy=strategy, edits=tuple(edits), lines=lines)
