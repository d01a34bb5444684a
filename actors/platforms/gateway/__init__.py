"""The messaging gateway: one adapter actor per enabled chat platform under ``/platforms``
(Telegram, webhooks), the pure decisions they execute (session keys, access and pairing,
inbound dedup, the busy policy, chunking, retries), and ``hermes pairing``."""

from __future__ import annotations

from ._access import AccessPolicy as AccessPolicy
from ._access import decide_access as decide_access
from ._adapter import GatewayAdapter as GatewayAdapter
from ._chats import Chats as Chats
from ._chunks import chunk_text as chunk_text
from ._dedup import SeenLog as SeenLog
from ._session_key import session_key as session_key
from ._settings import Gateway as Gateway
from ._settings import load_gateway as load_gateway
from ._telegram import TelegramAdapter as TelegramAdapter
from ._webhook import WebhookAdapter as WebhookAdapter

__all__ = [
    "AccessPolicy",
    "Chats",
    "Gateway",
    "GatewayAdapter",
    "SeenLog",
    "TelegramAdapter",
    "WebhookAdapter",
    "chunk_text",
    "decide_access",
    "load_gateway",
    "session_key",
]
