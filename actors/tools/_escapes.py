"""Escape sequences between the model and the file: drift detection, and escaped tabs and CRs.

Text on its way from a model is sometimes escaped once too often: a quote arrives as
``\\"``, a newline as the two characters ``\\n``. Written into a file, that corrupts code.

- :func:`drift_message` says why a loosely matched replacement must be refused: the
  matched text of the file and ``old_string`` differ by escape sequences (one has ``\\'``
  where the other has ``'``), or ``new_string`` would add escape sequences the file never
  had. An exact match is trusted, and ``escape_normalized`` (which converts ``new_string``
  the same way it matched) is checked on ``new_string`` only.
- :func:`real_controls` writes an escaped tab or carriage return in ``new_string`` as the
  real character, but only where the file itself uses it: a ``\\t`` leading a line of a
  tab-indented file, a ``\\r`` ending a line of a CRLF file.

Pure functions of strings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._fuzzy import Edit

DRIFT_SEQUENCES = ("\\n", "\\t", "\\r", '\\"', "\\'")
_REAL = {"\\n": "\n", "\\t": "\t", "\\r": "\r", '\\"': '"', "\\'": "'"}
_SHOWN = {"\\n": "a real line break", "\\t": "a real tab", "\\r": "a carriage return", '\\"': 'a plain "', "\\'": "a plain '"}
_UNESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}
_ESCAPE_SEQUENCE = re.compile(r"""\\([ntr"'\\])""")
_LEADING_TABS = re.compile(r"^(?:\t|\\t)+", re.MULTILINE)
_ESCAPED_CR = re.compile(r"\\r(?=\n)")
TRUSTED = frozenset({"exact"})
"""Strategies whose match shows the model sees the file's characters as they are."""


def unescape(text: str) -> str:
    """Turn the escapes a serializer adds (``\\n``, ``\\t``, ``\\r``, ``\\"``, ``\\'``, ``\\\\``) into characters."""
    return _ESCAPE_SEQUENCE.sub(lambda m: _UNESCAPES[m.group(1)], text)


def escape_controls(text: str) -> str:
    """Real newlines and tabs as the escapes ``\\n`` and ``\\t``."""
    return text.replace("\n", "\\n").replace("\t", "\\t")


def _real_count(text: str, sequence: str) -> int:
    """How often ``text`` has the character ``sequence`` stands for, outside the sequence itself."""
    char = _REAL[sequence]
    return text.count(char) - (text.count(sequence) if char in sequence else 0)


def escape_difference(old: str, found: str) -> tuple[str, bool] | None:
    """The escape sequence by which ``old`` and the file's ``found`` text differ, if any.

    Returns ``(sequence, in_old)``: ``in_old`` when ``old`` has the sequence where the file
    has the real character, else the file has the sequence where ``old`` has the character.
    Counted, not aligned: ``old`` has more of the sequence and fewer of the character.
    """
    for sequence in DRIFT_SEQUENCES:
        in_old, in_found = old.count(sequence), found.count(sequence)
        if in_old == in_found:
            continue
        real_old, real_found = _real_count(old, sequence), _real_count(found, sequence)
        if in_old > in_found and real_found > real_old:
            return sequence, True
        if in_found > in_old and real_old > real_found:
            return sequence, False
    return None


def drift_message(content: str, old: str, strategy: str, edits: Sequence[Edit], *, old_name: str = "old_string", new_name: str = "new_string") -> str | None:
    """Why the replacement is escape drift and must not be written, or None if it is not."""
    if strategy in TRUSTED:
        return None
    if strategy != "escape_normalized":  # that one matched through the escapes on purpose
        for edit in edits:
            found = escape_difference(old, content[edit.start : edit.end])
            if found is None:
                continue
            sequence, in_old = found
            where = (
                f"{old_name} has the escape sequence {sequence} where the file has {_SHOWN[sequence]}"
                if in_old
                else f"the file has the escape sequence {sequence} where {old_name} has {_SHOWN[sequence]}"
            )
            return (
                f"{where}, and it matched only loosely (strategy {strategy}): this looks like escape drift (text "
                f"escaped once too often or too rarely on its way here), so nothing was written. Read the file again and "
                f"copy {old_name} from it exactly, characters as they are."
            )
    for edit in edits:
        for sequence in DRIFT_SEQUENCES:
            if sequence not in edit.replacement or sequence in content:
                continue
            if sequence in old and strategy != "escape_normalized":
                continue  # old_string had it too and matched text with it: the model means those characters
            return (
                f"{new_name} would write the escape sequence {sequence} as two literal characters, which the file "
                f"does not contain anywhere, and {old_name} matched only loosely (strategy {strategy}): this looks "
                "like escape drift (text escaped twice on its way here), so nothing was written. Send real "
                "characters (a real newline, a plain quote) instead of escape sequences; if the file really needs "
                f"the characters {sequence}, make {old_name} match the file exactly."
            )
    return None


def real_controls(new: str, content: str, *, crlf: bool) -> str:
    """``new`` with an escaped tab or CR written as the real character, where the file uses it.

    ``\\t`` at the start of a line (alone or among real tabs) becomes a tab when some line
    of ``content`` starts with a tab and none starts with a literal ``\\t``. ``\\r`` just
    before a newline becomes a carriage return when the file's lines end in CRLF
    (``crlf``, or a ``\\r\\n`` in ``content``) and no line of it ends in a literal ``\\r``.
    Anywhere else an escape sequence is left as written (it may be code: ``"a\\tb"``).
    """
    if "\\t" in new and re.search(r"^\t", content, re.MULTILINE) and not re.search(r"^\\t", content, re.MULTILINE):
        new = _LEADING_TABS.sub(lambda m: m.group().replace("\\t", "\t"), new)
    if "\\r\n" in new and (crlf or "\r\n" in content) and not re.search(r"\\r$", content, re.MULTILINE):
        new = _ESCAPED_CR.sub("\r", new)
    return new
