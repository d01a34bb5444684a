"""The cluster router's store reads: a burst of requests shares a few kept connections.

A real Postgres server and the router of a cluster node: 60 requests' routing reads at once
(as a node taking a dead node's sessions over gets them) are each answered on at most
``READERS`` connections opened, which stay open for the next burst until the pool is closed
(the runtime's stop).
"""

from __future__ import annotations

import trio

from actors.agent._locate import Local
from actors.agent._node import NodeIdentity
from actors.platforms._cluster import READERS, ClusterRouter
from protocols._store import GetStoreStatistics
from tests.postgres_server import PostgresServer
from tests.store_conformance.test_reader_pool import backends, exited
from tests.store_kit import StartRuntime, start_store


def test_a_burst_of_routing_reads_shares_a_few_kept_connections(start_runtime: StartRuntime, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    _, store = start_store(start_runtime, url)
    store.ask(GetStoreStatistics())  # the writer has made the tables
    writer = backends(url)
    router = ClusterRouter(node=NodeIdentity(node_id="node-a", lease_ttl=3.0), secret=b"x" * 32, store_file=url)

    async def burst() -> list[object]:
        found: list[object] = []

        async def one(n: int) -> None:
            found.append(await router._read(("session", f"s{n}")))

        async with trio.open_nursery() as requests:
            for n in range(60):
                requests.start_soon(one, n)
        return found

    try:
        found = trio.run(burst)
        assert len(found) == 60 and all(f is not None and isinstance(f.location, Local) for f in found)  # type: ignore[attr-defined]
        assert 1 <= router.readers.opened <= READERS, router.readers.opened  # 60 reads, a few connections
        kept = backends(url) - writer
        assert len(kept) == router.readers.opened  # kept for the next burst
    finally:
        router.readers.close()
    exited(kept)
    assert backends(url) == writer
