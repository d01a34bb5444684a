"""``hermes serve`` in cluster mode (``cluster.enabled``) on Postgres: leases, heartbeats, forwarding, takeover.

Real ``hermes serve`` subprocesses on the session's Postgres server and the test model server.
One node: the session's writes carry its lease, the lease is the node's while it serves, and an
orderly stop releases it; without ``HERMES_CLUSTER_SECRET`` a node refuses to start. Several
nodes, forwarding and takeover: ``test_cluster_acceptance.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx

from actors.chaos import ModelServer, TextReply
from actors.store import StoreReader
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from protocols._leases import LeaseRecord
from tests.conftest import DEADLINE
from tests.platforms.serve_process import HERMES, serving
from tests.postgres_server import PostgresServer

KEY = "sk-hermes-test-key"
SECRET = "test-cluster-secret-0123456789"


def lease_of(url: str, session_id: str) -> LeaseRecord | None:
    db = open_store_reader(url)
    try:
        return read_lease(db, session_id)
    finally:
        db.close()


def node_home(tmp_path: Path, name: str, model_url: str, db_url: str, *, lease_ttl: float, secret: str | None = SECRET, model_key: str = "sk-test") -> Path:
    home = tmp_path / name
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model_url}"\n  api_key: {model_key}\n'
        f"cluster:\n  enabled: true\n  node_id: {name}\n  lease_ttl: {lease_ttl}\n"
        "approvals:\n  mode: off\n"
    )
    env = f"API_SERVER_KEY={KEY}\nHERMES_DATABASE_URL={db_url}\n" + (f"HERMES_CLUSTER_SECRET={secret}\n" if secret else "")
    (home / ".env").write_text(env)
    return home


def chat(base: str, session_id: str, text: str, **extra: object) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}", "x-hermes-session-id": session_id}
    return httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "user", "content": text}], **extra}, headers=headers, timeout=DEADLINE)


def health(base: str) -> dict[str, object]:
    reply = httpx.get(f"{base}/health/detailed", headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
    assert reply.status_code == 200, reply.text
    cluster = reply.json()["cluster"]
    assert isinstance(cluster, dict)
    return cluster


def test_hermes_serve_in_cluster_mode_holds_its_sessions_leases_and_releases_them_at_stop(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    with ModelServer(seed=5) as server:
        server.script([TextReply(content="answered by node-1")], session="c1")
        home = node_home(tmp_path, "node-1", server.base_url, url, lease_ttl=300)
        with serving(home) as base:
            reply = chat(base, "c1", "hello")
            assert reply.status_code == 200, reply.text
            cluster = health(base)
            assert (cluster["node_id"], cluster["lease_ttl"], cluster["address"]) == ("node-1", 300.0, base)
            held = lease_of(url, "c1")
            assert held is not None and (held.node_id, held.epoch) == ("node-1", 1) and held.expires_at > time.time() + 60
    released = lease_of(url, "c1")
    assert released is not None and (released.node_id, released.epoch) == ("node-1", 1) and released.expires_at <= time.time()
    with StoreReader(url) as reader:
        assert [m.content for m in reader.load_messages("c1") if m.role != "system"] == ["hello", "answered by node-1"]


def test_a_node_in_cluster_mode_without_the_shared_secret_refuses_to_start(tmp_path: Path, postgres: PostgresServer) -> None:
    import subprocess

    home = node_home(tmp_path, "node-x", "http://127.0.0.1:9", postgres.new_database(), lease_ttl=30, secret=None)
    env = {k: v for k, v in os.environ.items() if k not in ("API_SERVER_KEY", "HERMES_CLUSTER_SECRET")} | {"HERMES_HOME": str(home)}
    done = subprocess.run([*HERMES, "serve", "--port", "0"], capture_output=True, text=True, env=env, timeout=DEADLINE)
    assert done.returncode == 2 and "HERMES_CLUSTER_SECRET is not set" in done.stderr and "Traceback" not in done.stderr, done.stderr
