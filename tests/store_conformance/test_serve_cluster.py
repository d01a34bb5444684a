"""``hermes serve`` in cluster mode (``cluster.enabled``) on Postgres: leases, heartbeats, forwarding, takeover.

Real ``hermes serve`` subprocesses on the session's Postgres server and the test model server.
One node: the session's writes carry its lease, the lease is the node's while it serves, and an
orderly stop releases it; without ``HERMES_CLUSTER_SECRET`` a node refuses to start. Two nodes:
each sees the other beat; a request for a session the other owns is forwarded to it (plain and
SSE) and answered by the owner; a request claiming to come from a node with a wrong signature
is refused; once the owner is SIGKILLed mid-tool, the other takes the session over at the next
request (epoch + 1), the dead node's turn failed ``interrupted`` and its tool call answered once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx

from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.store import StoreReader
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_lease
from protocols._leases import LeaseRecord
from tests.conftest import DEADLINE
from tests.platforms.serve_process import HERMES, launched, serving
from tests.postgres_server import PostgresServer

KEY = "sk-hermes-test-key"
SECRET = "test-cluster-secret-0123456789"
T = TypeVar("T")


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


def eventually(read: Callable[[], T | None], what: str, deadline: float = DEADLINE) -> T:
    """``read()`` once it is not None (a condition in another process: polled, bounded)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = read()
        if value is not None:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {deadline} s")


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


@contextlib.contextmanager
def two_nodes(tmp_path: Path, server: ModelServer, url: str, lease_ttl: float) -> Iterator[tuple[tuple[object, str], tuple[object, str]]]:
    with (
        launched(node_home(tmp_path, "node-1", server.base_url, url, lease_ttl=lease_ttl)) as one,
        launched(node_home(tmp_path, "node-2", server.base_url, url, lease_ttl=lease_ttl)) as two,
    ):
        yield one, two


def test_two_nodes_forward_requests_to_a_sessions_owner_and_take_it_over_when_the_owner_dies(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    ttl = 3.0
    with ModelServer(seed=7) as server, two_nodes(tmp_path, server, url, ttl) as ((one_process, one), (_, two)):
        # Each node sees both beat.
        for base in (one, two):
            eventually(lambda base=base: True if {n["node_id"] for n in health(base)["live_nodes"]} == {"node-1", "node-2"} else None, "both nodes live")  # type: ignore[index, union-attr]

        # c1 is node-1's; asked through node-2, node-1 answers (plain, then streamed).
        server.script(
            [TextReply(content="first, from node-1"), TextReply(content="second, from node-1"), TextReply(content="streamed from node-1")], session="c1"
        )
        assert chat(one, "c1", "hello").json()["choices"][0]["message"]["content"] == "first, from node-1"
        forwarded = chat(two, "c1", "again")
        assert forwarded.status_code == 200 and forwarded.headers["x-hermes-session-id"] == "c1"
        assert forwarded.json()["choices"][0]["message"]["content"] == "second, from node-1"
        streamed = chat(two, "c1", "stream it", stream=True)
        assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
        deltas = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
        assert "".join(d["choices"][0]["delta"].get("content") or "" for d in deltas if d["choices"]) == "streamed from node-1"
        messages = httpx.get(f"{two}/v1/sessions/c1/messages", headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        assert messages.status_code == 200 and len([m for m in messages.json()["data"] if m["role"] == "assistant"]) == 3
        held = lease_of(url, "c1")
        assert held is not None and (held.node_id, held.epoch) == ("node-1", 1)
        forged = httpx.get(
            f"{one}/v1/sessions/c1", headers={"x-hermes-cluster-from": "node-2", "x-hermes-cluster-timestamp": str(time.time())}, timeout=DEADLINE
        )
        assert forged.status_code == 401 and "HERMES_CLUSTER_SECRET" in forged.json()["error"]["message"]

        # t1 runs a tool on node-1; node-1 dies mid-tool; node-2 takes t1 over at its next request.
        call = ScriptedCall(id="call-1", name="terminal", arguments=json.dumps({"command": "sleep 60"}))
        server.script([ToolCallsReply(calls=(call,)), TextReply(content="taken over by node-2")], session="t1")
        run = httpx.post(f"{one}/v1/runs", json={"input": "run it", "session_id": "t1"}, headers={"authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
        assert run.status_code == 202, run.text

        def tool_called() -> bool | None:
            with StoreReader(url) as reader:
                return True if any(m.tool_calls for m in reader.load_messages("t1")) else None

        eventually(tool_called, "node-1 ran the tool")
        os.killpg(one_process.pid, signal.SIGKILL)  # type: ignore[attr-defined]

        def answered() -> httpx.Response | None:
            reply = chat(two, "t1", "are you there?")
            assert reply.status_code in (200, 503), reply.text  # 503: node-1 still counts as live; retry
            return reply if reply.status_code == 200 else None

        reply = eventually(answered, "node-2 took t1 over", deadline=DEADLINE + 2 * ttl)
        assert reply.json()["choices"][0]["message"]["content"] == "taken over by node-2"
        lease = lease_of(url, "t1")
        assert lease is not None and (lease.node_id, lease.epoch) == ("node-2", 2)
        with StoreReader(url) as reader:
            turns = reader.load_turns("t1")
            stored = reader.load_messages("t1")
        assert [(t.status, t.reason) for t in turns] == [("failed", "interrupted"), ("completed", "")]
        assert [m.tool_call_id for m in stored if m.role == "tool"] == ["call-1"]  # exactly one result
        assert [m.content for m in stored if m.role == "user"] == ["run it", "are you there?"]
