"""Cluster mode: a session incarnation's hold on its session's lease, as pure decisions.

A session in cluster mode (``SessionDeps.node``) owns its session through a lease in the store:
asked for before the load, renewed every third of its ttl, carried as a fence by every write,
released when it stops in order. What it holds is a :class:`Lease`; what it does when the store
grants, refuses or cannot answer, which turns hear that this node does not own the session, and
which fence a write carries are decided here. No I/O, no clock: ``_session_ownership`` executes it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec

from protocols._leases import Fence
from protocols._session import CompressContext, StartTurn, TurnFailed, TurnRejected

from ._machine import SessionState


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """What one incarnation holds of its session's lease."""

    fence: Fence | None = None
    """The granted lease, carried by each write (None: not granted yet)."""
    lost: bool = False
    """The lease was refused or a write fenced: this incarnation is stopping."""
    asked: float = 0.0
    """This process's monotonic clock when the last acquire or renewal was sent."""
    until: float = math.inf
    """The lease is surely held until then (monotonic): the store granted it no earlier than it
    was asked. Past it (this process was paused, its renewals stalled), no model call starts:
    the session may be another node's by now (``LeaseLapsed``)."""


def granted(lease: Lease, node_id: str, epoch: int, ttl: float) -> Lease:
    """The lease after a grant: fenced with its epoch, held until a ttl after it was asked."""
    return msgspec.structs.replace(lease, fence=Fence(node_id=node_id, epoch=epoch), until=lease.asked + ttl)


def renews(lease: Lease) -> bool:
    """Whether a due renewal is sent: only for a granted lease not lost."""
    return lease.fence is not None and not lease.lost


FailedLease = Literal["ignore", "give_up", "retry"]


def after_failed(lease: Lease) -> FailedLease:
    """What a lease statement the store could not answer leads to: nothing once lost; giving up
    for an acquire (no request waits on a lease that may never come); another try for a renewal."""
    if lease.lost:
        return "ignore"
    return "give_up" if lease.fence is None else "retry"


def write_fence(lease: Lease, node_id: str) -> Fence:
    """The fence a write carries: the lease's, or epoch 0 (refused by the store) before any grant."""
    return lease.fence or Fence(node_id=node_id, epoch=0)


def lapsed(lease: Lease, now: float) -> bool:
    """Whether the lease may have lapsed at monotonic ``now`` (no model call starts then)."""
    return now > lease.until


def to_release(lease: Lease) -> Fence | None:
    """The lease an orderly stop releases (None: none granted, or lost)."""
    return lease.fence if not lease.lost else None


def rejections(session_id: str, stash: Sequence[Any], owner: str, expires_at: float, wall: float, ttl: float) -> list[TurnRejected]:
    """Each turn waiting for the load is refused, naming the node that holds the session, with
    the seconds after which asking again may find it free (a file store's clock is this machine's)."""
    wait = max(1.0, min(expires_at - wall, ttl))
    reason = f"session {session_id} is being answered by node {owner or 'another node'}; send it again in {wait:.0f} s"
    return [TurnRejected(turn_id=m.turn_id, reason=reason, owner=owner, retry_after=wait) for m in stash if isinstance(m, StartTurn) and m.turn_id]


def not_owner_failures(session_id: str, why: str, state: SessionState | None, alive: bool, stash: Sequence[Any], open_turns: Iterable[str]) -> list[TurnFailed]:
    """The turns that fail ``not_owner`` when this node does not (or no longer) own the session.

    Before the load: every turn asked, and every turn a crashed incarnation left open (the
    recovery that would answer them runs at a load, and none comes). After it: the running
    turn, when a refused write ended this incarnation (its machine takes no more input); a
    live one fails its running and queued turns through its machine instead.
    """
    if state is None:
        error = f"this node does not own session {session_id!r} ({why}); retry the request"
        asked = [m.turn_id for m in stash if isinstance(m, StartTurn | CompressContext) and m.turn_id]
        return [TurnFailed(turn_id=turn_id, error=error, kind="not_owner") for turn_id in dict.fromkeys([*open_turns, *asked])]
    if not alive and state.turn is not None:
        return [TurnFailed(turn_id=state.turn.turn_id, error=lost_mid_turn(session_id, why), kind="not_owner")]
    return []  # a live incarnation ends its turns through its machine (``Stop``)


def lost_mid_turn(session_id: str, why: str) -> str:
    """The error of a turn that was running (or queued) when this node lost its session."""
    return f"this node lost session {session_id!r} to another node mid-turn ({why}); nothing more of this turn is stored; send it again"
