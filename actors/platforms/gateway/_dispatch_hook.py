"""``pre_gateway_dispatch``: the plugin (and shell) hooks asked about each new inbound message,
before access, pairing and dispatch. Their first action dict decides (``_decide.dispatch_verdict``):
skip the message (it is still marked seen: never delivered again), rewrite its text, or allow it.
A hook that fails or misses its deadline is skipped by the dispatcher: the message is allowed.

A plugin's callback gets ``event`` (``.text``, ``.source.platform|chat_type|chat_id|user_id|
user_name|thread_id``, ``.message_id``, ``.internal``), ``gateway`` and ``session_store``
(None here: this build has no such objects to hand out), and the plain fields as keywords.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from actors.hooks._decide import DispatchVerdict, dispatch_verdict
from protocols import PlatformMessage

from ._session_key import key_of

log = logging.getLogger(__name__)

HOOK = "pre_gateway_dispatch"


@dataclasses.dataclass(frozen=True)
class Source:
    platform: str
    chat_type: str
    chat_id: str
    user_id: str
    user_name: str
    thread_id: str


@dataclasses.dataclass(frozen=True)
class MessageEvent:
    text: str
    source: Source
    message_id: str
    session_key: str
    internal: bool = False


def event_of(message: PlatformMessage) -> MessageEvent:
    source = Source(message.platform, message.chat_type, message.chat_id, message.user_id, message.user_name, message.thread_id)
    return MessageEvent(text=message.text, source=source, message_id=message.message_id, session_key=key_of(message))


async def screen(hooks: Any, messages: list[PlatformMessage]) -> list[DispatchVerdict]:
    """Each message's verdict, in order (one call per message; the dispatcher bounds each)."""
    verdicts: list[DispatchVerdict] = []
    for message in messages:
        kwargs = {
            "event": event_of(message),
            "gateway": None,
            "session_store": None,
            "text": message.text,
            "platform": message.platform,
            "chat_id": message.chat_id,
            "user_id": message.user_id,
            "session_key": key_of(message),
        }
        try:
            answers = await hooks.call(HOOK, kwargs, session_id=key_of(message))
        except Exception:  # the dispatcher answers every failure itself: only a bug lands here
            log.exception("%s failed; the message is dispatched as it came", HOOK)
            answers = []
        verdicts.append(dispatch_verdict(answers))
    return verdicts
