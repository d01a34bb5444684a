"""Files through a chat adapter (Telegram, Matrix), as coroutines of its waits (the decisions are
:mod:`._media`'s); the platform gives only its ``Fetch``.

- :func:`prepare_turn`: a message's photo becomes an image part of the turn (a data URL) when
  the model sees images, else a note; its document is saved in the workspace and named in
  the user's text. A file that cannot be fetched becomes a note: the turn always starts.
- :func:`read_attachment`: an answer's ``MEDIA:`` path, resolved and checked against the
  allowed roots, read, or the note that says why it is not attached.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import trio

from protocols import PlatformMessage, StartTurn

from ._media import INBOUND_LIMIT, NO_VISION_NOTE, Kind, as_kind, data_url, refusal, roots, saved_name, saved_note
from ._retry import CallFailed

log = logging.getLogger(__name__)

Fetch = Callable[[str, int], Awaitable[tuple[str, bytes]]]
"""``(file_id, limit) -> (file_path, bytes)``: the platform's download (Telegram ``getFile``, Matrix
the media repository); the path's suffix names an image's type."""


async def prepare_turn(fetch: Fetch, message: PlatformMessage, start: StartTurn, *, workspace: Path, vision: bool) -> StartTurn:
    lines: list[str] = [start.text] if start.text else []
    images: list[str] = list(start.images)
    for file in message.files:
        label = file.name or ("the photo" if file.kind == "image" else "the file")
        if file.kind == "image" and not vision:
            lines.append(NO_VISION_NOTE)
            continue
        if file.size > INBOUND_LIMIT:
            lines.append(f"[{label} was not downloaded: it is {file.size / 1e6:.1f} MB, over the {INBOUND_LIMIT // (1024 * 1024)} MB limit]")
            continue
        try:
            path, data = await fetch(file.file_id, INBOUND_LIMIT)
        except CallFailed as failure:
            lines.append(f"[{label} could not be downloaded: {failure}]")
            continue
        if file.kind == "image":
            images.append(data_url(data, path))
            continue
        target = workspace / "downloads" / saved_name(message.message_id, file.name or Path(path).name)
        try:
            await trio.to_thread.run_sync(_write, target, data)
        except OSError as exc:
            lines.append(f"[{label} could not be saved in the workspace: {exc.strerror or exc}]")
            continue
        lines.append(saved_note(target, len(data)))
    return msgspec.structs.replace(start, text="\n".join(lines) or "(an empty message)", images=tuple(images))


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.replace(target)


@dataclasses.dataclass(frozen=True)
class Attachment:
    kind: Kind
    name: str
    data: bytes


async def read_attachment(text_path: str, *, workspace: Path, home: Path) -> Attachment | str:
    """The file an answer's ``MEDIA:`` line names (relative paths from the workspace), or the note why it is not sent."""
    return await trio.to_thread.run_sync(_read, text_path, workspace, home)


def _read(text_path: str, workspace: Path, home: Path) -> Attachment | str:
    path = Path(text_path).expanduser()
    resolved = (workspace / path if not path.is_absolute() else path).resolve()
    allowed = tuple(r.resolve() for r in roots(workspace, home))
    try:
        size: int | None = resolved.stat().st_size if resolved.is_file() else None
    except OSError:
        size = None
    why = refusal(resolved, allowed, size)
    if why:
        log.info("gateway: %s (%s)", why, resolved)
        return why
    try:
        data = resolved.read_bytes()
    except OSError as exc:
        return f"{resolved.name} was not attached: it cannot be read ({exc.strerror or exc})"
    return Attachment(kind=as_kind(resolved, len(data)), name=resolved.name, data=data)
