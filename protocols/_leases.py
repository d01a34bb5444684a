"""Session ownership in the store (issue 22, part 2): leases with epochs, node heartbeats, and
the fence a session write carries so the store refuses a write of a lost lease.

Commands go to the store writer like every other store command (``_store.StoreCommand``
includes :data:`LeaseCommand`); the decisions are ``actors.store._lease``'s.
"""

from __future__ import annotations

from typing import Any

from ._base import Message
from ._correlation import Token


class Fence(Message, frozen=True, kw_only=True):
    """A session write's claim to ownership: the node that sends it and the lease epoch it holds.

    The store accepts a fenced write only while ``(node_id, epoch)`` is the session's lease and
    that lease is live by the store's clock; so a node that was paused or cut off past its
    lease, and whose session another node took over (epoch + 1), can never write it again.
    """

    node_id: str
    epoch: int


class AcquireLease(Message, frozen=True, kw_only=True):
    """Take (or keep) ownership of a session for ``ttl`` seconds of the store's clock.

    Answered with :class:`LeaseGranted` or :class:`LeaseRefused`: granted with the same epoch
    when ``node_id`` holds the live lease already (a renewal), with the epoch + 1 when the lease
    is free, expired or released (a new tenancy: whatever the last holder sent is fenced);
    refused, naming the live owner, when another node holds it.
    """

    session_id: str
    node_id: str
    ttl: float
    dead_after: float = 0.0
    """A takeover: when > 0, a live lease whose holder's last heartbeat (``nodes``) is this many
    seconds old or more is taken as if it had lapsed (epoch + 1); a holder that never beat is not."""
    settle: str = ""
    """When not empty, a grant also settles, in the same transaction, what a dead holder left
    open in the session (a session actor asks as it starts, before it loads: any turn still
    ``running`` is not its own): running turns fail (``interrupted``) and each unanswered tool
    call gets one result with this text."""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class RenewLease(Message, frozen=True, kw_only=True):
    """Extend a live lease this node holds at ``epoch`` to ``ttl`` seconds from the store's now.

    Answered with :class:`LeaseGranted` (same epoch) or :class:`LeaseRefused` (the lease
    expired, was released, or another node took it over: acquire again and reload)."""

    session_id: str
    node_id: str
    epoch: int
    ttl: float
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class ReleaseLease(Message, frozen=True, kw_only=True):
    """Give a session up (passivation): its lease ends now, the epoch stays, so the next
    holder's is higher. Answered with :class:`LeaseReleased` (``released`` False when the lease
    was not this node's at ``epoch`` any more: nothing changed)."""

    session_id: str
    node_id: str
    epoch: int
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


class NodeHeartbeat(Message, frozen=True, kw_only=True):
    """A node is alive at ``address`` (its internal URL): ``nodes.heartbeat_at`` = the store's now.
    Answered with :class:`NodeSeen`."""

    node_id: str
    address: str = ""
    token: Token | str = ""
    reply_to: Any = None
    """Local-only: where the reply is told (anything with ``.tell``); not encodable."""


LeaseCommand = AcquireLease | RenewLease | ReleaseLease | NodeHeartbeat
"""The store writer's ownership commands (cluster mode)."""


class LeaseGranted(Message, frozen=True, kw_only=True):
    """The lease is committed: ``node_id`` owns the session at ``epoch`` until ``expires_at``
    (the store's clock, Unix seconds). Fence the session's writes with ``(node_id, epoch)``."""

    session_id: str
    node_id: str
    epoch: int
    expires_at: float
    token: Token | str = ""


class LeaseRefused(Message, frozen=True, kw_only=True):
    """The lease was not granted; the session's lease is ``owner`` at ``epoch`` until ``expires_at``
    (``owner`` empty: no lease; ``expires_at`` past: expired or released)."""

    session_id: str
    node_id: str
    """The node that asked."""
    owner: str
    epoch: int
    expires_at: float
    reason: str
    """What happened and what to do, in a sentence."""
    token: Token | str = ""


class LeaseReleased(Message, frozen=True, kw_only=True):
    session_id: str
    node_id: str
    released: bool
    token: Token | str = ""


class NodeSeen(Message, frozen=True, kw_only=True):
    node_id: str
    heartbeat_at: float
    token: Token | str = ""


class LeaseRecord(Message, frozen=True, kw_only=True):
    """One row of ``leases``: who owns a session, at which epoch, until when (the store's clock)."""

    session_id: str
    node_id: str
    epoch: int
    expires_at: float


class NodeRecord(Message, frozen=True, kw_only=True):
    """One row of ``nodes``: a node, its internal address and its last heartbeat (the store's clock)."""

    node_id: str
    address: str
    heartbeat_at: float
