"""``read_file`` and ``write_file``: numbered text with paging (secret values hidden, as in terminal
output), and atomic writes behind a denylist.

Both run their disk work in a worker thread (``trio.to_thread.run_sync``): the handlers are
coroutines in the reactor thread, which must never block.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from actors._atomic import write_atomic
from actors.agent import ToolContext, ToolOutput, ToolTraits

from ._paths import display, missing_hint, resolve, write_refusal
from ._registry import tool
from ._terminal_output import redact
from ._textfile import SAMPLE_BYTES, binary_reason

DEFAULT_LINES = 500
MAX_LINES = 2_000
MAX_LINE_CHARS = 2_000
"""A longer line is cut (minified files, data blobs) with a note saying how much was left out."""
MAX_OUTPUT_CHARS = 80_000
"""One read returns at most this much text; the note says which offset continues."""
COUNT_LINES_UP_TO = 256 << 20
"""Files up to this size (bytes) get their total line count in the paging note."""


def _failed(message: str) -> ToolOutput:
    return ToolOutput(content=f"[error] {message}", ok=False)


class ReadArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="The file to read: absolute, or relative to the working directory (~ is expanded).")]
    offset: Annotated[int, msgspec.Meta(description="The 1-based line number to start at (default 1).")] = 1
    limit: Annotated[int, msgspec.Meta(description=f"How many lines to return (default {DEFAULT_LINES}, at most {MAX_LINES:,}).")] = DEFAULT_LINES


class WriteArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="The file to write: absolute, or relative to the working directory (~ is expanded).")]
    content: Annotated[str, msgspec.Meta(description="The complete new content of the file (it replaces everything).")]


def _count_lines(path: Path, size: int) -> int | None:
    if size > COUNT_LINES_UP_TO:
        return None
    count, last = 0, b"\n"
    with open(path, "rb") as data:
        while chunk := data.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _read(path: Path, shown: str, offset: int, limit: int) -> ToolOutput:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return _failed(f"{shown}: no such file.{missing_hint(path)}")
    except NotADirectoryError:
        return _failed(f"{shown}: a part of the path before the file name is a file, not a directory.")
    except PermissionError:
        return _failed(f"{shown}: permission denied.")
    if stat.S_ISDIR(info.st_mode):
        return _failed(f"{shown} is a directory; list it with search_files(target='files', path='{shown}').")
    if not stat.S_ISREG(info.st_mode):
        return _failed(f"{shown} is not a regular file (a device, FIFO or socket); read_file reads files only.")
    offset, limit = max(1, offset), min(max(1, limit), MAX_LINES)
    try:
        with open(path, "rb") as raw:
            reason = binary_reason(raw.read(SAMPLE_BYTES), path.name)
            if reason is not None:
                return _failed(
                    f"{shown} is a binary file ({info.st_size:,} bytes; {reason}); read_file shows text only. "
                    "Inspect it with the terminal instead (for example `file` or `xxd | head`)."
                )
            if info.st_size == 0:
                return ToolOutput(content=f"[{shown} is empty]")
            raw.seek(0)
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
            shown_lines, last, cut, full = _window(text, offset, limit)
        total = _count_lines(path, info.st_size)
    except OSError as exc:
        return _failed(f"could not read {shown}: {exc.strerror or exc}.")
    if last < offset:
        return _failed(f"offset {offset} is past the end of {shown} (it has {total if total is not None else last} lines).")
    notes = []
    if total is None or last < total:
        of = f" of {total:,}" if total is not None else f" (the file is {info.st_size / (1 << 20):,.0f} MB)"
        why = f"; output is capped at {MAX_OUTPUT_CHARS:,} characters" if full else ""
        notes.append(f"[showing lines {offset:,}-{last:,}{of}{why}; continue with offset={last + 1}]")
    if cut:
        notes.append(f"[{cut} line(s) longer than {MAX_LINE_CHARS:,} characters were cut; search_files or the terminal shows them whole]")
    return ToolOutput(content=redact("\n".join(shown_lines + notes)))


def _window(reader: io.TextIOWrapper, offset: int, limit: int) -> tuple[list[str], int, int, bool]:
    """Numbered lines ``offset..offset+limit-1``: (lines, last line shown, lines cut, output full)."""
    out: list[str] = []
    chars, last, cut = 0, offset - 1, 0
    for number, line in enumerate(reader, 1):
        if number < offset:
            continue
        if number >= offset + limit:
            break
        line = line.removesuffix("\n").removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… [{len(line) - MAX_LINE_CHARS:,} more characters on this line]"
            cut += 1
        entry = f"{number:6d}|{line}"
        if out and chars + len(entry) > MAX_OUTPUT_CHARS:
            return out, last, cut, True
        out.append(entry)
        chars += len(entry) + 1
        last = number
    return out, last, cut, False


@tool(
    name="read_file",
    toolset="file",
    description=(
        "Read a text file, with line numbers ('     7|text'). Pages through long files: offset is the first line, "
        f"limit the number of lines (default {DEFAULT_LINES}, at most {MAX_LINES:,}); a note says how to continue. "
        "Binary files are refused. Secret values (API keys, tokens, private keys) show as [REDACTED]. "
        "Use this instead of cat/head/tail in the terminal."
    ),
    traits=ToolTraits(read_only=True, path_argument="path"),
)
async def read_file(context: ToolContext, args: ReadArgs) -> ToolOutput:
    cwd = context.workspace.cwd
    path = resolve(args.path, cwd)
    return await trio.to_thread.run_sync(_read, path, display(path, cwd), args.offset, args.limit)


def refusal_message(shown: str, path: Path, why: str) -> str:
    real = os.path.realpath(path)
    via = f" (it resolves to {real})" if real != os.path.normpath(path) else ""
    return (
        f"write refused: {shown}{via} is protected: {why}. The file tools never write there, however the path is "
        "spelled; if the change is really needed, ask the user to make it."
    )


def _under(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def write_denied(path: Path, hermes_home: Path) -> str | None:
    """Why the file tools may not write ``path`` (None: they may): the denylist, and anything under HERMES_HOME.

    HERMES_HOME holds the agent's own settings, keys and approvals (``config.yaml``, ``.env``,
    ``approved_patterns.txt``): an agent that could write there could widen its own
    permissions without a person's yes. Both paths are compared as written (``..`` removed)
    and with symlinks resolved, so no spelling of a path gets in.
    """
    why = write_refusal(path, hermes_home)
    if why is not None:
        return why
    targets = {Path(os.path.abspath(path)), Path(os.path.realpath(path))}
    homes = {Path(os.path.abspath(hermes_home)), Path(os.path.realpath(hermes_home))}
    if any(_under(target, home) for target in targets for home in homes):
        return f"it is the agent's own configuration (HERMES_HOME, {hermes_home}), which the agent may not change itself"
    return None


def _write(path: Path, shown: str, content: str, home: Path) -> ToolOutput:
    why = write_denied(path, home)
    if why is not None:
        return _failed(refusal_message(shown, path, why))
    target = Path(os.path.realpath(path))  # through symlinks: the link stays, its target changes
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        return _failed(f"content is not valid Unicode text (position {exc.start}); nothing was written.")
    try:
        existed = write_atomic(target, data)
    except IsADirectoryError:
        return _failed(f"{shown} is a directory; give a file name.")
    except OSError as exc:
        return _failed(f"could not write {shown}: {exc.strerror or exc}; the file is unchanged.")
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    via = f" (through the symlink, to {target})" if target != Path(os.path.normpath(path)) else ""
    return ToolOutput(content=f"{'Replaced' if existed else 'Created'} {shown}{via}: {len(data):,} bytes, {lines:,} lines.")


@tool(
    name="write_file",
    toolset="file",
    description=(
        "Write a whole file (creating parent directories), replacing any content it had. The write is atomic: "
        "readers see the old file or the new one, never a mix. To change part of a file, use patch instead. "
        "Credentials and system account files (~/.ssh, ~/.aws/credentials, /etc/shadow, ...) and the agent's own "
        "configuration directory (HERMES_HOME) are refused."
    ),
    traits=ToolTraits(path_argument="path"),
)
async def write_file(context: ToolContext, args: WriteArgs) -> ToolOutput:
    cwd = context.workspace.cwd
    path = resolve(args.path, cwd)
    return await trio.to_thread.run_sync(_write, path, display(path, cwd), args.content, context.home)
