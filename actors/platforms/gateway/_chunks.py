"""Outbound text cut to a platform's limit, pure.

Lengths are counted in the platform's unit (Telegram counts UTF-16 code units). A cut prefers
a paragraph break, then a line break, then a space; a cut inside a fenced code block closes the
fence at the end of the piece and opens it again (same info string) at the start of the next,
so every piece renders. More than one piece: each ends with ``(i/N)``.
"""

from __future__ import annotations

from collections.abc import Callable

Measure = Callable[[str], int]


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


SUFFIX_ROOM = 12
"""Room kept for `` (iii/NNN)`` and a closing fence."""


def _cut(text: str, limit: int, measure: Measure) -> int:
    """The longest prefix length of ``text`` (in characters) measuring at most ``limit``, at a nice break."""
    if measure(text) <= limit:
        return len(text)
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix that fits
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, 0, lo)
        if at > lo // 2:
            return at + len(sep)
    return max(lo, 1)


def chunk_text(text: str, limit: int, measure: Measure = len) -> list[str]:
    """``text`` in pieces of at most ``limit`` units each, numbered when more than one."""
    if measure(text) <= limit:
        return [text]
    room = limit - SUFFIX_ROOM
    pieces: list[str] = []
    rest = text
    reopen = ""
    while rest:
        body = reopen + rest
        n = _cut(body, room - 4, measure)  # 4: a closing fence line
        piece, rest = body[:n], body[n:]
        reopen = ""
        fences = [line for line in piece.splitlines() if line.lstrip().startswith("```")]
        if len(fences) % 2 == 1 and rest:  # cut inside a code block
            info = fences[-1].strip()
            piece = piece.rstrip("\n") + "\n```"
            reopen = info + "\n"
        pieces.append(piece.rstrip() if rest else piece)
    total = len(pieces)
    return [f"{p} ({i}/{total})" for i, p in enumerate(pieces, 1)]
