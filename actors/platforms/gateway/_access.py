"""Who reaches the agent, pure: allowlists, pairing, and the group rule.

A message is ``allow`` (it starts a turn), ``pair`` (its sender is unknown: the adapter hands
out a one-time pairing code, and the agent never sees the message) or ``ignore`` (a group
message that does not address the bot, or an unknown user's message in a group).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Literal

from protocols import PlatformMessage

Access = Literal["allow", "pair", "ignore"]


@dataclasses.dataclass(frozen=True)
class AccessPolicy:
    """One platform's rule: its allowlist, and whether groups need a mention."""

    allowed: frozenset[str] = frozenset()
    """User ids that may talk to the agent (``TELEGRAM_ALLOWED_USERS``, ``extra.allowed_users``)."""
    allow_all: bool = False
    """Everybody may (``GATEWAY_ALLOW_ALL_USERS``, or a webhook, whose signature is its authorisation)."""
    require_mention: bool = True
    """In groups, answer only a message that mentions the bot or replies to it."""


def addressed(message: PlatformMessage, policy: AccessPolicy) -> bool:
    """Whether the message is for the bot: always in a DM, in a group only when mentioned or replied to."""
    if message.chat_type in ("dm", "route") or not policy.require_mention:
        return True
    return message.mentioned or message.reply_to_bot


def decide_access(message: PlatformMessage, policy: AccessPolicy, paired: Collection[str]) -> Access:
    """What to do with ``message`` given the allowlist and the users approved by pairing."""
    if not addressed(message, policy):
        return "ignore"
    if policy.allow_all or message.user_id in policy.allowed or message.user_id in paired:
        return "allow"
    return "pair" if message.chat_type == "dm" else "ignore"
