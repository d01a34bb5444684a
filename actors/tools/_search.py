"""``search_files``: regex search in file contents, or file names by glob.

ripgrep runs it when installed (:mod:`._search_rg`), a Python walker otherwise
(:mod:`._search_walk`); both walk the same files in the same order and feed one formatter,
so the output does not depend on the backend. A pattern ripgrep's regex engine refuses
(look-around, back-references) is retried with Python's ``re``.

Output, like ``grep -n``: ``path:line:text`` for a match, ``path-line-text`` for context,
``--`` between separate groups; paths relative to the working directory when inside it.
Version-control data, caches and installed packages (``.git``, ``node_modules``,
``.venv``, ...) are never searched; binary files and files over 10 MB are skipped.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import msgspec
import trio

from actors.agent import ToolContext, ToolOutput, ToolTraits

from . import _search_rg as rg
from ._paths import display, missing_hint, resolve
from ._registry import tool
from ._search_walk import SKIP_NAMES, ContentQuery, Found, SearchFailed, list_files, search_content
from ._terminal_output import redact
from ._textfile import SAMPLE_BYTES, binary_reason

DEFAULT_LIMIT = 100
MAX_LIMIT = 1_000
MAX_CONTEXT = 10
MAX_LINE_CHARS = 300
MAX_OUTPUT_CHARS = 60_000
MAX_GLOBS = 64

T = TypeVar("T")


def _failed(message: str) -> ToolOutput:
    return ToolOutput(content=f"[error] {message}", ok=False)


class SearchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pattern: Annotated[
        str,
        msgspec.Meta(
            description=(
                "target 'content': a regular expression matched against each line. "
                "target 'files': a file-name glob such as '*.py', '*.{ts,tsx}' or 'src/*/test_*.py' "
                "(with a '/', it is matched against the path below `path`)."
            )
        ),
    ]
    target: Annotated[Literal["content", "files"], msgspec.Meta(description="'content' searches inside files; 'files' finds files by name.")] = "content"
    path: Annotated[str, msgspec.Meta(description="The directory (or file) to search; default the working directory.")] = "."
    file_glob: Annotated[str | None, msgspec.Meta(description="Content search only: search just the files whose name matches, e.g. '*.py'.")] = None
    ignore_case: Annotated[bool, msgspec.Meta(description="Match without regard to case.")] = False
    context: Annotated[int, msgspec.Meta(description=f"Lines of context around each match (0-{MAX_CONTEXT}).")] = 0
    limit: Annotated[int, msgspec.Meta(description=f"The most matches (or files) to return (default {DEFAULT_LIMIT}, at most {MAX_LIMIT:,}).")] = DEFAULT_LIMIT


def expand_braces(glob: str) -> tuple[str, ...]:
    """``*.{py,pyi}`` -> ``("*.py", "*.pyi")`` (innermost braces first; at most 64 globs)."""
    found = re.search(r"\{([^{}]*)\}", glob)
    if found is None:
        return (glob,)
    out: list[str] = []
    for choice in found.group(1).split(","):
        out.extend(expand_braces(glob[: found.start()] + choice + glob[found.end() :]))
        if len(out) >= MAX_GLOBS:
            break
    return tuple(dict.fromkeys(out))[:MAX_GLOBS]


def _matcher(globs: tuple[str, ...], ignore_case: bool) -> Callable[[str], bool]:
    if ignore_case:
        globs = tuple(g.lower() for g in globs)
    globs += tuple(g[3:] for g in globs if g.startswith("**/"))

    def accept(subject: str) -> bool:
        subject = subject.lower() if ignore_case else subject
        return any(fnmatch.fnmatchcase(subject, g) for g in globs)

    return accept


def file_filter(pattern: str, root: Path, ignore_case: bool) -> Callable[[str], bool]:
    """For ``target='files'``: match the name, or the path below ``root`` when the glob has a '/'."""
    accept = _matcher(expand_braces(pattern), ignore_case)
    if "/" not in pattern:
        return lambda path: accept(os.path.basename(path))
    return lambda path: accept(os.path.relpath(path, root) if path != str(root) else os.path.basename(path))


async def _in_thread(work: Callable[[threading.Event], T]) -> T:
    cancelled = threading.Event()
    try:
        return await trio.to_thread.run_sync(work, cancelled, abandon_on_cancel=True)
    finally:
        cancelled.set()  # an abandoned walk stops at its next file


async def _search_content(query: ContentQuery, executable: str | None) -> Found:
    if executable is not None:
        try:
            return await rg.search_content(executable, query)
        except rg.PatternUnsupported:
            pass  # e.g. look-around: the Python backend can do it (same walk, same output)
        except FileNotFoundError:
            pass  # uninstalled since we looked
    return await _in_thread(lambda cancelled: search_content(query, cancelled))


async def _list_files(root: Path, accept: Callable[[str], bool], limit: int, executable: str | None) -> Found:
    if executable is not None:
        try:
            return await rg.list_files(executable, root, accept, limit)
        except FileNotFoundError:
            pass
    return await _in_thread(lambda cancelled: list_files(root, accept, limit, cancelled))


def _groups(matches: list[int], context: int) -> list[tuple[int, int]]:
    groups: list[tuple[int, int]] = []
    for line in matches:
        first, last = max(1, line - context), line + context
        if groups and first <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], max(groups[-1][1], last))
        else:
            groups.append((first, last))
    return groups


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else f"{text[:MAX_LINE_CHARS]}… [{len(text) - MAX_LINE_CHARS:,} more characters]"


def format_content(found: Found, cwd: Path, context: int) -> tuple[list[str], int]:
    """The result lines and how many matches they show (fewer than found if the output cap was hit)."""
    out: list[str] = []
    chars = shown = 0
    for hits in found.files:
        name = display(Path(hits.path), cwd)
        is_match = set(hits.matches)
        for first, last in _groups(hits.matches, context):
            if context and out:
                out.append("--")
            for number in range(first, last + 1):
                text = hits.lines.get(number)
                if text is None:
                    continue
                mark = ":" if number in is_match else "-"
                entry = f"{name}{mark}{number}{mark}{_clip(text)}"
                if chars + len(entry) > MAX_OUTPUT_CHARS:
                    return out, shown
                out.append(entry)
                chars += len(entry) + 1
                shown += number in is_match
    return out, shown


def _place(shown_root: str) -> str:
    return "the working directory" if shown_root == "." else shown_root


def _content_result(found: Found, args: SearchArgs, cwd: Path, shown_root: str, limit: int, context: int) -> ToolOutput:
    if not found.files:
        return ToolOutput(content=f"No matches for {args.pattern!r} in {_place(shown_root)}.")
    lines, shown = format_content(found, cwd, context)
    total = sum(len(h.matches) for h in found.files)
    files = len(found.files)
    summary = f"[{total} match{'es' if total != 1 else ''} in {files} file{'s' if files != 1 else ''}"
    if shown < total:
        summary += f"; output capped at {MAX_OUTPUT_CHARS:,} characters after {shown} matches"
    if found.more:
        summary += f"; stopped at limit={limit}, there are more: narrow the pattern, path or file_glob, or raise limit (at most {MAX_LIMIT:,})"
    return ToolOutput(content=redact("\n".join(lines + [summary + "]"])))


def _files_result(found: Found, args: SearchArgs, cwd: Path, shown_root: str, limit: int) -> ToolOutput:
    if not found.paths:
        return ToolOutput(content=f"No files matching {args.pattern!r} under {_place(shown_root)}.")
    lines = [display(Path(p), cwd) for p in found.paths]
    if found.more:
        lines.append(f"[showing the first {limit} files; more match: narrow the pattern or path, or raise limit (at most {MAX_LIMIT:,})]")
    return ToolOutput(content="\n".join(lines))


def _prepare(root: Path, shown: str, target: str) -> tuple[str | None, str | None]:
    """(why the search cannot start at ``root``, or None; the ripgrep executable, or None)."""
    return _check_root(root, shown, target), rg.ripgrep()


def _check_root(root: Path, shown: str, target: str) -> str | None:
    if not root.exists():
        return f"{shown}: no such file or directory.{missing_hint(root)}"
    if target == "content" and root.is_file():
        try:
            with open(root, "rb") as source:
                reason = binary_reason(source.read(SAMPLE_BYTES), root.name)
        except OSError as exc:
            return f"could not read {shown}: {exc.strerror or exc}."
        if reason is not None:
            return f"{shown} is a binary file ({reason}); search_files searches text only."
    return None


@tool(
    name="search_files",
    toolset="file",
    description=(
        "Search file contents with a regular expression (target 'content', like grep -rn; optional file_glob "
        "filter and context lines), or find files by name with a glob (target 'files'). Skips .git, "
        f"{', '.join(SKIP_NAMES[3:6])} and similar, binary files and files over 10 MB. Results are capped "
        "(limit); a note says when there are more. Use this instead of grep/find in the terminal."
    ),
    traits=ToolTraits(read_only=True, path_argument="path"),
)
async def search_files(call: ToolContext, args: SearchArgs) -> ToolOutput:
    cwd = call.workspace.cwd
    root = Path(os.path.normpath(resolve(args.path, cwd)))
    shown_root = display(root, cwd)
    limit = min(max(1, args.limit), MAX_LIMIT)
    context = min(max(0, args.context), MAX_CONTEXT)
    # Looking for rg on PATH and at the root are disk lookups: not on the reactor thread.
    problem, executable = await trio.to_thread.run_sync(_prepare, root, shown_root, args.target)
    if problem is not None:
        return _failed(problem)
    try:
        if args.target == "files":
            found = await _list_files(root, file_filter(args.pattern, root, args.ignore_case), limit, executable)
            return _files_result(found, args, cwd, shown_root, limit)
        if args.file_glob is not None and "/" in args.file_glob:
            return _failed("file_glob matches file names only (like '*.py'); put the directory in path instead.")
        globs = expand_braces(args.file_glob) if args.file_glob else ()
        accept = _matcher(globs, ignore_case=False)
        query = ContentQuery(root=root, pattern=args.pattern, ignore_case=args.ignore_case, context=context, name_globs=globs, limit=limit, accept_name=accept)
        found = await _search_content(query, executable)
    except SearchFailed as exc:
        return _failed(str(exc))
    # Formatting and redacting up to MAX_OUTPUT_CHARS of matches take milliseconds: not on the reactor.
    return await trio.to_thread.run_sync(_content_result, found, args, cwd, shown_root, limit, context)
