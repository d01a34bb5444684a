"""Which session a chat's messages go to: ``agent:main:<platform>:<chat_type>:<chat_id>[:<thread_id>]``."""

from __future__ import annotations

from protocols import PlatformMessage


def session_key(platform: str, chat_type: str, chat_id: str, thread_id: str = "") -> str:
    """The session id of one chat (one thread of it, when the platform has threads)."""
    key = f"agent:main:{platform}:{chat_type}:{chat_id}"
    return f"{key}:{thread_id}" if thread_id else key


def key_of(message: PlatformMessage) -> str:
    return session_key(message.platform, message.chat_type, message.chat_id, message.thread_id)


def turn_id_of(message: PlatformMessage) -> str:
    """The turn a message starts: derived from the platform's message id, so a message delivered
    twice is one turn id (the session runs a turn id at most once)."""
    return f"gw-{message.platform}-{message.chat_id}-{message.message_id}"
