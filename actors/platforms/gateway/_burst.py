"""Inbound batching, pure: a burst of messages from one chat becomes one turn.

People type a thought as several short messages. A message to the agent waits ``window``
seconds (0.8 by default); each further message of the same chat within the window joins it
and waits again, up to ``MAX_HOLD`` windows after the first. Then the burst goes as one
message: the texts joined by a line break, the ids (reply target, turn id) of the last.
"""

from __future__ import annotations

import dataclasses

import msgspec

from protocols import PlatformMessage

WINDOW = 0.8
MAX_HOLD = 5
"""A burst is held at most this many windows after its first message."""


@dataclasses.dataclass(frozen=True)
class Burst:
    messages: tuple[PlatformMessage, ...]
    first_at: float
    due: float


def add(bursts: dict[str, Burst], key: str, message: PlatformMessage, now: float, window: float) -> dict[str, Burst]:
    """``bursts`` with ``message`` held in its chat's burst (a new one or a longer one)."""
    held = bursts.get(key)
    if held is None:
        return {**bursts, key: Burst(messages=(message,), first_at=now, due=now + window)}
    due = min(now + window, held.first_at + window * MAX_HOLD)
    return {**bursts, key: Burst(messages=(*held.messages, message), first_at=held.first_at, due=due)}


def take_due(bursts: dict[str, Burst], now: float) -> tuple[dict[str, Burst], list[tuple[str, PlatformMessage]]]:
    """The bursts due at ``now``, each as one message, and what is still held."""
    ready = [(key, joined(burst.messages)) for key, burst in bursts.items() if burst.due <= now]
    return {key: burst for key, burst in bursts.items() if burst.due > now}, ready


def take(bursts: dict[str, Burst], key: str) -> tuple[dict[str, Burst], PlatformMessage | None]:
    """Take ``key``'s burst now (a command of the chat comes after it), or None."""
    held = bursts.get(key)
    if held is None:
        return bursts, None
    return {k: b for k, b in bursts.items() if k != key}, joined(held.messages)


def next_due(bursts: dict[str, Burst]) -> float | None:
    return min((b.due for b in bursts.values()), default=None)


def joined(messages: tuple[PlatformMessage, ...]) -> PlatformMessage:
    """One message for a burst: the texts joined by a line break, the last message's ids."""
    last = messages[-1]
    if len(messages) == 1:
        return last
    return msgspec.structs.replace(last, text="\n".join(m.text for m in messages if m.text))
