"""The messaging gateway's vocabulary: what an adapter hears from a chat platform, what it
is told by the gateway's own waits, and the status it reports.

An adapter actor (``/platforms/<name>``) turns a platform's updates into
:class:`PlatformMessage` records, and answers :class:`AdapterStatusRequest` with
:class:`AdapterStatus` (``/health/detailed`` shows each adapter).
"""

from __future__ import annotations

from typing import Any, Literal

from ._base import Message

ChatType = Literal["dm", "group", "channel", "route"]
"""``route``: a webhook route (each delivery is a conversation of its own)."""

AdapterState = Literal["starting", "running", "backoff", "unauthorized", "stopped"]


class PlatformFile(Message, frozen=True, kw_only=True):
    """A file that came with an inbound message (a photo, a document), not yet downloaded."""

    kind: Literal["image", "file"]
    file_id: str
    """The platform's handle to fetch it (Telegram: ``getFile``)."""
    name: str = ""
    size: int = 0
    """Bytes, as the platform announced them (0: not said)."""
    mime: str = ""


class PlatformMessage(Message, frozen=True, kw_only=True):
    """One inbound message from a chat platform, in the gateway's terms."""

    platform: str
    chat_type: ChatType
    chat_id: str
    thread_id: str = ""
    user_id: str
    user_name: str = ""
    message_id: str
    """The platform's id for this message: the key of inbound dedup (unique per platform)."""
    text: str
    mentioned: bool = False
    """The bot was @mentioned (groups answer only when mentioned or replied to)."""
    reply_to_bot: bool = False
    """The message replies to one of the bot's messages."""
    files: tuple[PlatformFile, ...] = ()
    """Photos and documents sent with the message (``text`` is then their caption, maybe empty)."""


class AdapterStatusRequest(Message, frozen=True, kw_only=True):
    """Ask an adapter for its :class:`AdapterStatus` (told to ``reply_to``)."""

    reply_to: Any = None
    """Local-only: anything with ``tell``."""


class AdapterStatus(Message, frozen=True, kw_only=True):
    """An adapter as ``/health/detailed`` shows it (never a secret)."""

    platform: str
    state: AdapterState
    detail: str = ""
    """Why it is in that state (the last error, the next retry)."""
    received: int = 0
    answered: int = 0
    duplicates: int = 0
    """Messages dropped because their id had been seen (also before a restart)."""
    refused: int = 0
    """Messages from users not allowed (pairing codes sent count here too)."""
    send_retries: int = 0
    """Outbound calls retried after a 429, a 5xx or a transport error."""
    chats: int = 0
    """Chats with a turn running or queued."""


class AdapterTimer(Message, frozen=True, kw_only=True):
    """An adapter's own timer: poll again, retry a start (after a backoff)."""

    what: str


class StreamOpened(Message, frozen=True, kw_only=True):
    """A turn's answer is streamed into the platform message ``message_id`` (told by the turn's
    wait when the first piece was sent): the adapter saves it, so the final reply edits that
    message, also after a restart."""

    turn_id: str
    message_id: str
