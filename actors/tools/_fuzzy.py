"""Find ``old_string`` in a file the way a model remembers it: nine strategies, strictest first.

Each strategy returns every place it matches; the first strategy that matches anywhere
decides (later, looser ones are not consulted). What each one forgives:

=======================  ==================================================================
``exact``                nothing: the text as given.
``line_trimmed``         trailing whitespace at the end of each line (whole lines only).
``whitespace_normalized`` the width of each run of spaces/tabs after a line's indentation
                         (``a  =  1`` for ``a = 1``); indentation itself must agree.
``indentation_flexible`` the indentation of each line (whole lines); ``new_string`` is
                         re-indented by the difference between the two blocks.
``escape_normalized``    escape drift: ``\\n``, ``\\t``, ``\\"``... sent literally where the
                         file has the real characters, or real newlines/tabs where the
                         file has the escapes; ``new_string`` is converted the same way.
``trimmed_boundary``     leading/trailing blank lines and spaces around the whole block.
``unicode_normalized``   typographic look-alikes: curly quotes, dashes (``—`` as ``--`` or
                         ``-``), non-breaking and other odd spaces, ``…`` as ``...``; both
                         sides are folded to ASCII (:mod:`._fold`) and the strategies from
                         ``exact`` to ``trimmed_boundary`` (``escape_normalized`` aside)
                         are tried on the folded text. Only the matched span is replaced.
``block_anchor``         a block of 3+ lines whose first and last lines agree and whose
                         middle is at least 60 % similar, within ±25 % lines.
``context_aware``        a window of the same number of lines (3+) where at least half
                         the non-blank lines agree and the whole is at least 80 % similar.
=======================  ==================================================================

The last two compare lines stripped and folded (:func:`._fold.line_keys`: look-alikes as
ASCII, a run of dashes as one), so a typographic file matches an ASCII ``old_string``.

Pure functions of strings: no I/O, no clock. :mod:`._replace` applies the result.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher

from ._escapes import escape_controls, unescape
from ._fold import fold, has_em_dash, has_typographic, line_keys
from ._reindent import reindent

STRATEGIES = (
    "exact",
    "line_trimmed",
    "whitespace_normalized",
    "indentation_flexible",
    "escape_normalized",
    "trimmed_boundary",
    "unicode_normalized",
    "block_anchor",
    "context_aware",
)

BLOCK_SIMILARITY = 0.6
CONTEXT_SIMILARITY = 0.8
CONTEXT_LINE_SHARE = 0.5
_MAX_WINDOWS = 200
"""Most candidate windows ``context_aware`` scores (the ones with the most agreeing lines)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``text[start:end]`` of the original with ``replacement``."""

    start: int
    end: int
    replacement: str


class Text:
    """The file's text with its lines indexed (computed on first use: ``exact`` needs none of it)."""

    def __init__(self, content: str) -> None:
        self.content = content

    @functools.cached_property
    def lines(self) -> list[str]:
        return self.content.split("\n")

    @functools.cached_property
    def starts(self) -> list[int]:
        starts = [0]
        for line in self.lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        return starts

    @functools.cached_property
    def stripped(self) -> list[str]:
        return [line.strip() for line in self.lines]

    @functools.cached_property
    def keys(self) -> list[str]:
        """Each line as the similarity strategies compare it (:func:`._fold.line_keys`)."""
        return line_keys(self.content)

    @functools.cached_property
    def rstripped(self) -> list[str]:
        return [line.rstrip() for line in self.lines]

    def span(self, first: int, last: int, trailing_newline: bool) -> tuple[int, int]:
        """Character span of lines ``first..last`` (inclusive), with the last newline if asked."""
        end = self.starts[last] + len(self.lines[last])
        if trailing_newline and last + 1 < len(self.lines):
            end += 1
        return self.starts[first], end

    def line_of(self, offset: int) -> int:
        """0-based line number of a character offset."""
        return bisect.bisect_right(self.starts, offset) - 1


def _pattern_lines(old: str) -> tuple[list[str], bool]:
    lines = old.split("\n")
    trailing = len(lines) > 1 and lines[-1] == ""
    if trailing:
        lines.pop()
    return lines, trailing


def _find_all(haystack: str, needle: str) -> list[int]:
    found = []
    at = haystack.find(needle)
    while at >= 0:
        found.append(at)
        at = haystack.find(needle, at + len(needle))
    return found


def _windows(lines: Sequence[str], want: Sequence[str]) -> list[int]:
    """Starts of non-overlapping windows where ``lines`` equal ``want`` line for line."""
    k, first, found, next_free = len(want), want[0], [], 0
    for i in [i for i, line in enumerate(lines) if line == first]:
        if i >= next_free and i + k <= len(lines) and list(lines[i : i + k]) == list(want):
            found.append(i)
            next_free = i + k
    return found


def _non_overlapping(candidates: list[tuple[float, int, int]]) -> list[tuple[int, int]]:
    """Best-scoring line ranges first, dropping any that overlaps one already taken."""
    taken: list[tuple[int, int]] = []
    for _, first, last in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if all(last < a or first > b for a, b in taken):
            taken.append((first, last))
    return sorted(taken)


# -- the strategies ------------------------------------------------------------------------------


def _exact(text: Text, old: str, new: str) -> list[Edit]:
    return [Edit(at, at + len(old), new) for at in _find_all(text.content, old)]


def _line_trimmed(text: Text, old: str, new: str) -> list[Edit]:
    pattern, trailing = _pattern_lines(old)
    want = [line.rstrip() for line in pattern]
    k = len(want)
    return [Edit(*text.span(i, i + k - 1, trailing), new) for i in _windows(text.rstripped, want)]


def _whitespace_regex(old: str) -> str:
    lines = old.split("\n")
    parts = []
    for index, line in enumerate(lines):
        body = line.lstrip(" \t")
        if not body:
            parts.append(r"[ \t]*")
            continue
        lead, core = line[: len(line) - len(body)], body.rstrip(" \t")
        part = re.escape(lead) + r"[ \t]+".join(re.escape(token) for token in re.split(r"[ \t]+", core))
        if index < len(lines) - 1:
            part += r"[ \t]*"
        elif core != body:
            part += r"[ \t]+"
        parts.append(part)
    return "\n".join(parts)


def _whitespace_normalized(text: Text, old: str, new: str) -> list[Edit]:
    regex = re.compile(_whitespace_regex(old))
    return [Edit(m.start(), m.end(), new) for m in regex.finditer(text.content)]


def _indentation_flexible(text: Text, old: str, new: str) -> list[Edit]:
    pattern, trailing = _pattern_lines(old)
    want = [line.strip() for line in pattern]
    k = len(want)
    return [Edit(*text.span(i, i + k - 1, trailing), reindent(new, pattern, text.lines[i : i + k])) for i in _windows(text.stripped, want)]


def _escape_normalized(text: Text, old: str, new: str) -> list[Edit]:
    if "\\" in old:
        plain = unescape(old)
        if plain != old and (found := _find_all(text.content, plain)):
            replacement = unescape(new)
            return [Edit(at, at + len(plain), replacement) for at in found]
    if "\n" in old or "\t" in old:
        escaped = escape_controls(old)
        if found := _find_all(text.content, escaped):
            replacement = escape_controls(new)
            return [Edit(at, at + len(escaped), replacement) for at in found]
    return []


def _trimmed_boundary(text: Text, old: str, new: str) -> list[Edit]:
    core = old.strip()
    if core == old:
        return []
    lead, trail = old[: len(old) - len(old.lstrip())], old[len(old.rstrip()) :]
    replacement = new
    if lead and replacement.startswith(lead):
        replacement = replacement[len(lead) :]
    if trail and replacement.endswith(trail):
        replacement = replacement[: len(replacement) - len(trail)]
    return [Edit(at, at + len(core), replacement) for at in _find_all(text.content, core)]


_FOLDED_CHAIN = ("exact", "line_trimmed", "whitespace_normalized", "indentation_flexible", "trimmed_boundary")
"""The strategies ``unicode_normalized`` runs on the folded text, in chain order."""


def _unicode_normalized(text: Text, old: str, new: str) -> list[Edit]:
    if not (has_typographic(old) or has_typographic(text.content)):
        return []  # nothing to fold: the strategies before this one have said it all
    for em_dash in ("--", "-"):
        if em_dash == "-" and not (("-" in old or has_em_dash(old)) and (has_em_dash(old) or has_em_dash(text.content))):
            break  # the second reading of an em dash changes nothing for this old_string
        folded, pattern = fold(text.content, em_dash), fold(old, em_dash).text
        in_folded = Text(folded.text)
        for name, strategy in CHAIN:
            if name not in _FOLDED_CHAIN:
                continue
            edits = []
            for edit in strategy(in_folded, pattern, new):
                span = folded.original(edit.start, edit.end)
                if span is not None:  # a match that cuts an expanded character (half a "...") is none
                    edits.append(Edit(span[0], span[1], edit.replacement))
            if edits:
                return edits
    return []


def _block_anchor(text: Text, old: str, new: str) -> list[Edit]:
    pattern, trailing = _pattern_lines(old)
    k = len(pattern)
    want = line_keys("\n".join(pattern))
    first, last = want[0], want[-1]
    if k < 3 or not first or not last:
        return []
    keys = text.keys
    slack = max(1, k // 4)
    want_middle = "\n".join(want[1:-1])
    candidates = []
    for i in [i for i, line in enumerate(keys) if line == first]:
        ends = sorted(range(i + k - 1 - slack, i + k + slack), key=lambda j: abs(j - (i + k - 1)))
        j = next((j for j in ends if i < j < len(keys) and keys[j] == last), None)
        if j is None:
            continue
        score = SequenceMatcher(None, want_middle, "\n".join(keys[i + 1 : j]), autojunk=False).ratio()
        if score >= BLOCK_SIMILARITY:
            candidates.append((score, i, j))
    return [Edit(*text.span(i, j, trailing), reindent(new, pattern, text.lines[i : j + 1], aligned=j - i + 1 == k)) for i, j in _non_overlapping(candidates)]


def _agreeing_windows(text: Text, want: Sequence[str]) -> Counter[int]:
    """For each window start, how many non-blank lines of ``want`` equal the window's (as keys)."""
    k, keys = len(want), text.keys
    offsets: dict[str, list[int]] = {}
    for t, line in enumerate(want):
        if line:
            offsets.setdefault(line, []).append(t)
    counts: Counter[int] = Counter()
    last_start = len(keys) - k
    for p, line in enumerate(keys):
        for t in offsets.get(line, ()):
            if 0 <= p - t <= last_start:
                counts[p - t] += 1
    return counts


def _context_aware(text: Text, old: str, new: str) -> list[Edit]:
    pattern, trailing = _pattern_lines(old)
    k = len(pattern)
    want = line_keys("\n".join(pattern))
    nonblank = sum(1 for line in want if line)
    if k < 3 or nonblank < 2:
        return []
    need = max(2, math.ceil(nonblank * CONTEXT_LINE_SHARE))
    want_text = "\n".join(want)
    windows = [(count, start) for start, count in _agreeing_windows(text, want).items() if count >= need]
    candidates = []
    for _, start in sorted(windows, reverse=True)[:_MAX_WINDOWS]:
        window = "\n".join(text.keys[start : start + k])
        score = SequenceMatcher(None, want_text, window, autojunk=False).ratio()
        if score >= CONTEXT_SIMILARITY:
            candidates.append((score, start, start + k - 1))
    return [Edit(*text.span(i, j, trailing), reindent(new, pattern, text.lines[i : j + 1])) for i, j in _non_overlapping(candidates)]


Strategy = Callable[[Text, str, str], list[Edit]]

CHAIN: tuple[tuple[str, Strategy], ...] = (
    ("exact", _exact),
    ("line_trimmed", _line_trimmed),
    ("whitespace_normalized", _whitespace_normalized),
    ("indentation_flexible", _indentation_flexible),
    ("escape_normalized", _escape_normalized),
    ("trimmed_boundary", _trimmed_boundary),
    ("unicode_normalized", _unicode_normalized),
    ("block_anchor", _block_anchor),
    ("context_aware", _context_aware),
)
assert tuple(name for name, _ in CHAIN) == STRATEGIES


def find(
    text: Text, old: str, new: str, *, strategies: Sequence[str] = STRATEGIES, accept: Callable[[Edit], bool] | None = None
) -> tuple[str, list[Edit]] | None:
    """The first strategy (of ``strategies``, in chain order) that matches, with all its matches.

    ``accept`` keeps only the matches it approves of (a patch hunk: whole lines after the
    previous hunk); a strategy whose every match it rejects counts as no match.
    """
    for name, strategy in CHAIN:
        if name not in strategies:
            continue
        if name != "exact" and not old.strip():
            break  # whitespace alone is matched exactly or not at all
        edits = strategy(text, old, new)
        if accept is not None:
            edits = [edit for edit in edits if accept(edit)]
        if edits:
            return name, edits
    return None


def closest(text: Text, old: str) -> tuple[int, int, float] | None:
    """The lines (0-based, inclusive) most like ``old`` and how alike (0..1), for a "not found" hint."""
    pattern, _ = _pattern_lines(old.strip("\n"))
    want = line_keys("\n".join(pattern))
    k = len(want)
    if not any(want) or k > len(text.lines):
        return None
    counts = _agreeing_windows(text, want)
    if counts:
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:20]
        starts = [start for start, _ in ranked]
    else:
        # No line agrees exactly: the lines most like the first one (cheap bounds first).
        probe = next(line for line in want if line)
        offset = want.index(probe)
        matcher = SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(probe)  # seq2 is the one SequenceMatcher indexes: once
        scored = []
        for i, line in enumerate(text.keys):
            if line and 4 * min(len(line), len(probe)) >= len(line) + len(probe):  # real_quick_ratio >= 0.5
                matcher.set_seq1(line)
                if (quick := matcher.quick_ratio()) >= 0.5:
                    scored.append((quick, i))
        starts = [i - offset for _, i in sorted(scored, reverse=True)[:20] if i - offset >= 0 and i - offset + k <= len(text.lines)]
    best: tuple[int, int, float] | None = None
    want_text = "\n".join(want)
    for start in starts:
        score = SequenceMatcher(None, want_text, "\n".join(text.keys[start : start + k]), autojunk=False).ratio()
        if best is None or score > best[2]:
            best = (start, start + k - 1, score)
    return best if best is not None and best[2] >= 0.5 else None
