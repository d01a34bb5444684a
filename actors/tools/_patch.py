"""``patch``: replace text in a file, found exactly or by the fuzzy chain, written atomically.

The file is decoded as UTF-8 (a byte-order mark and CRLF line ends are taken out for the
match and put back on write, so an edit changes only what it replaced), the replacement
is made by :func:`._replace.fuzzy_replace`, and the result goes through the same write
denylist and atomic write as ``write_file``. The result names the strategy that matched
and shows a short diff of each change.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from actors.agent import ToolCall, ToolOutput, ToolTraits

from ._atomic import write_atomic
from ._files import refusal_message
from ._fuzzy import Text
from ._paths import display, missing_hint, resolve, write_refusal
from ._registry import tool
from ._replace import Patched, PatchRefused, fuzzy_replace
from ._textfile import NotText, TextFile

MAX_PATCH_BYTES = 20 << 20
DIFF_EDITS = 3
DIFF_LINES = 30

NOTES = {
    "exact": "",
    "line_trimmed": "trailing whitespace ignored",
    "whitespace_normalized": "runs of spaces and tabs ignored",
    "indentation_flexible": "indentation ignored; new_string re-indented to match the file",
    "escape_normalized": "escape sequences normalised; new_string converted the same way",
    "trimmed_boundary": "blank lines and spaces around old_string ignored",
    "unicode_normalized": "typographic quotes, dashes and spaces taken as plain ones",
    "block_anchor": "found by its first and last lines; lines between differed, check the diff",
    "context_aware": "found by similarity; some lines differed, check the diff",
}
"""What each strategy forgave, for the model to read in the result."""


def _failed(message: str) -> ToolOutput:
    return ToolOutput(content=f"[error] {message}", ok=False)


class PatchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="The file to edit: absolute, or relative to the working directory (~ is expanded).")]
    old_string: Annotated[
        str,
        msgspec.Meta(
            description=(
                "The text to replace, copied from the file with enough surrounding lines to occur only once. "
                "Small differences in whitespace, indentation, escaping and quote style are forgiven."
            )
        ),
    ]
    new_string: Annotated[str, msgspec.Meta(description="The text to put in its place (empty to delete it).")]
    replace_all: Annotated[bool, msgspec.Meta(description="Replace every occurrence instead of requiring exactly one.")] = False


def _hunk_header(row: str, first: int) -> str:
    """``@@ -3,2 +3,4 @@`` of a region starting at 0-based line ``first`` -> ``@@ line 12 @@`` of the file."""
    found = re.match(r"@@ -(\d+)", row)
    return f"@@ line {first + int(found.group(1)) if found else first + 1} @@"


def _diff(original: Text, patched: Patched) -> str:
    """A few lines of unified diff around each of the first replacements."""
    out: list[str] = []
    content = original.content
    for edit in patched.edits[:DIFF_EDITS]:
        first = original.line_of(edit.start)
        last = original.line_of(max(edit.start, edit.end - 1))
        start = original.starts[first]
        end = max(original.starts[last] + len(original.lines[last]), edit.end)
        before = content[start:end].split("\n")
        after = (content[start : edit.start] + edit.replacement + content[edit.end : end]).split("\n")
        if before[-1] == after[-1] == "" and len(before) > 1 and len(after) > 1:
            before.pop()  # the region ended with its newline: not a line of its own
            after.pop()
        body = list(difflib.unified_diff(before, after, lineterm="", n=1))[2:]
        body = [_hunk_header(row, first) if row.startswith("@@") else row for row in body]
        if len(body) > DIFF_LINES:
            body = body[:DIFF_LINES] + [f"... ({len(body) - DIFF_LINES} more diff lines)"]
        out += body
    if len(patched.edits) > DIFF_EDITS:
        out.append(f"... and {len(patched.edits) - DIFF_EDITS} more replacements")
    return "\n".join(out)


def _load(path: Path, shown: str) -> TextFile | ToolOutput:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            return _failed(f"{shown} is {kind}; patch edits files.")
        if info.st_size > MAX_PATCH_BYTES:
            return _failed(f"{shown} is {info.st_size / (1 << 20):.0f} MB; patch edits files up to {MAX_PATCH_BYTES >> 20} MB.")
        with open(path, "rb") as source:
            data = source.read()
    except FileNotFoundError:
        return _failed(f"{shown}: no such file.{missing_hint(path)} To create a file, use write_file.")
    except OSError as exc:
        return _failed(f"could not read {shown}: {exc.strerror or exc}.")
    try:
        return TextFile.decode(data, path.name)
    except NotText as exc:
        return _failed(f"cannot patch {shown}: {exc}; patch edits UTF-8 text only.")


def _patch(path: Path, shown: str, args: PatchArgs, home: Path) -> ToolOutput:
    why = write_refusal(path, home)
    if why is not None:
        return _failed(refusal_message(shown, path, why))
    target = Path(os.path.realpath(path))
    loaded = _load(target, shown)
    if isinstance(loaded, ToolOutput):
        return loaded
    old, new = args.old_string, args.new_string
    if loaded.crlf:
        old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    try:
        patched = fuzzy_replace(loaded.text, old, new, replace_all=args.replace_all)
    except PatchRefused as exc:
        return _failed(f"{shown} was not changed: {exc}")
    if patched.text == loaded.text:
        return ToolOutput(content=f"{shown} already reads that way (strategy {patched.strategy}); nothing was written.")
    try:
        write_atomic(target, loaded.encode(patched.text))
    except OSError as exc:
        return _failed(f"could not write {shown}: {exc.strerror or exc}; the file is unchanged.")
    count = len(patched.edits)
    where = ", ".join(str(line) for line in patched.lines[:10]) + (", ..." if count > 10 else "")
    note = NOTES[patched.strategy]
    how = f"strategy {patched.strategy}" + (f": {note}" if note else "")
    head = f"Patched {shown}: {count} replacement{'s' if count != 1 else ''} at line{'s' if count != 1 else ''} {where} ({how})."
    return ToolOutput(content=head + "\n" + _diff(Text(loaded.text), patched))


@tool(
    name="patch",
    toolset="file",
    description=(
        "Edit a file by replacing old_string with new_string. old_string must occur exactly once (include "
        "surrounding lines to make it unique) unless replace_all is set. If it does not match exactly, looser "
        "matching is tried (whitespace, indentation, escaping, quotes, similar blocks) and the result names the "
        "strategy used and shows the diff. The write is atomic."
    ),
    traits=ToolTraits(path_argument="path"),
)
async def patch(call: ToolCall, args: PatchArgs) -> ToolOutput:
    cwd = call.workspace.cwd
    path = resolve(args.path, cwd)
    return await trio.to_thread.run_sync(_patch, path, display(path, cwd), args, call.home)
