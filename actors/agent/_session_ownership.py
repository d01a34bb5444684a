"""Cluster mode: a session actor's lease on its session, and the fence on its writes.

With a ``NodeIdentity`` in ``SessionDeps.node``, a session acquires its lease before it loads
(the grant, told after its commit, starts the load at once; a takeover of a dead holder settles what it
left open first), renews it every third of its ttl (``LeaseRenewDue``), fences every write,
stops without restart when the lease is refused or a write of it is fenced, and releases it when
it stops in order. :class:`SessionOwnership` executes that for one incarnation; the decisions are
in ``_ownership_core``. Without a node (one ``hermes serve``) it sends nothing and fences nothing.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

import msgspec

from actors.memory import system_prompt_blocks
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRefused, ReleaseLease, RenewLease
from protocols._store import GetStoreStatistics, StoreFailed

from ._loading import load_with_retry
from ._node import LeaseLapsed
from ._ownership_core import Lease, after_failed, granted, lapsed, lost_mid_turn, not_owner_failures, rejections, renews, to_release, write_fence
from ._sanitize import INTERRUPTED_RESULT
from ._session_port import StoreDiverged, Write
from ._session_timers import LeaseRenewDue

if TYPE_CHECKING:
    from ._session import SessionActor

log = logging.getLogger(__name__)

LeaseMessage = LeaseGranted | LeaseRefused | LeaseRenewDue


def start_load(actor: SessionActor) -> None:
    """Read the session from the store (every write the actor told the writer before now is committed)."""
    deps, recall = actor.deps, functools.partial(system_prompt_blocks, actor.registry, actor.deps.memory)
    actor.start_wait(
        load_with_retry, deps.open_reader, actor.session_id, deps.home, deps.workdir, deps.tool_settings.memory, recall, tag="load", timeout=deps.load_timeout
    )


class SessionOwnership:
    """One incarnation's lease: asked, granted, renewed, lost, released."""

    def __init__(self, actor: SessionActor) -> None:
        self.actor = actor
        self.node = actor.deps.node
        self.lease = Lease()

    def start(self) -> None:
        """Ask for the lease (cluster mode) or, without one, start the load at once: either way,
        after the writer has committed everything sent before now."""
        actor, node = self.actor, self.node
        if node is None:
            actor.store.tell(GetStoreStatistics(reply_to=actor.actor_ref))
            return
        # A takeover too: a holder that stopped beating loses the lease, and what it (or a
        # dead process of this node) left open is settled before this incarnation loads.
        acquire = AcquireLease(
            session_id=actor.session_id,
            node_id=node.node_id,
            ttl=node.lease_ttl,
            dead_after=node.lease_ttl,
            settle=INTERRUPTED_RESULT,
            token="lease",
            reply_to=actor.actor_ref,
        )
        self.lease = msgspec.structs.replace(self.lease, asked=time.monotonic())
        actor.store.tell(acquire)

    def receive(self, message: Any) -> bool:
        """Take a lease message (True), or leave it to the session (False)."""
        match message:
            case LeaseGranted() | LeaseRefused() | LeaseRenewDue():
                if self.node is not None:
                    self.on_lease(message)
            case StoreFailed(token="lease") if self.node is not None:
                self.lease_failed(message)
            case StoreFailed(fenced=Fence()) if self.node is not None:
                try:
                    self.actor.host.receive(message)  # the turn fails as for any refused write; then this node lets go
                except StoreDiverged:
                    pass  # no reload: the session is another node's now
                self.lost(f"a write was refused: {message.error}")
            case _:
                return False
        return True

    def on_lease(self, message: LeaseMessage) -> None:
        actor, node = self.actor, self.node
        assert node is not None
        match message:
            case LeaseGranted(epoch=epoch):
                first = self.lease.fence is None
                self.lease = granted(self.lease, node.node_id, epoch, node.lease_ttl)
                actor.send_after(node.renew_every, LeaseRenewDue())
                if first and actor.host.state is None:
                    # The grant is told after the commit of the batch holding the acquire, and
                    # the writer takes commands in order: whatever this session (or a crashed
                    # incarnation of it) told it before the acquire is committed too. Load now:
                    # a barrier through the writer's queue here waited behind every write queued
                    # there (200 takeovers at once: seconds).
                    start_load(actor)
            case LeaseRefused(reason=reason):
                for rejected in rejections(actor.session_id, actor.host.stash, message.owner, message.expires_at, time.time(), node.lease_ttl):
                    actor.publish(rejected)
                self.lost(reason)
            case LeaseRenewDue() if renews(self.lease):
                fence = self.lease.fence
                assert fence is not None
                renew = RenewLease(
                    session_id=actor.session_id, node_id=node.node_id, epoch=fence.epoch, ttl=node.lease_ttl, token="lease", reply_to=actor.actor_ref
                )
                self.lease = msgspec.structs.replace(self.lease, asked=time.monotonic())
                actor.store.tell(renew)
            case LeaseRenewDue():
                pass

    def lease_failed(self, failed: StoreFailed) -> None:
        """The store could not answer an acquire or a renewal (its lock timeout: a stopped node's
        open transaction holds the lease row; or a broken connection). Neither granted nor refused:
        an acquire fails the turns waiting for the load at once (503, retry) and this incarnation
        stops, so no request waits on a lease that may never come; a renewal is sent again soon
        (while it fails, ``Lease.until`` stops model calls and the fence refuses late writes)."""
        assert self.node is not None
        match after_failed(self.lease):
            case "give_up":
                self.lost(f"the store did not answer its lease request: {failed.error}")
            case "retry":
                log.warning("session %s: renewing its lease failed, trying again: %s", self.actor.session_id, failed.error)
                self.actor.send_after(self.node.renew_every / 4, LeaseRenewDue())
            case "ignore":
                pass

    def lost(self, why: str) -> None:
        """This node does not (or no longer) own the session: stop, without restart (a later message starts it again)."""
        actor, host = self.actor, self.actor.host
        log.warning("session %s: not owned by node %s: %s", actor.session_id, self.node.node_id if self.node else "", why)
        self.lease = msgspec.structs.replace(self.lease, lost=True)  # the fence stays: whatever this incarnation still writes is refused
        open_turns = (turn_id for turn_id, _ in actor.open_turns.snapshot())
        for failed in not_owner_failures(actor.session_id, why, host.state, host.alive, host.stash, open_turns):
            actor.hub.publish(failed)
        if host.alive:  # its running and queued turns fail (503, retry), none starts; their writes are refused
            host.stop_turn(lost_mid_turn(actor.session_id, why), failed="not_owner")
        if host.state is None:  # turns asked before the load: their callers heard it now (503, retry)
            host.stash.clear()
        actor.stop()

    def fenced(self, command: Write) -> Write:
        """A write as it goes to the store: in cluster mode, no write without the lease's fence."""
        if self.node is not None and hasattr(command, "fence"):
            return msgspec.structs.replace(command, fence=write_fence(self.lease, self.node.node_id))
        return command

    def check_model_call(self, session_id: str) -> None:
        """Raise ``LeaseLapsed`` when the lease may have lapsed (called as a model call starts)."""
        if lapsed(self.lease, time.monotonic()):
            raise LeaseLapsed(f"session {session_id}: this node's lease may have lapsed (its renewals stalled); no model call is made")

    def release(self) -> None:
        """An orderly stop: give the lease back (after the last writes: the writer answers in order)."""
        fence = to_release(self.lease)
        if fence is not None and self.node is not None:
            self.actor.store.tell(ReleaseLease(session_id=self.actor.session_id, node_id=fence.node_id, epoch=fence.epoch))
