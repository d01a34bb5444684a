"""Where a request for a session is served, in cluster mode (pure).

From the session's lease row and the nodes table, as read from the store at one instant of the
store's clock, a node receiving a request for a session decides:

- :class:`Local` — serve it here: the session has no lease, the lease is this node's, or its
  lease ended while its holder is still alive (released at passivation, or let lapse); the
  local session actor acquires the lease (epoch + 1 when it was not live).
- :class:`Forward` — another live node holds the live lease: send the request there.
- :class:`TakeOver` — the lease's holder is not live (no heartbeat within a lease ttl): serve it
  here; the local session actor acquires the lease with epoch + 1 (``AcquireLease.dead_after``
  lets it take a lease that is still live from a node that stopped beating) and the store
  settles what the dead node left open in the same transaction.
- :class:`Unavailable` — a live node holds it but gave no address to reach it, or a node that
  sends no heartbeat (``hermes chat``) holds it live: retry later.

A node is live while its last heartbeat is younger than the lease ttl (it beats every third).

:func:`forward_until` gives the instant a forward stops being the right route unless the store
says otherwise by then: the owner's lease ends or its heartbeat becomes a ttl old (a stopped
owner still accepts connections, and would hold the request for ever).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from protocols._leases import LeaseRecord, NodeRecord


@dataclasses.dataclass(frozen=True)
class Local:
    reason: str


@dataclasses.dataclass(frozen=True)
class Forward:
    node_id: str
    address: str
    """The owner's internal base URL (``http://host:port``)."""


@dataclasses.dataclass(frozen=True)
class TakeOver:
    previous: str
    """The node that held the session and is gone."""
    epoch: int
    """The epoch it held: the takeover's is higher."""


@dataclasses.dataclass(frozen=True)
class Unavailable:
    reason: str
    retry_after: float


Location = Local | Forward | TakeOver | Unavailable


def node_is_live(node: NodeRecord | None, now: float, ttl: float) -> bool:
    """A node is live while its last heartbeat is younger than ``ttl`` seconds of the store's clock."""
    return node is not None and now - node.heartbeat_at < ttl


def live_nodes(nodes: Mapping[str, NodeRecord], now: float, ttl: float) -> list[NodeRecord]:
    """The live ones of ``nodes``, by node id."""
    return sorted((n for n in nodes.values() if node_is_live(n, now, ttl)), key=lambda n: n.node_id)


def locate(lease: LeaseRecord | None, nodes: Mapping[str, NodeRecord], me: str, now: float, ttl: float) -> Location:
    """Where node ``me`` should serve a request for the session whose lease is ``lease``."""
    if lease is None:
        return Local("the session has no lease")
    if lease.node_id == me:
        return Local("this node holds the lease" if lease.expires_at > now else "this node held the lease")
    owner, lapsed = nodes.get(lease.node_id), lease.expires_at <= now
    if owner is None:  # it never beat (not a serving node): only its lease's end frees the session
        if lapsed:
            return Local(f"node {lease.node_id!r} let the lease go")
        return Unavailable(f"node {lease.node_id!r} holds the session and sends no heartbeat; retry once its lease ends", lease.expires_at - now)
    if not node_is_live(owner, now, ttl):
        return TakeOver(previous=lease.node_id, epoch=lease.epoch)
    if lapsed:
        return Local(f"node {lease.node_id!r} let the lease go")
    if not owner.address:
        return Unavailable(f"node {lease.node_id!r} owns the session but advertises no address; set cluster.advertise_address there", lease.expires_at - now)
    return Forward(node_id=owner.node_id, address=owner.address)


def forward_until(lease: LeaseRecord, owner: NodeRecord, ttl: float) -> float:
    """The store-clock instant a request forwarded to ``owner`` (which holds ``lease`` live and
    is live) is to be routed again: its lease's end or its heartbeat a ttl old, the earlier.
    A live owner renews and beats before then (every third of the ttl), so reading the store
    again then finds it still the owner; a stopped one is found gone at once."""
    return min(lease.expires_at, owner.heartbeat_at + ttl)


def retry_unreachable(reroute_in: float, ttl: float) -> int:
    """Retry-After (whole seconds, at least 1) for a request whose owner could not be reached
    ``reroute_in`` seconds before its ``forward_until``: until then no other node may take the
    session, so a retry sooner is refused again; at most a third of the ttl (a restarted owner
    has beaten again by then and serves it)."""
    return max(1, math.ceil(min(reroute_in, ttl / 3)))
