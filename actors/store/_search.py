"""Turn any user text into an FTS5 query that cannot be a syntax error.

FTS5's query language gives meaning to ``"``, ``(``, ``)``, ``*``, ``^``, ``:``, ``-``,
``+``, ``NEAR`` and the upper-case ``AND`` / ``OR`` / ``NOT``; raw user text with any of
them can make ``MATCH`` fail. The query is instead rebuilt from scratch:

- the text is NFKC-normalised and cut into words: runs of letters and digits (what FTS5's
  default ``unicode61`` tokenizer indexes); everything else separates words;
- each word becomes a quoted phrase (``"word"``), so no word is ever read as syntax;
  a word directly followed by ``*`` becomes a prefix query (``"word"*``);
- the bare upper-case words ``AND``, ``OR`` and ``NOT`` stay operators, but only between
  two phrases (FTS5's operators are binary); anywhere else they are dropped;
- at most ``MAX_TERMS`` phrases are kept, each at most ``MAX_TERM_CHARS`` characters.

Invariant: the result is empty or ``phrase ((AND|OR|NOT)? phrase)*`` where every phrase is a
double-quoted run of letters and digits, which FTS5 always parses.
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 32
MAX_TERM_CHARS = 64

_WORD = re.compile(r"([^\W_]+)(\*?)")
_OPERATORS = frozenset({"AND", "OR", "NOT"})


def fts5_query(text: str) -> str:
    """The safe FTS5 query for ``text``; empty when it has no searchable word."""
    parts: list[str] = []
    pending_operator: str | None = None
    terms = 0
    for match in _WORD.finditer(unicodedata.normalize("NFKC", text)):
        word, star = match.group(1), match.group(2)
        if word in _OPERATORS and not star:
            # Binary only: kept when a phrase came before; a later phrase must follow.
            if parts:
                pending_operator = word
            continue
        if terms == MAX_TERMS:
            break
        if pending_operator is not None:
            parts.append(pending_operator)
            pending_operator = None
        parts.append(f'"{word[:MAX_TERM_CHARS]}"' + ("*" if star else ""))
        terms += 1
    return " ".join(parts)
