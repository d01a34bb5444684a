"""Messages of the hook plugins: a call handed to a plugin's actor, and its answer.

A plugin's actor (``actors.hooks``) runs the plugin's callbacks for one event and answers
``HookAnswered`` to ``reply_to``: the callbacks' return values in registration order, or
the first exception's text. In-process only (the keyword arguments are Python objects).
"""

from __future__ import annotations

from typing import Any

from ._base import Message


class InvokeHook(Message, frozen=True, kw_only=True):
    """Run every callback the plugin registered for ``event`` with ``kwargs``."""

    event: str
    kwargs: dict[str, Any]
    reply_to: Any
    """Told ``HookAnswered`` (from the plugin's thread)."""
    call: int = 0
    """The dispatcher's number for this call (answers of an abandoned call are recognised)."""


class HookAnswered(Message, frozen=True, kw_only=True):
    plugin: str
    call: int
    values: tuple[Any, ...] = ()
    """What each callback returned, in registration order."""
    error: str | None = None
    """The first callback exception (``Type: text``); the later callbacks did not run."""
    subscribed: bool = True
    """False: the plugin registered nothing for the event."""
