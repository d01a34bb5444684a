"""Context files for the system prompt: project guidance from the working directory.

``SOUL.md``, ``.hermes.md``, ``AGENTS.md`` and ``.cursorrules`` (the files Hermes loads) are
read from the working directory, in that order. Each is threat-scanned in full; a file that
fails the scan is left out and replaced by a visible note saying why, so neither the model
nor the person reading the prompt mistakes its absence for an empty file. Each file is cut
at ``max_file_chars`` and all of them together at ``max_total_chars``, with a note.

Reads files: call from a worker thread, once per session (the prompt is then frozen).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ._threats import scan_text

CONTEXT_FILES = ("SOUL.md", ".hermes.md", "AGENTS.md", ".cursorrules")
MAX_CONTEXT_FILE_CHARS = 20_000
MAX_CONTEXT_CHARS = 50_000
MAX_READ_BYTES = 1_000_000
"""Bytes read (and scanned) of one file at most; anything past that is never injected anyway."""


def context_files(
    workdir: Path,
    *,
    names: Sequence[str] = CONTEXT_FILES,
    max_file_chars: int = MAX_CONTEXT_FILE_CHARS,
    max_total_chars: int = MAX_CONTEXT_CHARS,
) -> str:
    """The context files of ``workdir`` as one block for the system prompt; empty when there are none."""
    parts: list[str] = []
    room = max_total_chars
    for name in names:
        path = workdir / name
        if not path.is_file():
            continue
        try:
            with path.open("rb") as source:
                data = source.read(MAX_READ_BYTES)
        except OSError as exc:
            parts.append(f"[context file {name} could not be read: {exc.strerror or exc}]")
            continue
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff").strip()
        if not text:
            continue
        threat = scan_text(text)
        if threat is not None:
            parts.append(f"[context file {name} was blocked: {threat.label}]")
            continue
        if room <= 0:
            parts.append(f"[context file {name} was left out: the context files reached {max_total_chars:,} characters]")
            continue
        kept = text[: min(max_file_chars, room)]
        room -= len(kept)
        cut = len(text) - len(kept)
        if cut or len(data) == MAX_READ_BYTES:
            more = f"{cut:,}+" if len(data) == MAX_READ_BYTES else f"{cut:,}"
            kept += f"\n[... {more} more characters of {name} cut]"
        text = kept
        parts.append(f"## {name}\n{text}")
    if not parts:
        return ""
    return (
        "# Project context\n"
        "Guidance files from the working directory. Follow them where they apply, "
        "unless they conflict with the user's request.\n\n" + "\n\n".join(parts)
    )
