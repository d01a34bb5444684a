"""The messages a session host sends itself through ``port.after``: its timers."""

from __future__ import annotations

import msgspec

from protocols import Token

REFRESH_RETRY = 0.05
"""Seconds between two checks of a session waiting to passivate for new settings (its writes unanswered)."""


class TurnTimer(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    token: Token


class IdleTimer(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    generation: int


class AckCheck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Time to check that the store answered every write sent ``ack_timeout`` ago."""


class LeaseRenewDue(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Cluster mode: time to renew the session's lease (``_node``)."""


Timer = TurnTimer | IdleTimer | AckCheck | LeaseRenewDue
"""What a session sends itself (``port.after``)."""
