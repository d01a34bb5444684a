"""The messaging gateway: one adapter actor per enabled chat platform under ``/platforms``
(Telegram, webhooks), the pure decisions they execute (session keys, access and pairing,
inbound dedup, the busy policy, chunking, retries), and ``hermes pairing``.

Names load on first use: ``hermes pairing`` reads the pairing book without importing the
adapters (hypercorn, httpx).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_LAZY = {
    "AccessPolicy": "._access",
    "Chats": "._chats",
    "Gateway": "._settings",
    "GatewayAdapter": "._adapter",
    "SeenLog": "._dedup",
    "TelegramAdapter": "._telegram",
    "WebhookAdapter": "._webhook",
    "chunk_text": "._chunks",
    "decide_access": "._access",
    "load_gateway": "._settings",
    "session_key": "._session_key",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


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
