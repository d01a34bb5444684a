"""A running node's heartbeat (cluster mode): ``/node`` beats in the store's ``nodes`` table.

Every third of the lease ttl it tells the store writer ``NodeHeartbeat(node_id, address)``
(the next beat is scheduled before the store answers, so a slow or restarting writer delays
nothing) and, once the beat is stored, reads the nodes table back (in a thread) for
``/health/detailed``'s ``cluster``: the live nodes this one sees. Other nodes find this one's
sessions' owner address there (``_locate``); a node stops being live a lease ttl after its last
beat, and its sessions are then taken over by whichever node gets their next request.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Literal

import trio

from actors import Actor
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_nodes, store_now
from actors.store._writer import store_address
from protocols import WaitFinished
from protocols._leases import NodeHeartbeat, NodeRecord, NodeSeen
from protocols._store import StoreFailed

from ._locate import live_nodes
from ._node import NodeIdentity

log = logging.getLogger(__name__)

NODE_PATH = "/node"
READ_TIMEOUT = 10.0
"""Seconds reading the nodes table may take before this beat's view is given up."""


@dataclasses.dataclass
class ClusterView:
    """What this node knows of the cluster, for ``/health/detailed``; written by ``/node`` only."""

    node: NodeIdentity
    address: str
    """This node's internal base URL, as advertised in ``nodes``."""
    store_file: str
    last_beat: float | None = None
    """The store's clock at this node's last stored heartbeat (None: none yet)."""
    error: str | None = None
    """Why the last beat or read failed (None: it did not)."""
    nodes: list[NodeRecord] = dataclasses.field(default_factory=list)
    """The live nodes at the last read, this one included."""
    read_at: float = 0.0

    def health(self) -> dict[str, Any]:
        return {
            "node_id": self.node.node_id,
            "lease_ttl": self.node.lease_ttl,
            **({"worker": True} if self.node.worker else {}),
            "address": self.address,
            "last_heartbeat": self.last_beat,
            "error": self.error,
            "live_nodes": [
                {"node_id": n.node_id, "address": n.address, "seconds_since_heartbeat": round(self.read_at - n.heartbeat_at, 3)} for n in self.nodes
            ],
        }


NodeBeatsInbox = Literal["beat"] | NodeSeen | StoreFailed | WaitFinished


def _read_live(store_file: str, ttl: float) -> tuple[float, list[NodeRecord]]:
    db = open_store_reader(store_file)
    try:
        now = store_now(db)
        return now, live_nodes({n.node_id: n for n in read_nodes(db)}, now, ttl)
    finally:
        db.close()


async def read_live(store_file: str, ttl: float) -> tuple[float, list[NodeRecord]]:
    return await trio.to_thread.run_sync(_read_live, store_file, ttl)


class NodeBeats(Actor[NodeBeatsInbox]):
    """Keeps this node's row in ``nodes`` fresh and ``view`` current."""

    def __init__(self, view: ClusterView, store_path: str = "/store") -> None:
        super().__init__()
        self.view = view
        self.store_path = store_path

    def started(self) -> None:
        self.store = store_address(self._context().registry, self.store_path)
        self.beat()

    def beat(self) -> None:
        node = self.view.node
        self.send_after(node.renew_every, "beat")
        self.store.tell(NodeHeartbeat(node_id=node.node_id, address=self.view.address, reply_to=self.actor_ref))

    def receive(self, message: NodeBeatsInbox) -> Any:
        match message:
            case "beat":
                self.beat()
            case NodeSeen(heartbeat_at=at):
                self.view.last_beat, self.view.error = at, None
                self.start_wait(read_live, self.view.store_file, self.view.node.lease_ttl, tag="nodes", timeout=READ_TIMEOUT)
            case StoreFailed(error=error):
                log.warning("node %s: its heartbeat was not stored: %s", self.view.node.node_id, error)
                self.view.error = error
            case WaitFinished(tag="nodes", status="ok", value=(now, nodes)):
                self.view.read_at, self.view.nodes = now, nodes
            case WaitFinished(tag="nodes", error=error):
                self.view.error = f"could not read the nodes table: {error}"
            case _:
                return super().receive(message)
        return None
