"""Apply a find-and-replace: pick the matches (:mod:`._fuzzy`), refuse what is unsafe, splice.

Refused, each with a message the model can act on (:class:`PatchRefused`): an empty or
unchanged ``old_string``, no match, several matches without ``replace_all``, and escape
drift (:func:`._escapes.drift_message`): a loosely matched ``old_string`` that differs
from the file's text by escape sequences (``\\'`` where the file has ``'``), or a
``new_string`` that would write escape sequences (``\\n``, ``\\t``, ``\\r``, ``\\"``,
``\\'``) as two literal characters into a file that has none of them. That is what text
escaped twice on its way from the model looks like, and writing it corrupts code. An exact
match is trusted: the model showed it sees the file's characters as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ._escapes import drift_message
from ._fuzzy import STRATEGIES, Edit, Text, closest, find

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


def similar_hint(text: Text, old: str) -> str:
    """``"\\nThe most similar text is at lines ..."`` with those lines numbered, or "" if nothing is alike."""
    near = closest(text, old)
    if near is None:
        return ""
    first, last, score = near
    shown = text.lines[first : min(last + 1, first + HINT_LINES)]
    return f"\nThe most similar text is at lines {first + 1}-{last + 1} ({score:.0%} alike):\n{_numbered(shown, first + 1)}"


def _not_found(text: Text, old: str, strategies: Sequence[str]) -> PatchRefused:
    tried = ", ".join(strategies)
    message = f"old_string was not found in the file (tried: {tried})." + similar_hint(text, old)
    message += "\nRead the file again (read_file) and copy old_string from it exactly, including indentation."
    if "[REDACTED" in old:
        message += (
            "\nold_string contains [REDACTED]: the file tools hide secret values when they show a file, so that text is not "
            "in the file. Choose an old_string without the secret, or rewrite the whole line with write_file."
        )
    return PatchRefused(message)


def fuzzy_replace(content: str, old: str, new: str, *, replace_all: bool = False, strategies: Sequence[str] = STRATEGIES) -> Patched:
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
    drift = drift_message(content, old, strategy, edits)
    if drift is not None:
        raise PatchRefused(drift)
    pieces, position = [], 0
    for edit in edits:
        pieces += [content[position : edit.start], edit.replacement]
        position = edit.end
    pieces.append(content[position:])
    return Patched(text="".join(pieces), strategy=strategy, edits=tuple(edits), lines=lines)
