"""Which session a chat talks to, and when it gets a fresh one. Pure.

A chat (its key, ``agent:main:<platform>:<chat_type>:<chat_id>[:<thread_id>]``) talks to one
session at a time. Its first session's id is the key itself; after a reset (``/new``,
``/reset``, or the reset policy) the next is ``<key>#2``, then ``<key>#3``: the generation is
kept per chat in the adapter's state file, so a restart keeps talking to the same session.

The reset policy (config.yaml ``session_reset:``, Hermes's block; per platform
``platforms.<name>.extra.session_reset``):

- ``idle``: a message after ``idle_minutes`` without one starts a fresh session;
- ``daily``: a message after the day's ``at_hour`` (local time) when the chat's last message
  came before it starts a fresh session;
- ``both`` (Hermes's default): either; ``none``: never.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from actors.config._schema import SessionResetSection as ResetPolicy

__all__ = ["ChatSession", "ResetPolicy", "chat_key_of", "day_boundary", "session_id_of", "stale_reason"]


@dataclasses.dataclass(frozen=True)
class ChatSession:
    """One chat's current session: its generation and the time of its last message (0: none yet)."""

    generation: int = 1
    last_at: float = 0.0


def session_id_of(key: str, generation: int) -> str:
    """The session id of a chat's ``generation`` (the first is the key itself)."""
    return key if generation <= 1 else f"{key}#{generation}"


def chat_key_of(session_id: str) -> str:
    """The chat key a gateway session id belongs to."""
    return session_id.split("#", 1)[0]


def day_boundary(now: float, at_hour: int, tz: dt.tzinfo | None = None) -> float:
    """The most recent ``at_hour:00`` (in ``tz``, local time by default) at or before ``now``."""
    here = dt.datetime.fromtimestamp(now, tz=tz) if tz is not None else dt.datetime.fromtimestamp(now).astimezone()
    boundary = here.replace(hour=at_hour, minute=0, second=0, microsecond=0)
    if boundary > here:
        boundary -= dt.timedelta(days=1)
    return boundary.timestamp()


def stale_reason(policy: ResetPolicy, last_at: float, now: float, tz: dt.tzinfo | None = None) -> str | None:
    """Why a chat whose last message came at ``last_at`` gets a fresh session at ``now`` (None: it does not)."""
    if last_at <= 0 or policy.mode == "none":
        return None
    if policy.mode in ("idle", "both") and now - last_at >= policy.idle_minutes * 60:
        return f"idle for {policy.idle_minutes} minutes"
    if policy.mode in ("daily", "both") and last_at < day_boundary(now, policy.at_hour, tz) <= now:
        return f"the daily reset at {policy.at_hour:02d}:00"
    return None
