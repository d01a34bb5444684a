"""This process as a node of a cluster sharing one store (``cluster:`` in config.yaml; off by default).

With a :class:`NodeIdentity` in ``SessionDeps.node``, a session actor holds its session's lease in
the store (``protocols._leases.AcquireLease``) from before it loads until it passivates, renews it
every third of its ttl, and fences every write with ``(node_id, epoch)``: once another node has
taken the session over, nothing this one sends lands (``actors.store._lease``). Without one
(the default, one ``hermes serve``), sessions send no lease command and no fence.
"""

from __future__ import annotations

import dataclasses
import socket

from actors import HermesError
from actors.store._pg import IDLE_IN_TRANSACTION_TIMEOUT

DEFAULT_LEASE_TTL = 30.0


class LeaseLapsed(HermesError):
    """A session's lease may have lapsed (this node was paused past it): it starts no model call."""


@dataclasses.dataclass(frozen=True)
class NodeIdentity:
    """Who this process is among the nodes sharing a store, and how long its leases last."""

    node_id: str
    lease_ttl: float = DEFAULT_LEASE_TTL
    """Seconds of the store's clock a session lease lasts unless renewed."""
    worker: bool = False
    """A ``hermes serve --workers`` worker: it runs under its parent's claim of the store
    (``actors.store._owner``) and claims nothing itself (``actors.platforms._worker_role``)."""

    @property
    def renew_every(self) -> float:
        """A lease is renewed at a third of its ttl: two renewals may be lost before it lapses."""
        return self.lease_ttl / 3

    @property
    def lock_hold(self) -> float:
        """Seconds the store server lets this node's writer sit idle inside a transaction (a
        stopped process) before it ends it and frees its row locks: at most a third of the
        ttl. Longer, another node's writer waits on those locks past its own renewals, and
        loses leases it holds while this node is stopped (three nodes with a 3 s ttl did)."""
        return min(IDLE_IN_TRANSACTION_TIMEOUT, self.lease_ttl / 3)

    @classmethod
    def configured(cls, node_id: str, lease_ttl: float) -> NodeIdentity:
        """The identity from ``cluster.node_id`` (empty: this host's name) and ``cluster.lease_ttl``."""
        return cls(node_id=node_id or socket.gethostname(), lease_ttl=lease_ttl)


def cluster_health(node: NodeIdentity | None) -> dict[str, object] | None:
    """``/health/detailed``'s ``cluster``: this node's id and lease ttl (None: not in cluster mode)."""
    if node is None:
        return None
    return {"node_id": node.node_id, "lease_ttl": node.lease_ttl, **({"worker": True} if node.worker else {})}
