"""Session ownership decisions (pure): who may hold a session's lease, and which writes pass.

A lease is one row per session: the owner node, an epoch and an expiry on the store's clock.
The epoch counts tenancies: it rises by one each time the lease passes to a holder that did
not hold it live (another node after expiry or release, or the same node after it let it
lapse), and it stays the same while the holder renews in time. A write fenced with
``(node, epoch)`` passes only while that is the session's lease and it is live, so once a
lease lapses, nothing its old holder sends can land, whatever that node believes.

Invariant: for one session, at most one ``(node, epoch)`` is live at any instant of the
store's clock, and epochs only grow.

The row functions (``_lease_rows``) read the row under the write lock, call these, and write
what they decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols._leases import Fence, LeaseRecord


@dataclass(frozen=True)
class Refusal:
    """A lease command turned down: the lease as it stands, and why."""

    current: LeaseRecord | None
    reason: str


def is_live(lease: LeaseRecord | None, now: float) -> bool:
    return lease is not None and lease.expires_at > now


def decide_acquire(current: LeaseRecord | None, session_id: str, node_id: str, now: float, ttl: float, *, holder_dead: bool = False) -> LeaseRecord | Refusal:
    """The lease after ``node_id`` asks for the session at ``now``, or why not.

    ``holder_dead``: the live lease's holder stopped beating (a takeover); its lease is treated
    as lapsed, so the asker gets epoch + 1 and every write of the old holder is fenced.
    """
    if not node_id:
        return Refusal(current, "a lease needs a node id; set cluster.node_id")
    if not ttl > 0:
        return Refusal(current, f"a lease's ttl is a positive number of seconds, not {ttl!r}")
    if current is not None and is_live(current, now) and not (holder_dead and current.node_id != node_id):
        if current.node_id == node_id:
            return LeaseRecord(session_id=session_id, node_id=node_id, epoch=current.epoch, expires_at=now + ttl)
        return Refusal(
            current,
            f"session {session_id!r} is owned by node {current.node_id!r} (epoch {current.epoch}) for {current.expires_at - now:.1f} s more; "
            "send the request to that node, or wait for its lease to lapse",
        )
    epoch = 1 if current is None else current.epoch + 1
    return LeaseRecord(session_id=session_id, node_id=node_id, epoch=epoch, expires_at=now + ttl)


def decide_renew(current: LeaseRecord | None, session_id: str, node_id: str, epoch: int, now: float, ttl: float) -> LeaseRecord | Refusal:
    """The renewed lease, or why ``node_id`` no longer holds the session at ``epoch``."""
    why = _why_not_holder(current, session_id, Fence(node_id=node_id, epoch=epoch), now)
    if why is not None:
        return Refusal(current, why + "; acquire the lease again and reload the session")
    if not ttl > 0:
        return Refusal(current, f"a lease's ttl is a positive number of seconds, not {ttl!r}")
    return LeaseRecord(session_id=session_id, node_id=node_id, epoch=epoch, expires_at=now + ttl)


def decide_release(current: LeaseRecord | None, node_id: str, epoch: int, now: float) -> LeaseRecord | None:
    """The lease ended now (epoch kept), or None when it is not ``node_id``'s at ``epoch`` (nothing to do)."""
    if current is None or current.node_id != node_id or current.epoch != epoch or not is_live(current, now):
        return None
    return LeaseRecord(session_id=current.session_id, node_id=node_id, epoch=epoch, expires_at=now)


def check_fence(current: LeaseRecord | None, session_id: str, fence: Fence, now: float) -> str | None:
    """None when a write fenced with ``fence`` may land at ``now``; else what happened, in a sentence."""
    why = _why_not_holder(current, session_id, fence, now)
    if why is None:
        return None
    return why + "; this node no longer owns the session: stop writing it and let its owner serve it"


def _why_not_holder(current: LeaseRecord | None, session_id: str, fence: Fence, now: float) -> str | None:
    mine = f"node {fence.node_id!r} at epoch {fence.epoch}"
    if current is None:
        return f"session {session_id!r} has no lease, so {mine} holds none"
    if current.node_id != fence.node_id or current.epoch != fence.epoch:
        return f"session {session_id!r} is leased to node {current.node_id!r} at epoch {current.epoch}, not to {mine}"
    if not is_live(current, now):
        return f"the lease of {mine} on session {session_id!r} ended {now - current.expires_at:.1f} s ago"
    return None
