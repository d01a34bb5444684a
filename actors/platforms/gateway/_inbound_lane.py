"""The inbound fast lane, pure: which messages of a poll's answer start a turn at once, decided
from the adapter's state when it starts the poll, so the poll's wait (in the reactor) tells their
``StartTurn`` itself: one thread hop from Telegram's answer to the session's ``TurnStarted``, not
two (reactor → adapter actor → session).

A message takes the lane only where the adapter's own decision is certain to be that same
``StartTurn`` in that same session: a fresh message (not in the seen log, the first of its chat
in the answer) of an allowed user, plain text (no command, no file), in a chat with no running
turn, no held burst and no ``/retry`` asked, whose session is not due for a reset; never with
the ``pre_gateway_dispatch`` hooks (they may skip or rewrite it) nor a burst window. Between the
poll's start and its answer nothing else decides a batch (one poll at a time, the next starts
after the batch is saved) and nothing else starts a turn in such a chat (a paired user, whose
turn starts after a read of the book, never takes the lane: the lane knows only the static
allowlist), so the snapshot holds; the adapter then adopts the lane's decision for these
messages (the same session, not told again).

Safety as for every early ``StartTurn`` (``_effects.py``): its turn id is the message's and the
session runs a turn id at most once, so a crash before the adapter's save only leaves the update
unconfirmed, and the restarted adapter follows the turn that ran.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from actors.platforms._slash_commands import parse
from protocols import PlatformMessage, StartTurn

from ._access import AccessPolicy, decide_access
from ._dedup import SeenLog
from ._resets import ChatSession, ResetPolicy, session_id_of, stale_reason
from ._session_key import key_of, turn_id_of


@dataclasses.dataclass(frozen=True)
class Laned:
    """A message's turn, told from the poll's wait: the adapter adopts it."""

    session_id: str
    generation: int
    start: StartTurn


@dataclasses.dataclass(frozen=True)
class Lane:
    """The adapter's state when it started a poll, as far as the lane needs it."""

    seen: SeenLog
    busy: frozenset[str]
    """Chat keys with a running turn, a held burst, or a ``/retry`` asked (its answer starts a turn)."""
    sessions: dict[str, ChatSession]
    policy: AccessPolicy
    resets: ResetPolicy
    tz: dt.tzinfo | None
    platform: str
    context_line: str


def instructions_for(message: PlatformMessage, platform: str, context_line: str) -> str:
    """Who asks, and where: the line a gateway turn's instructions hold."""
    where = "a direct message" if message.chat_type == "dm" else f"a {message.chat_type} chat"
    who = f" from {message.user_name}" if message.user_name else ""
    # How replies are shown here is the system prompt's line (the platform's deps); this is who asks.
    return " ".join(part for part in (f"You are answering {where}{who} on {platform}.", context_line) if part)


def laned(lane: Lane, messages: list[PlatformMessage], dedup_keys: list[str], now: float) -> dict[str, Laned]:
    """Turn id -> its lane decision, for the messages of one answer that take the lane
    (``dedup_keys``: the adapter's dedup key of each message)."""
    out: dict[str, Laned] = {}
    chats: set[str] = set()
    fresh = set(lane.seen.fresh(dedup_keys))
    for message, dedup in zip(messages, dedup_keys, strict=True):
        key = key_of(message)
        first = key not in chats
        chats.add(key)  # a chat's later messages in the answer wait for the adapter's decision
        if not first or key in lane.busy or dedup not in fresh or message.files or parse(message.text) is not None:
            continue
        if decide_access(message, lane.policy, ()) != "allow":
            continue
        current = lane.sessions.get(key)
        if current is not None and stale_reason(lane.resets, current.last_at, now, lane.tz) is not None:
            continue
        generation = current.generation if current is not None else 1
        turn_id = turn_id_of(message)
        start = StartTurn(text=message.text, turn_id=turn_id, policy="queue", instructions=instructions_for(message, lane.platform, lane.context_line))
        out[turn_id] = Laned(session_id=session_id_of(key, generation), generation=generation, start=start)
    return out
