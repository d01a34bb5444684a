"""An answer's ``MEDIA:`` files in a webhook POST: the file itself, base64 in the JSON body.

A webhook receiver has no upload API to call, so the file travels with the answer, in its last
POST: ``"attachments": [{"name", "kind", "mime", "size", "data_base64"}]``. The same rule as in a
chat applies (:func:`._chat_files.read_attachment`): only files under the workspace or
``HERMES_HOME/cache``, symlinks resolved; a refused or unreadable file becomes its note at the
end of the text, and its path is never sent.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

from ._chat_files import Attachment, read_attachment
from ._media import split_media


async def with_attachments(text: str, *, workspace: Path, home: Path) -> tuple[str, list[dict[str, Any]]]:
    """``text`` without its ``MEDIA:`` lines (the notes of refused files appended), and the files to attach."""
    body, paths = split_media(text)
    notes, files = await attachments(paths, workspace=workspace, home=home)
    return "\n\n".join(part for part in (body, *notes) if part), files


async def attachments(paths: tuple[str, ...], *, workspace: Path, home: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The notes of the refused or unreadable files, and the others as JSON objects."""
    notes: list[str] = []
    files: list[dict[str, Any]] = []
    for path in paths:
        item = await read_attachment(path, workspace=workspace, home=home)
        if isinstance(item, Attachment):
            files.append(
                {
                    "name": item.name,
                    "kind": item.kind,
                    "mime": mimetypes.guess_type(item.name)[0] or "application/octet-stream",
                    "size": len(item.data),
                    "data_base64": base64.b64encode(item.data).decode(),
                }
            )
        else:
            notes.append(item)
    return notes, files
