"""Files in and out of a chat, decided purely.

Outbound: a line ``MEDIA:<path>`` in an answer is an attachment (:func:`split_media`). Only a
file under an allowed root is sent (:func:`refusal`): the session's workspace (the terminal's
cwd) and ``HERMES_HOME/cache``; a path is judged *after* symlinks are resolved, so a link in
the workspace to ``/etc/passwd`` or ``~/.hermes/.env`` is refused like the path itself (an
answer comes from a model, and a model can be talked into anything). Images go as photos,
everything else as documents; Telegram's limits are 10 MB for a photo and 50 MB for a document.

Inbound: a document is saved in the workspace under ``downloads/`` with a safe name that starts
with the message's id (:func:`saved_name`), so saving it again after a restart writes the same
file; a photo is an image part for a vision model (:func:`data_url`) or a note for the others.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path, PurePath
from typing import Literal

MEDIA_LINE = re.compile(r"^[ \t]*MEDIA:[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
PHOTO_LIMIT = 10 * 1024 * 1024
DOCUMENT_LIMIT = 50 * 1024 * 1024
INBOUND_LIMIT = 20 * 1024 * 1024
"""The largest file a bot may download (``getFile``), and the cap on a saved document."""
NO_VISION_NOTE = "[image received; this model cannot see images]"

Kind = Literal["photo", "document"]


def split_media(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` without its ``MEDIA:<path>`` lines, and the paths in order (quotes and backticks around a path dropped)."""
    paths = tuple(m.group(1).strip("`'\"") for m in MEDIA_LINE.finditer(text))
    if not paths:
        return text, ()
    rest = re.sub(MEDIA_LINE.pattern + r"\n?", "", text, flags=re.MULTILINE)
    return re.sub(r"\n{3,}", "\n\n", rest).strip(), paths


def kind_of(path: PurePath) -> Kind:
    return "photo" if path.suffix.lower() in IMAGE_SUFFIXES else "document"


def roots(workspace: Path, home: Path) -> tuple[Path, ...]:
    """Where an answer's attachments may come from (both resolved by the caller)."""
    return (workspace, home / "cache")


def refusal(resolved: Path, allowed: tuple[Path, ...], size: int | None) -> str:
    """Why the file at ``resolved`` (symlinks resolved; ``size`` None: it does not exist or
    cannot be read) is not sent, or '' when it may be."""
    name = resolved.name or str(resolved)
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed):
        return f"{name} was not attached: only files in the workspace or the Hermes cache can be sent"
    if size is None:
        return f"{name} was not attached: the file does not exist or cannot be read"
    if size > DOCUMENT_LIMIT:
        return f"{name} was not attached: it is {size / 1e6:.1f} MB, over Telegram's 50 MB limit for a file"
    return ""


def as_kind(resolved: Path, size: int) -> Kind:
    """An image goes as a photo, unless it passes the photo limit (10 MB): then as a document (up to 50 MB, :func:`refusal`)."""
    return "photo" if kind_of(resolved) == "photo" and size <= PHOTO_LIMIT else "document"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def saved_name(message_id: str, name: str) -> str:
    """A file name that is safe anywhere (no separators, no leading dot, at most 100 characters), prefixed by the message id."""
    base = _UNSAFE.sub("_", PurePath(name.replace("\\", "/")).name).strip("._") or "file"
    stem, dot, suffix = base.rpartition(".")
    if dot and len(suffix) <= 10:
        base = f"{stem[:80]}.{suffix}"
    prefix = _UNSAFE.sub("_", message_id)[:20]
    return f"{prefix}-{base[:90]}"


def data_url(data: bytes, file_path: str) -> str:
    mime = IMAGE_SUFFIXES.get(PurePath(file_path).suffix.lower(), "image/jpeg")
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def saved_note(path: Path, size: int) -> str:
    return f"[the user sent a file; it is saved at {path} ({size:,} bytes)]"
