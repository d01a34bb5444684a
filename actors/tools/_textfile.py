"""Text or not: binary detection, and a text file's encoding details kept across an edit.

Blocking helpers; the tools call them from worker threads.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePath

SAMPLE_BYTES = 8192
"""How much of a file's start binary detection looks at."""

BINARY_SUFFIXES = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tif", ".tiff", ".psd",
        ".pdf", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar",
        ".whl", ".so", ".dylib", ".dll", ".exe", ".o", ".a", ".pyc", ".pyo", ".class",
        ".mp3", ".mp4", ".wav", ".ogg", ".flac", ".mov", ".avi", ".mkv", ".webm",
        ".woff", ".woff2", ".ttf", ".otf", ".sqlite", ".sqlite3", ".parquet", ".npy", ".pt",
    }
)  # fmt: skip

_TEXT_CONTROLS = frozenset("\t\n\r\f\b\x1b")
BOM = "\ufeff"


def binary_reason(sample: bytes, name: str) -> str | None:
    """Why a file whose first bytes are ``sample`` is not text, or None if it looks like text."""
    suffix = PurePath(name).suffix.lower()
    if suffix in BINARY_SUFFIXES:
        return f"its {suffix} name says binary"
    if b"\0" in sample:
        return "it contains NUL bytes"
    text = sample.decode("utf-8", errors="replace")
    if len(sample) == SAMPLE_BYTES:
        text = text[:-2]  # the sample may end inside a multi-byte character
    if text:
        odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in _TEXT_CONTROLS))
        if odd / len(text) > 0.1:
            return "most of its bytes are not printable text"
    return None


class NotText(Exception):
    """The file cannot be edited as UTF-8 text (the message says why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TextFile:
    """A UTF-8 file as the fuzzy matcher sees it: ``\\n`` line ends, no byte-order mark.

    :meth:`encode` puts back what was taken out, so an edit changes only what it replaced.
    """

    text: str
    bom: bool = False
    crlf: bool = False

    @classmethod
    def decode(cls, data: bytes, name: str) -> TextFile:
        """Raises:
        NotText: binary, or not valid UTF-8.
        """
        reason = binary_reason(data[:SAMPLE_BYTES], name)
        if reason is not None:
            raise NotText(f"it is a binary file ({reason})")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotText(f"it is not valid UTF-8 (byte {exc.start})") from None
        bom = text.startswith(BOM)
        if bom:
            text = text[1:]
        # Only a file whose every line ends in CRLF is treated as CRLF; a mixed file is kept byte for byte.
        newlines = text.count("\n")
        crlf = newlines > 0 and text.count("\r\n") == newlines
        if crlf:
            text = text.replace("\r\n", "\n")
        return cls(text=text, bom=bom, crlf=crlf)

    def encode(self, text: str) -> bytes:
        if self.crlf:
            text = text.replace("\n", "\r\n")
        return ((BOM if self.bom else "") + text).encode("utf-8")
