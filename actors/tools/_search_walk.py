"""The pure-Python search backend, used when ripgrep is not installed.

It walks the tree exactly as ``rg --sort path --hidden --no-ignore`` does with the
project's exclusions (depth first, each directory's entries sorted by name bytes,
symlinks not followed, the :data:`SKIP_NAMES` never entered, files over
:data:`MAX_FILE_BYTES` skipped for content search, files containing a NUL byte treated
as binary and skipped), so the two backends give the same results in the same order.
Regular expressions are the ``regex`` module's here (``re``'s syntax) and Rust's ``regex`` in
ripgrep; the common syntax is the same. Each line's match has a time budget
(:data:`LINE_BUDGET_S`): a pattern that backtracks for ever on a line (``(a|aa)+$`` against a
line of 60 a's) fails the search with a clear error. With ``re`` it ran for hours and held the
GIL, so the whole server stood still.

Blocking: runs in a worker thread. ``cancelled`` is checked between files.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import regex

SKIP_NAMES = (".git", ".hg", ".svn", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".venv", "venv")
"""Directories (and files) never searched: version control data, caches, installed packages."""
MAX_FILE_BYTES = 10 << 20
"""Content search skips larger files (ripgrep: ``--max-filesize 10M``)."""
LINE_BUDGET_S = 1.0
"""Seconds the pattern may take on one line before the search fails."""


class SearchFailed(Exception):
    """The search could not run (bad pattern, unreadable root); the message is for the model."""


@dataclasses.dataclass(slots=True)
class FileHits:
    """The matches in one file: matching line numbers, and the text of every line to show."""

    path: str
    matches: list[int] = dataclasses.field(default_factory=list)
    lines: dict[int, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class ContentQuery:
    root: Path
    pattern: str
    ignore_case: bool
    context: int
    name_globs: tuple[str, ...]
    """File-name globs (brace-expanded) a file must match one of; empty for all files."""
    limit: int
    accept_name: Callable[[str], bool]
    """The same test as ``name_globs``, in Python."""


@dataclasses.dataclass(slots=True)
class Found:
    files: list[FileHits] = dataclasses.field(default_factory=list)
    paths: list[str] = dataclasses.field(default_factory=list)
    more: bool = False
    """The limit was reached and more results exist."""


def walk(root: Path, *, max_bytes: int | None, cancelled: threading.Event) -> Iterator[str]:
    """Files under ``root`` (or ``root`` itself), in ripgrep's ``--sort path`` order."""
    if not root.is_dir():
        if max_bytes is None or root.stat().st_size <= max_bytes:
            yield str(root)
        return
    stack: list[Iterator[os.DirEntry[str]]] = [iter(_entries(str(root)))]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if cancelled.is_set():
            return
        if entry.name in SKIP_NAMES or entry.is_symlink():
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                stack.append(iter(_entries(entry.path)))
            elif entry.is_file(follow_symlinks=False) and (max_bytes is None or entry.stat(follow_symlinks=False).st_size <= max_bytes):
                yield entry.path
        except OSError:
            continue


def _entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return sorted(listing, key=lambda e: os.fsencode(e.name))
    except OSError:
        return []


def _file_lines(path: str) -> list[str] | None:
    """The file's lines as ripgrep reads them (UTF-8 with replacement, BOM dropped), or None if binary."""
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if b"\0" in data:
        return None
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def compile_pattern(pattern: str, ignore_case: bool) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except (regex.error, ValueError) as exc:
        raise SearchFailed(f"invalid regular expression {pattern!r}: {exc}") from None


def _search_line(compiled: regex.Pattern[str], line: str, path: str, number: int) -> bool:
    try:
        return compiled.search(line, timeout=LINE_BUDGET_S) is not None
    except TimeoutError:
        why = "a pattern with nested or overlapping repetition, like (a|aa)+, can take exponential time"
        raise SearchFailed(f"the pattern {compiled.pattern!r} took longer than {LINE_BUDGET_S:g} s on line {number} of {path} ({why}); simplify it") from None


def search_content(query: ContentQuery, cancelled: threading.Event) -> Found:
    compiled = compile_pattern(query.pattern, query.ignore_case)
    found, total = Found(), 0
    for path in walk(query.root, max_bytes=MAX_FILE_BYTES, cancelled=cancelled):
        if query.name_globs and not query.accept_name(os.path.basename(path)):
            continue
        lines = _file_lines(path)
        if not lines:
            continue
        hits = FileHits(path=path)
        for number, line in enumerate(lines, 1):
            if _search_line(compiled, line, path, number):
                if total == query.limit:
                    found.more = True
                    break
                hits.matches.append(number)
                total += 1
        if hits.matches:
            wanted = {n for m in hits.matches for n in range(m - query.context, m + query.context + 1)}
            hits.lines = {n: lines[n - 1].removesuffix("\r") for n in sorted(wanted) if 1 <= n <= len(lines)}
            found.files.append(hits)
        if found.more:
            break
    return found


def list_files(root: Path, accept: Callable[[str], bool], limit: int, cancelled: threading.Event) -> Found:
    found = Found()
    for path in walk(root, max_bytes=None, cancelled=cancelled):
        if accept(path):
            if len(found.paths) == limit:
                found.more = True
                break
            found.paths.append(path)
    return found
