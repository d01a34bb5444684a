"""Typographic look-alikes folded to plain ASCII, with a map back to the original offsets.

A file may hold curly quotes, dashes, an ellipsis character or non-breaking spaces where
the model types ``"``, ``-``, ``...`` and a space (or the other way round). Folding both
sides the same way lets them match; :meth:`Folded.original` turns a span of the folded
text back into the span of the file it came from, so only that span is replaced and every
character outside it stays as it was.

Most characters fold one for one. Three expand: the ellipsis to ``...`` and the em dash and
horizontal bar to ``--`` (or to ``-``: models write either, so the caller may try both).

Pure functions of strings.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

_ONE_FOR_ONE = {
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2212", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2007\u2009\u200a\u202f", " "),
}
_ONE_FOR_ONE_RE = re.compile("[" + "".join(_ONE_FOR_ONE) + "]")
_EM_DASHES = "\u2014\u2015"
_ELLIPSIS = "\u2026"
_EXPANDING = re.compile(f"[{_EM_DASHES}{_ELLIPSIS}]")
_DASH_RUN = re.compile("-{2,}")
_TYPOGRAPHIC = re.compile("[" + "".join(_ONE_FOR_ONE) + _EM_DASHES + _ELLIPSIS + "]")


def has_typographic(text: str) -> bool:
    """True when ``text`` holds any character :func:`fold` changes."""
    return _TYPOGRAPHIC.search(text) is not None


def has_em_dash(text: str) -> bool:
    """True when ``text`` holds a character that folds to ``--`` or ``-`` as the caller chooses."""
    return any(dash in text for dash in _EM_DASHES)


@dataclasses.dataclass(frozen=True, slots=True)
class Folded:
    """``text`` folded; the expansions are recorded so offsets can be mapped back."""

    text: str
    starts: tuple[int, ...]
    """Offset in the folded text where each expanded character's replacement begins."""
    sources: tuple[int, ...]
    """Offset in the original of each expanded character."""
    widths: tuple[int, ...]
    """How many folded characters each expanded character became."""

    def _offset(self, folded: int) -> tuple[int, bool]:
        """The original offset of a folded offset, and whether it falls inside an expansion."""
        k = bisect.bisect_right(self.starts, folded) - 1
        if k < 0:
            return folded, False
        start, source, width = self.starts[k], self.sources[k], self.widths[k]
        if folded < start + width:
            return source, folded != start
        return source + 1 + (folded - start - width), False

    def original(self, start: int, end: int) -> tuple[int, int] | None:
        """The original span of folded ``[start, end)``, or None if it cuts an expanded character."""
        first, cut_first = self._offset(start)
        last, cut_last = self._offset(end)
        return None if cut_first or cut_last else (first, last)


def fold(text: str, em_dash: str = "--") -> Folded:
    """Fold ``text``: curly quotes to straight ones, dashes to ``-``, odd spaces to a space, ``…`` to ``...``."""
    if _TYPOGRAPHIC.search(text) is None:
        return Folded(text, (), (), ())
    text = _ONE_FOR_ONE_RE.sub(lambda m: _ONE_FOR_ONE[m.group()], text)  # same length: offsets unchanged
    pieces: list[str] = []
    starts: list[int] = []
    sources: list[int] = []
    widths: list[int] = []
    position = length = 0
    for match in _EXPANDING.finditer(text):
        pieces.append(text[position : match.start()])
        length += match.start() - position
        replacement = "..." if match.group() == _ELLIPSIS else em_dash
        starts.append(length)
        sources.append(match.start())
        widths.append(len(replacement))
        pieces.append(replacement)
        length += len(replacement)
        position = match.end()
    pieces.append(text[position:])
    return Folded("".join(pieces), tuple(starts), tuple(sources), tuple(widths))


def line_keys(text: str) -> list[str]:
    """Each line of ``text`` as the similarity strategies compare it: folded, dash runs as one, stripped.

    Folding never adds or removes a newline, so key ``i`` belongs to line ``i``.
    """
    folded = _DASH_RUN.sub("-", fold(text, "-").text) if has_typographic(text) or "--" in text else text
    return [line.strip() for line in folded.split("\n")]
