"""The ripgrep search backend: ``rg --json`` streamed, stopped as soon as the limit is passed.

ripgrep runs in its own process group and is killed (the whole group) when the search
has enough results or the calling task is cancelled; the call never leaves it running.
The walk matches :mod:`._search_walk` (``--sort path --hidden --no-ignore``, the same
exclusions and size cap), so both backends give the same results.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from actors import kill_group

from ._search_walk import MAX_FILE_BYTES, SKIP_NAMES, ContentQuery, FileHits, Found, SearchFailed

STDERR_BYTES = 8192
_decode_event = msgspec.json.Decoder(dict[str, Any])


class PatternUnsupported(SearchFailed):
    """ripgrep's regex engine refused a pattern (look-around, back-references) Python's may accept."""


def ripgrep() -> str | None:
    """The ``rg`` executable, or None when it is not installed (the Python backend is used then)."""
    return shutil.which("rg")


def _common(rg: str) -> list[str]:
    argv = [rg, "--no-config", "--no-messages", "--hidden", "--no-ignore", "--sort", "path"]
    for name in SKIP_NAMES:
        argv += ["--glob", f"!{name}"]
    return argv


async def _drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    while chunk := await stream.receive_some(STDERR_BYTES):
        into += chunk[: max(0, STDERR_BYTES - len(into))]


async def stream_lines(argv: list[str], on_line: Callable[[bytes], bool]) -> tuple[int, str]:
    """Run ``argv`` in a new process group and feed each stdout line to ``on_line`` until it returns False.

    Returns:
        (exit status, negative if killed; the start of stderr).
    """
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert process.stdout is not None and process.stderr is not None
    errors = bytearray()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, process.stderr, errors)
            buffer, going = bytearray(), True
            while going and (chunk := await process.stdout.receive_some(1 << 16)):
                buffer += chunk
                start = 0
                while going and (end := buffer.find(b"\n", start)) >= 0:
                    going = on_line(bytes(buffer[start:end]))
                    start = end + 1
                del buffer[:start]
            if going and buffer:
                on_line(bytes(buffer))
            if not going:
                await kill_group(process.pid)
            await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await kill_group(process.pid)
                await process.wait()
            await process.stdout.aclose()
            await process.stderr.aclose()
    status = process.returncode if process.returncode is not None else -1
    return status, errors.decode(errors="replace")


def _text(field: dict[str, Any]) -> str:
    if "text" in field:
        return str(field["text"])
    raw = base64.b64decode(field.get("bytes", ""))
    return raw.decode("utf-8", errors="replace")


def _path(field: dict[str, Any]) -> str:
    return str(field["text"]) if "text" in field else os.fsdecode(base64.b64decode(field.get("bytes", "")))


class _Content:
    """Folds ``rg --json`` events into :class:`Found`, stopping once the limit is passed."""

    def __init__(self, limit: int, context: int) -> None:
        self.found = Found()
        self.limit, self.context = limit, context
        self.total = 0
        self.pending: FileHits | None = None
        self.cutoff: int | None = None
        """Once the limit is passed: the last line of after-context still wanted from this file."""

    def _commit(self) -> None:
        if self.pending is not None and self.pending.matches:
            self.found.files.append(self.pending)
        self.pending = None

    def feed(self, raw: bytes) -> bool:
        event = _decode_event.decode(raw)
        kind, data = event.get("type"), event.get("data", {})
        if kind == "begin":
            self.pending = FileHits(path=_path(data["path"]))
        elif kind in ("match", "context") and self.pending is not None:
            number = int(data["line_number"])
            if self.cutoff is not None and number > self.cutoff:
                self._commit()
                return False
            self.pending.lines[number] = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
            if kind == "match" and self.cutoff is None:
                if self.total < self.limit:
                    self.pending.matches.append(number)
                    self.total += 1
                else:
                    self.found.more = True
                    if not self.pending.matches:
                        self.pending = None
                        return False
                    self.cutoff = self.pending.matches[-1] + self.context
                    if number > self.cutoff:
                        self._commit()
                        return False
        elif kind == "end" and self.pending is not None:
            if data.get("binary_offset") is not None:
                self.pending = None  # a NUL byte turned up: binary files are skipped
            self._commit()
            return not self.found.more
        return True


async def search_content(rg: str, query: ContentQuery) -> Found:
    """Raises:
    PatternUnsupported: ripgrep cannot parse the pattern (the caller may retry in Python).
    SearchFailed: another error, before any result.
    """
    argv = _common(rg) + ["--json", "--encoding", "utf-8", "--max-filesize", str(MAX_FILE_BYTES)]
    argv.append("--ignore-case" if query.ignore_case else "--case-sensitive")
    if query.context:
        argv += ["--context", str(query.context)]
    for glob in query.name_globs:
        argv += ["--glob", glob]
    argv += ["--regexp", query.pattern, "--", str(query.root)]
    folder = _Content(query.limit, query.context)
    status, errors = await stream_lines(argv, folder.feed)
    if status == 2 and not folder.found.files:
        if "regex parse error" in errors or "error parsing" in errors:
            raise PatternUnsupported(errors.strip())
        if errors.strip():
            raise SearchFailed(f"ripgrep failed: {errors.strip()[:500]}")
    folder._commit()
    return folder.found


async def list_files(rg: str, root: Path, accept: Callable[[str], bool], limit: int) -> Found:
    found = Found()

    def take(raw: bytes) -> bool:
        path = os.fsdecode(raw)
        if not accept(path):
            return True
        if len(found.paths) == limit:
            found.more = True
            return False
        found.paths.append(path)
        return True

    await stream_lines(_common(rg) + ["--files", "--", str(root)], take)
    return found
