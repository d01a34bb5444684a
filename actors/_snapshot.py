"""The tree snapshot: read from the registry and the reactor, without messaging any actor."""

from __future__ import annotations

import collections

from protocols import NodeSnapshot, NodeState, TreeSnapshot

from ._address import Registry
from ._reactor import Reactor


def build_snapshot(registry: Registry, reactor: Reactor) -> TreeSnapshot:
    """Path, kind, state, incarnation, restarts, mailbox depth, uptime of every node, and reactor health."""
    items = registry.items()
    by_parent: dict[str, list[str]] = collections.defaultdict(list)
    for path, _ in items:
        if path != "/":
            by_parent[path.rsplit("/", 1)[0] or "/"].append(path)
    addresses = dict(items)

    def node(path: str) -> NodeSnapshot:
        address = addresses[path]
        stats = address.statistics()
        state: NodeState = address.phase or ("stopped" if stats.state == "closed" else stats.state)  # type: ignore[assignment]
        return NodeSnapshot(
            path=path,
            kind="supervisor" if address.kind == "supervisor" else "worker",
            state=state,
            incarnation=stats.incarnation,
            restarts=stats.restarts,
            mailbox=stats.mailbox,
            uptime_s=round(stats.uptime_s, 3),
            dropped=stats.dropped,
            children=tuple(node(p) for p in by_parent.get(path, ())),
        )

    if "/" in addresses:
        root = node("/")
    else:
        root = NodeSnapshot(path="/", kind="supervisor", state="stopped", incarnation=0, restarts=0, mailbox=0, uptime_s=0.0)
    health = reactor.statistics()
    return TreeSnapshot(
        root=root,
        reactor_lag_ms=round(health.lag_ms, 3),
        reactor_lag_max_ms=round(health.lag_max_ms, 3),
        reactor_waits=health.waits,
        reactor_faults=health.faults,
    )
