"""``patch``: replace text in a file, or apply a multi-file patch; found exactly or by the fuzzy chain.

Two modes. ``replace`` (the default): the file is decoded as UTF-8 (a byte-order mark and
CRLF line ends are taken out for the match and put back on write, so an edit changes only
what it replaced), the replacement is made by :func:`._replace.fuzzy_replace`, and the
result goes through the same write denylist and atomic write as ``write_file``. The
result names the strategy that matched and shows a short diff of each change.

``patch``: a ``*** Begin Patch`` text (:mod:`._patch_format`) adding, updating, moving and
deleting files, applied all or nothing (:mod:`._patch_files`); each hunk is found by the
same chain and guards (:mod:`._patch_hunks`).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import trio

from actors._atomic import write_atomic
from actors.agent import ToolContext, ToolOutput, ToolTraits

from ._escapes import real_controls
from ._files import refusal_message, write_denied
from ._fuzzy import Text
from ._patch_files import FileChange, PatchFailed, commit, plan_patch, read_text
from ._patch_format import MalformedPatch, parse_patch
from ._paths import display, resolve
from ._registry import tool
from ._replace import Patched, PatchRefused, fuzzy_replace

DIFF_EDITS = 3
DIFF_LINES = 30

NOTES = {
    "exact": "",
    "line_trimmed": "trailing whitespace ignored",
    "whitespace_normalized": "runs of spaces and tabs ignored",
    "indentation_flexible": "indentation ignored; new_string written at the file's indentation",
    "escape_normalized": "escape sequences normalised; new_string converted the same way",
    "trimmed_boundary": "blank lines and spaces around old_string ignored",
    "unicode_normalized": "typographic quotes, dashes and spaces taken as plain ones",
    "block_anchor": "found by its first and last lines; lines between differed, check the diff",
    "context_aware": "found by similarity; some lines differed, check the diff",
}
"""What each strategy forgave, for the model to read in the result."""


def _failed(message: str) -> ToolOutput:
    return ToolOutput(content=f"[error] {message}", ok=False)


PATCH_FORMAT = """\
*** Begin Patch
*** Add File: <path>            then each line of the new file, prefixed +
*** Update File: <path>
*** Move to: <new path>         (optional: also rename the file)
@@ <a line the hunk comes after> (optional; one @@ line starts each hunk)
 <context line>                 prefix: space = context, - = remove, + = add
*** End of File                 (optional: the hunk ends the file)
*** Delete File: <path>
*** End Patch"""


class PatchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    mode: Annotated[
        Literal["replace", "patch"],
        msgspec.Meta(
            description=(
                "'replace' (default): replace old_string with new_string in the file at path. "
                "'patch': apply the multi-file patch given in patch; all other fields are then left out."
            )
        ),
    ] = "replace"
    path: Annotated[
        str | None,
        msgspec.Meta(description="replace mode: the file to edit, absolute or relative to the working directory (~ is expanded)."),
    ] = None
    old_string: Annotated[
        str | None,
        msgspec.Meta(
            description=(
                "replace mode: the text to replace, copied from the file with enough surrounding lines to occur only "
                "once. Small differences in whitespace, indentation, escaping and quote style are forgiven."
            )
        ),
    ] = None
    new_string: Annotated[str | None, msgspec.Meta(description="replace mode: the text to put in its place (empty to delete it).")] = None
    replace_all: Annotated[bool, msgspec.Meta(description="replace mode: replace every occurrence instead of requiring exactly one.")] = False
    patch: Annotated[
        str | None,
        msgspec.Meta(
            description=(
                "patch mode: the patch text, applied all or nothing (if any part fails, no file changes). Paths are "
                "absolute or relative to the working directory. Format:\n" + PATCH_FORMAT
            )
        ),
    ] = None


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


def _replace_mode(args: PatchArgs, cwd: Path, home: Path) -> ToolOutput:
    if args.patch is not None:
        return _failed("'patch' is read in mode 'patch' only; set mode to 'patch' (and leave out path, old_string and new_string).")
    raw, old, new = args.path, args.old_string, args.new_string
    if raw is None or old is None or new is None:
        missing = [name for name in ("path", "old_string", "new_string") if getattr(args, name) is None]
        return _failed(
            f"mode 'replace' needs path, old_string and new_string (missing: {', '.join(missing)}); "
            "for a multi-file patch, set mode to 'patch' and give the patch text in 'patch'."
        )
    path = resolve(raw, cwd)
    shown = display(path, cwd)
    why = write_denied(path, home)
    if why is not None:
        return _failed(refusal_message(shown, path, why))
    target = Path(os.path.realpath(path))
    try:
        _, loaded = read_text(target, shown, create_hint="To create a file, use write_file.")
    except PatchFailed as exc:
        return _failed(str(exc))
    new = real_controls(new, loaded.text, crlf=loaded.crlf)
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
    head = f"Patched {shown}: {count} replacement{'s' if count != 1 else ''} at line{'s' if count != 1 else ''} {where} ({_how(patched.strategy)})."
    return ToolOutput(content=head + "\n" + _diff(Text(loaded.text), patched))


def _how(strategy: str) -> str:
    note = NOTES.get(strategy, "")
    return f"strategy {strategy}" + (f": {note}" if note else "")


def _summary(change: FileChange) -> str:
    match change.kind:
        case "add":
            return f"added {change.shown} ({change.lines} line{'s' if change.lines != 1 else ''})"
        case "delete":
            return f"deleted {change.shown}"
    head = f"moved {change.shown} to {change.moved_to}" if change.kind == "move" else f"updated {change.shown}"
    applied = change.applied
    if applied is None or not applied.strategies:
        return head
    count = len(applied.strategies)
    at = ", ".join(str(line) for line in applied.lines)
    loose = [f"hunk {i} by {_how(s)}" for i, s in enumerate(applied.strategies, 1) if s not in ("exact", "insert")]
    if change.kind == "update" and change.data == change.before:
        head = f"{change.shown} already read that way"
    return f"{head}: {count} hunk{'s' if count != 1 else ''} at line{'s' if count != 1 else ''} {at}" + (f" ({'; '.join(loose)})" if loose else "")


def _patch_mode(args: PatchArgs, cwd: Path, home: Path) -> ToolOutput:
    extra = [name for name in ("path", "old_string", "new_string") if getattr(args, name) is not None]
    if extra or args.replace_all:
        named = ", ".join(extra + (["replace_all"] if args.replace_all else []))
        return _failed(f"mode 'patch' takes only 'patch'; leave out {named} (the files are named inside the patch text).")
    if args.patch is None:
        return _failed("mode 'patch' needs the patch text in 'patch', starting '*** Begin Patch' and ending '*** End Patch'.")
    try:
        changes = plan_patch(parse_patch(args.patch), cwd, home)
    except MalformedPatch as exc:
        return _failed(f"the patch was not applied (no file changed): malformed patch, {exc}\nThe format:\n{PATCH_FORMAT}")
    except PatchFailed as exc:
        return _failed(f"the patch was not applied (no file changed): {exc}")
    try:
        commit(changes)
    except PatchFailed as exc:  # says itself whether every file was put back
        return _failed(f"the patch was not applied: {exc}")
    count = len(changes)
    lines = "\n".join(f"  {_summary(change)}" for change in changes)
    return ToolOutput(content=f"Applied the patch to {count} file{'s' if count != 1 else ''}:\n{lines}")


def _patch(args: PatchArgs, cwd: Path, home: Path) -> ToolOutput:
    return _patch_mode(args, cwd, home) if args.mode == "patch" else _replace_mode(args, cwd, home)


@tool(
    name="patch",
    toolset="file",
    description=(
        "Edit a file by replacing old_string with new_string. old_string must occur exactly once (include "
        "surrounding lines to make it unique) unless replace_all is set. If it does not match exactly, looser "
        "matching is tried (whitespace, indentation, escaping, quotes, similar blocks) and the result names the "
        "strategy used and shows the diff. The write is atomic. To add, change, move or delete several files at "
        "once, use mode 'patch' with a '*** Begin Patch' text instead (all or nothing)."
    ),
    traits=ToolTraits(path_argument="path"),
)
async def patch(context: ToolContext, args: PatchArgs) -> ToolOutput:
    return await trio.to_thread.run_sync(_patch, args, context.workspace.cwd, context.home)
