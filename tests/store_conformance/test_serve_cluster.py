"""``hermes serve`` in cluster mode (``cluster.enabled``) on Postgres: its sessions hold leases.

A real ``hermes serve`` subprocess on the session's Postgres server and the test model server:
the session's writes carry its lease, the lease is the configured node's while it serves, and
an orderly stop releases it (its epoch kept).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from actors.store import StoreReader
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from protocols._leases import LeaseRecord
from tests.conftest import DEADLINE
from tests.platforms.serve_process import serving
from tests.postgres_server import PostgresServer


def lease_of(url: str, session_id: str) -> LeaseRecord | None:
    db = open_store_reader(url)
    try:
        return read_lease(db, session_id)
    finally:
        db.close()


def test_hermes_serve_in_cluster_mode_holds_its_sessions_leases_and_releases_them_at_stop(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(seed=5) as server:
        server.script([TextReply(content="answered by node-1")], session="c1")
        (home / "config.yaml").write_text(
            f'model:\n  default: test-model\n  base_url: "{server.base_url}"\n  api_key: sk-test\n'
            "cluster:\n  enabled: true\n  node_id: node-1\n  lease_ttl: 300\n"
        )
        (home / ".env").write_text(f"API_SERVER_KEY=sk-hermes-test-key\nHERMES_DATABASE_URL={url}\n")
        with serving(home) as base:
            headers = {"authorization": "Bearer sk-hermes-test-key", "x-hermes-session-id": "c1"}
            reply = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hello"}]}, headers=headers, timeout=DEADLINE)
            assert reply.status_code == 200, reply.text
            health = httpx.get(f"{base}/health/detailed", headers=headers, timeout=DEADLINE).json()
            assert health["cluster"] == {"node_id": "node-1", "lease_ttl": 300.0}
            held = lease_of(url, "c1")
            assert held is not None and (held.node_id, held.epoch) == ("node-1", 1) and held.expires_at > time.time() + 60
    released = lease_of(url, "c1")
    assert released is not None and (released.node_id, released.epoch) == ("node-1", 1) and released.expires_at <= time.time()
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("c1") if m.role != "system"] == ["hello", "answered by node-1"]
