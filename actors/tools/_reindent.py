"""Re-indenting ``new_string`` when ``old_string`` matched a block with other indentation.

The line-based strategies of :mod:`._fuzzy` (``indentation_flexible``, ``block_anchor``,
``context_aware``) find a block whose indentation differs from the model's
``old_string``; :func:`reindent` gives ``new_string`` the file's indentation before it
is written, so a dedented (or 2-for-4-space) edit lands at the right depth.

A ``new_string`` already written in the file's indentation is left as it is: the model
may copy old_string loosely and still write the new text at the depth the file needs
(:func:`fits_file` tells the two apart).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _common_indent(lines: Sequence[str]) -> str:
    indents = [_indent(line) for line in lines if line.strip()]
    return os.path.commonprefix(indents) if indents else ""


def _shift(new: str, old_lines: Sequence[str], found_lines: Sequence[str]) -> str:
    had, has = _common_indent(old_lines), _common_indent(found_lines)
    if had == has:
        return new
    out = []
    for line in new.split("\n"):
        out.append(has + line[len(had) :] if line.strip() and line.startswith(had) else line)
    return "\n".join(out)


def _indents_by_body(lines: Sequence[str]) -> dict[str, str]:
    """Each non-blank line's text (stripped) -> its indentation, for texts found at one indentation only."""
    found: dict[str, str | None] = {}
    for line in lines:
        body = line.strip()
        if body:
            found[body] = _indent(line) if found.get(body, _indent(line)) == _indent(line) else None
    return {body: indent for body, indent in found.items() if indent is not None}


def fits_file(new: str, old_lines: Sequence[str], found_lines: Sequence[str]) -> bool:
    """True when ``new`` is indented as the file is (``found_lines``) rather than as ``old_lines``.

    The lines ``new`` shares with both blocks vote: each is indented as the file or as
    old_string. Without a vote, the common indentation of ``new`` decides.
    """
    new_lines = new.split("\n")
    in_old, in_file = _indents_by_body(old_lines), _indents_by_body(found_lines)
    as_file = as_old = 0
    for line in new_lines:
        body = line.strip()
        if body in in_old and body in in_file and in_old[body] != in_file[body]:
            as_file += _indent(line) == in_file[body]
            as_old += _indent(line) == in_old[body]
    if as_file != as_old:
        return as_file > as_old
    mine, had, has = _common_indent(new_lines), _common_indent(old_lines), _common_indent(found_lines)
    return mine == has and mine != had


def _indent_map(old_lines: Sequence[str], found_lines: Sequence[str], aligned: bool) -> dict[str, str] | None:
    """Which indentation of old_string became which in the file, or None if that is not consistent."""
    pairs = list(zip(old_lines, found_lines, strict=True)) if aligned else [(old_lines[0], found_lines[0]), (old_lines[-1], found_lines[-1])]
    mapping: dict[str, str] = {}
    for was, now in pairs:
        if was.strip() and now.strip() and mapping.setdefault(_indent(was), _indent(now)) != _indent(now):
            return None
    return mapping


def _linear(mapping: dict[str, str]) -> tuple[float, float] | None:
    """``width_in_file = base + factor * width_in_old`` if every (space-only) pair agrees, else None."""
    if not mapping or any(set(k + v) - {" "} for k, v in mapping.items()):
        return None
    pairs = sorted((len(k), len(v)) for k, v in mapping.items())
    (k1, v1), (k2, v2) = pairs[0], pairs[-1]
    factor = (v2 - v1) / (k2 - k1) if k2 != k1 else 1.0
    base = v1 - factor * k1
    return (base, factor) if all(v == base + factor * k for k, v in pairs) else None


def reindent(new: str, old_lines: Sequence[str], found_lines: Sequence[str], *, aligned: bool = True) -> str:
    """Give ``new`` the indentation the file uses where ``old_string`` used another.

    Each indentation of old_string is mapped to the one of the file's line it matched
    (``aligned``: line for line; otherwise the first and last lines only). Indentations of
    ``new`` not in the map follow the map's linear rule (2 spaces became 4: 6 becomes 12) or
    extend the longest mapped prefix. An inconsistent map falls back to shifting by the
    difference of the two blocks' common indentation. A ``new`` that :func:`fits_file`
    is returned unchanged.
    """
    if fits_file(new, old_lines, found_lines):
        return new
    mapping = _indent_map(old_lines, found_lines, aligned)
    if mapping is None:
        return _shift(new, old_lines, found_lines)
    if all(k == v for k, v in mapping.items()):
        return new
    rule = _linear(mapping)
    out = []
    for line in new.split("\n"):
        indent = _indent(line)
        body = line[len(indent) :]
        if not body:
            out.append(line)
        elif indent in mapping:
            out.append(mapping[indent] + body)
        elif rule is not None and set(indent) <= {" "}:
            out.append(" " * max(0, round(rule[0] + rule[1] * len(indent))) + body)
        else:
            key = max((k for k in mapping if indent.startswith(k)), key=len, default=None)
            out.append(line if key is None else mapping[key] + indent[len(key) :] + body)
    return "\n".join(out)
