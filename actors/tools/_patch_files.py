"""The files a patch reads and writes: loading text to patch, and a multi-file patch all or nothing.

:func:`plan_patch` checks every path of a parsed patch (the write denylist for each file
touched: added, updated, the target of a move, deleted), reads the files and computes
every new content in memory; any problem raises :class:`PatchFailed` before a byte is
written. :func:`commit` then writes each file atomically (temporary file + rename), and
only after every write succeeded moves the files to remove aside and unlinks them. If a
write fails part way, what was written is put back (old contents rewritten, new files
removed, files moved aside renamed back) and the model is told nothing changed.

Blocking: call from a worker thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from actors._atomic import TEMP_SUFFIX, write_atomic

from ._files import refusal_message, write_denied
from ._patch_format import AddFile, DeleteFile, Operation, UpdateFile
from ._patch_hunks import Applied, HunkFailed, apply_hunks
from ._paths import display, missing_hint, resolve
from ._textfile import NotText, TextFile

MAX_PATCH_BYTES = 20 << 20


class PatchFailed(Exception):
    """Nothing was written; the message says why, for the model."""


def read_text(path: Path, shown: str, *, create_hint: str) -> tuple[bytes, TextFile]:
    """The bytes of the regular file ``path`` and its text, for patching.

    Raises:
        PatchFailed: not a regular file, too large, missing (``create_hint`` says what to
            use instead), unreadable, binary or not UTF-8.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise PatchFailed(f"{shown} is {kind}; patch edits files.")
        if info.st_size > MAX_PATCH_BYTES:
            raise PatchFailed(f"{shown} is {info.st_size / (1 << 20):.0f} MB; patch edits files up to {MAX_PATCH_BYTES >> 20} MB.")
        with open(path, "rb") as source:
            data = source.read()
    except FileNotFoundError:
        raise PatchFailed(f"{shown}: no such file.{missing_hint(path)} {create_hint}") from None
    except OSError as exc:
        raise PatchFailed(f"could not read {shown}: {exc.strerror or exc}.") from None
    try:
        return data, TextFile.decode(data, path.name)
    except NotText as exc:
        raise PatchFailed(f"cannot patch {shown}: {exc}; patch edits UTF-8 text only.") from None


@dataclasses.dataclass(frozen=True, slots=True)
class FileChange:
    """One file of a planned patch."""

    kind: Literal["add", "update", "move", "delete"]
    shown: str
    """The path as the result shows it (a move: the source)."""
    target: Path
    """The file written (add, update, move) or removed (delete)."""
    data: bytes | None = None
    """What ``target`` will hold; None for a delete."""
    before: bytes | None = None
    """What ``target`` held, to put back if the patch fails part way; None if it is new."""
    source: Path | None = None
    """A move: the file removed once ``target`` is written."""
    mode: int | None = None
    """A move: the permission bits ``target`` takes from the source."""
    moved_to: str = ""
    """A move: the target as the result shows it."""
    applied: Applied | None = None
    """An update or move: the hunks' strategies and lines."""
    lines: int = 0
    """An add: the number of lines written."""


class _Paths:
    """Resolves and checks each path a patch names; a file may be named once only."""

    def __init__(self, cwd: Path, home: Path) -> None:
        self.cwd, self.home = cwd, home
        self.seen: dict[str, str] = {}

    def check(self, raw: str) -> tuple[Path, str]:
        path = resolve(raw, self.cwd)
        shown = display(path, self.cwd)
        why = write_denied(path, self.home)
        if why is not None:
            raise PatchFailed(refusal_message(shown, path, why))
        key = os.path.realpath(path)
        if key in self.seen:
            also = f" (once as {self.seen[key]})" if self.seen[key] != shown else ""
            raise PatchFailed(f"{shown} is named in two sections of the patch{also}; give each file one section.")
        self.seen[key] = shown
        return path, shown


def _add(op: AddFile, paths: _Paths) -> FileChange:
    path, shown = paths.check(op.path)
    if os.path.lexists(path):
        raise PatchFailed(f"cannot add {shown}: it exists already; to change it, use '*** Update File: {op.path}'.")
    text = "".join(line + "\n" for line in op.lines)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PatchFailed(f"the content of {shown} is not valid Unicode text (position {exc.start}).") from None
    return FileChange(kind="add", shown=shown, target=path, data=data, lines=len(op.lines))


def _delete(op: DeleteFile, paths: _Paths) -> FileChange:
    path, shown = paths.check(op.path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise PatchFailed(f"cannot delete {shown}: no such file.{missing_hint(path)}") from None
    except OSError as exc:
        raise PatchFailed(f"cannot delete {shown}: {exc.strerror or exc}.") from None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise PatchFailed(f"cannot delete {shown}: it is {kind}; '*** Delete File' removes files only.")
    return FileChange(kind="delete", shown=shown, target=Path(os.path.normpath(path)))


def _update(op: UpdateFile, paths: _Paths) -> FileChange:
    path, shown = paths.check(op.path)
    real = Path(os.path.realpath(path))  # through symlinks: the link stays, its target changes
    before, loaded = read_text(real, shown, create_hint=f"To create it, use '*** Add File: {op.path}'.")
    try:
        applied = apply_hunks(loaded.text, op.hunks, crlf=loaded.crlf)
    except HunkFailed as exc:
        count = len(op.hunks)
        where = f"{shown}, hunk {exc.index} of {count} ({exc.hunk.title()}, patch line {exc.hunk.line})"
        raise PatchFailed(f"{where}: {exc}") from None
    data = loaded.encode(applied.text)
    if op.move_to is None:
        return FileChange(kind="update", shown=shown, target=real, data=data, before=before, applied=applied)
    destination, moved_to = paths.check(op.move_to)
    if os.path.lexists(destination):
        raise PatchFailed(f"cannot move {shown} to {moved_to}: {moved_to} exists already; delete it in its own section first.")
    mode = stat.S_IMODE(os.stat(real).st_mode)
    source = Path(os.path.normpath(path))
    return FileChange(kind="move", shown=shown, target=destination, data=data, source=source, mode=mode, moved_to=moved_to, applied=applied)


def plan_patch(operations: Sequence[Operation], cwd: Path, home: Path) -> list[FileChange]:
    """Every file's change, computed in memory; nothing is written.

    Raises:
        PatchFailed: a path is protected or named twice, a file is missing (or exists
            when added), a hunk does not apply; the message names the file and hunk.
    """
    paths = _Paths(cwd, home)
    changes: list[FileChange] = []
    for op in operations:
        match op:
            case AddFile():
                changes.append(_add(op, paths))
            case DeleteFile():
                changes.append(_delete(op, paths))
            case UpdateFile():
                changes.append(_update(op, paths))
    return changes


def _aside(path: Path) -> Path:
    return path.parent / f".{path.name[:100]}.{secrets.token_hex(4)}.deleted{TEMP_SUFFIX}"


def _undo(written: list[tuple[Path, bytes | None]], parked: list[tuple[Path, Path]]) -> list[str]:
    """Put back what a failed commit did; the paths it could not restore."""
    failed: list[str] = []
    for original, aside in reversed(parked):
        try:
            os.rename(aside, original)
        except OSError:
            failed.append(str(original))
    for path, before in reversed(written):
        try:
            if before is None:
                os.unlink(path)
            else:
                write_atomic(path, before)
        except OSError:
            failed.append(str(path))
    return failed


def commit(changes: Sequence[FileChange]) -> None:
    """Write every change; on failure put everything back.

    Raises:
        PatchFailed: a write or removal failed (the message says whether all was restored).
    """
    written: list[tuple[Path, bytes | None]] = []
    parked: list[tuple[Path, Path]] = []
    doing = ""
    try:
        for change in changes:
            if change.data is not None and (change.kind != "update" or change.data != change.before):
                doing = f"write {change.moved_to or change.shown}"
                write_atomic(change.target, change.data)
                written.append((change.target, change.before))
                if change.mode is not None:
                    with contextlib.suppress(OSError):
                        os.chmod(change.target, change.mode)
        for change in changes:
            gone = change.source if change.kind == "move" else change.target if change.kind == "delete" else None
            if gone is not None:
                doing = f"remove {change.shown}"
                aside = _aside(gone)
                os.rename(gone, aside)
                parked.append((gone, aside))
    except OSError as exc:
        failed = _undo(written, parked)
        restored = "no file was changed" if not failed else f"could not restore {', '.join(failed)}; check them"
        raise PatchFailed(f"could not {doing}: {exc.strerror or exc}; {restored}.") from None
    for _, aside in parked:
        with contextlib.suppress(OSError):
            os.unlink(aside)
