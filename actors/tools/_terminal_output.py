"""What the model sees of a command's output: capped, cleaned, secrets redacted.

Output is captured as bytes with a bounded memory cost: :class:`HeadTail` keeps the first
and the last bytes of a foreground command, :class:`OutputRing` the latest bytes of a
background one. :func:`render` turns captured bytes into text: ANSI escapes stripped,
carriage-return redraws (progress bars) reduced to their last state, control characters
dropped, then :func:`redact` hides secrets: the values of this process's ``*KEY*`` /
``*TOKEN*`` / ``*SECRET*`` / ``*PASSWORD*`` environment variables, then every shape in the
secret table the memory threat scan uses (:data:`actors.memory.SECRET_PATTERNS`: API keys,
tokens, private keys, ``Authorization`` headers, ``NAME_TOKEN=value`` lines).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from actors.memory import is_secret_name, redact_secrets

from ._danger_text import strip_ansi

HEAD_BYTES = 25_000
TAIL_BYTES = 25_000
"""Together: at most 50,000 characters of output reach the model."""

_MIN_SECRET_VALUE = 6
"""Shorter values (``1``, ``true``) are too common to hide without hiding ordinary text."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_OVERSTRIKE = re.compile(r".\x08")


class HeadTail:
    """The first ``head`` and the last ``tail`` bytes of a stream, and its total size."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: -self.tail_limit]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.tail_limit)

    def raw(self) -> str:
        """What was kept, decoded and nothing else (the ``transform_terminal_output`` hook's input)."""
        head = self.head.decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_limit :]).decode("utf-8", errors="replace")
        omitted = self.omitted
        return head + tail if omitted <= 0 else f"{head}\n[... {omitted:,} bytes of output omitted from the middle ...]\n{tail}"

    def text(self, environ: Mapping[str, str] | None = None) -> str:
        """Cleaned, redacted text; a note marks what was cut from the middle."""
        head = self.head.decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_limit :]).decode("utf-8", errors="replace")
        omitted = self.omitted
        if omitted <= 0:
            return render(head + tail, environ)
        # Cut at line ends, so no secret is split across the cut and escapes the patterns.
        cut = head.rfind("\n")
        head = head[: cut + 1] if cut >= len(head) // 2 else head
        start = tail.find("\n")
        tail = tail[start + 1 :] if 0 <= start < len(tail) // 2 else tail
        note = f"\n[... {omitted:,} bytes of output omitted from the middle ...]\n"
        return render(head, environ).rstrip("\n") + note + render(tail, environ)


class OutputRing:
    """The latest ``limit`` bytes of a stream, with absolute offsets for incremental reads."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.start = 0
        """Absolute offset of ``buffer[0]``."""

    @property
    def end(self) -> int:
        return self.start + len(self.buffer)

    def feed(self, data: bytes) -> None:
        self.buffer += data
        excess = len(self.buffer) - self.limit
        if excess > self.limit // 4:
            del self.buffer[:excess]
            self.start += excess

    def since(self, offset: int) -> tuple[int, bytes]:
        """Bytes lost before what is still held, and the bytes from ``offset`` on."""
        if offset < self.start:
            return self.start - offset, bytes(self.buffer)
        return 0, bytes(self.buffer[offset - self.start :])


def clean(text: str) -> str:
    """Strip ANSI escapes, keep each carriage-return redraw's final state, drop control characters."""
    text = strip_ansi(text).replace("\r\n", "\n")
    if "\r" in text:
        lines = []
        for line in text.split("\n"):
            parts = [p for p in line.split("\r") if p]
            lines.append(parts[-1] if parts else "")
        text = "\n".join(lines)
    if "\x08" in text:
        text = _OVERSTRIKE.sub("", text)
    return _CONTROL.sub("", text)


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, value) of environment variables whose names say they hold secrets, longest first."""
    env = os.environ if environ is None else environ
    found = [(name, value) for name, value in env.items() if is_secret_name(name) and len(value) >= _MIN_SECRET_VALUE]
    return sorted(found, key=lambda item: -len(item[1]))


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    for name, value in secret_values(environ):
        if value in text:
            text = text.replace(value, f"[REDACTED:{name}]")
    return redact_secrets(text)


def render(text: str, environ: Mapping[str, str] | None = None) -> str:
    return redact(clean(text), environ)
