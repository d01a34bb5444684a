"""Messages of the hook plugins' actors (``actors.hooks``).

A plugin's calls never pass through its actor's mailbox: the dispatcher puts them on the
actor's lane (a thread of the actor's own). The mailbox takes what changes the lane:
``ReloadPlugin`` after a fault (the callback raised, hung or flooded).
"""

from __future__ import annotations

from typing import Any

from ._base import Message


class ReloadPlugin(Message, frozen=True, kw_only=True):
    """Import the plugin afresh and serve its calls from ``lane`` (the old lane is closed, or abandoned if stuck)."""

    lane: Any
    """The ``actors.hooks._lane.Lane`` the dispatcher already queues the plugin's next calls on."""
    generation: int
