"""Issue 22's acceptance: three ``hermes serve`` nodes on one Postgres lose two of their number.

Three real ``hermes serve`` processes (a short lease ttl) share one Postgres database and the
test model server; each node's model key is its own, so the model server tells which node made
each call. Sessions of tool turns are spread through all three ports (a session's second turn
goes through the next node's port and is forwarded to its owner; a streamed turn and a
session's messages too; a request with a forged node signature is refused). Then node-1's sessions and
node-2's sessions are each mid-tool; node-1 is SIGKILLed and node-2 SIGSTOPped past its lease;
node-3 gets every one of their sessions' next message (retrying 503s) and takes them over;
node-2 is resumed and its stale sessions lose every write; its port then forwards to node-3.

Checked over the store and the model server's log: every acknowledged user message stored
once, every tool call with exactly one result, every turn terminal, no session whose model
calls interleave two nodes (one owner at a time), and each taken-over session answered after
its dead owner's lease expired (the delays are printed; asserted under 5 s only in the full
run). ``HERMES_CLUSTER_SESSIONS`` sets the number of sessions (default 24; the issue's run is
300, which takes minutes: not in the 10-minute suite).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg

from actors._groups import reap_orphan_groups
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.store import StoreReader
from actors.store._backend import open_store_reader
from actors.store._lease_rows import read_leases
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched
from tests.postgres_server import PostgresServer
from tests.store_conformance.cluster_watch import StoreWatch, wait_to_retry_blocking
from tests.store_conformance.test_serve_cluster import KEY, health, node_home

SESSIONS = int(os.environ.get("HERMES_CLUSTER_SESSIONS", "24"))
FULL_RUN = "HERMES_CLUSTER_SESSIONS" in os.environ
TTL = float(os.environ.get("HERMES_CLUSTER_TTL", "10" if FULL_RUN else "3"))
"""The nodes' lease ttl: short in the suite; in the full run each of 300 sessions renews every
third of it, so a longer one keeps the renewals from swamping two cores."""
NODES = ("node-1", "node-2", "node-3")
WAIT = DEADLINE + 4 * TTL + SESSIONS * 0.1
"""Seconds a request may take (with retries of 503), more with more sessions at once."""


def call(sid: str, tag: str, command: str) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(id=f"{sid}-{tag}", name="terminal", arguments=json.dumps({"command": command})),))


def live_nodes(base: str) -> list[dict[str, Any]]:
    """The live nodes the node at ``base`` saw at its last read of the nodes table."""
    seen = health(base)["live_nodes"]
    assert isinstance(seen, list), seen
    return seen


def launch_all(stack: contextlib.ExitStack, homes: list[Path]) -> list[tuple[Any, str]]:
    """Start a ``hermes serve`` per home at once (each stopped, its group killed, when ``stack`` closes)."""
    managers = [launched(home) for home in homes]

    def enter(manager: Any) -> tuple[Any, str]:
        entered: tuple[Any, str] = manager.__enter__()
        stack.push(manager.__exit__)
        return entered

    with concurrent.futures.ThreadPoolExecutor(len(homes)) as pool:
        return list(pool.map(enter, managers))


def post(
    client: httpx.Client, base: str, sid: str, text: str, *, watch: StoreWatch | None = None, refused: Counter[str] | None = None
) -> tuple[httpx.Response, float]:
    """A chat turn; with a ``watch``, 503s (owner not reachable yet, lease still live) are retried
    once the store says the session may be served, at most Retry-After later (``wait_to_retry``)."""
    end, waited = time.monotonic() + WAIT, True
    while True:
        reply = client.post(
            f"{base}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": text}]},
            headers={"authorization": f"Bearer {KEY}", "x-hermes-session-id": sid},
        )
        if not (watch is not None and reply.status_code == 503 and time.monotonic() < end):
            return reply, time.time()
        if refused is not None:
            refused[reply.json().get("error", {}).get("code") or "503"] += 1
        bound = min(float(reply.headers.get("retry-after", "1") or 1), end - time.monotonic())
        waited = wait_to_retry_blocking(watch, sid, TTL, bound, again=not waited)


def test_three_nodes_lose_one_killed_and_one_paused_and_every_session_stays_whole(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    sids = [f"s{i:03d}" for i in range(SESSIONS)]
    owner = {sid: NODES[i % 3] for i, sid in enumerate(sids)}
    acked: list[str] = []  # user messages whose request was answered 200 / 202
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ModelServer(seed=22))
        homes = [node_home(tmp_path, n, server.base_url, url, lease_ttl=TTL, model_key=f"sk-{n}") for n in NODES]
        launched_nodes = launch_all(stack, homes)
        process = {n: p for n, (p, _) in zip(NODES, launched_nodes, strict=True)}
        base = {n: b for n, (_, b) in zip(NODES, launched_nodes, strict=True)}
        # The nodes tell nothing: their commits to these tables wake the test's waits.
        watch = stack.enter_context(StoreWatch(url, ("nodes", "messages")))
        for n in NODES:  # a node reads the nodes table after each of its heartbeats
            watch.wait(lambda _db, n=n: len(live_nodes(base[n])) == 3, f"{n} sees three live nodes")  # type: ignore[misc]
        client = stack.enter_context(httpx.Client(timeout=WAIT, limits=httpx.Limits(max_connections=max(128, SESSIONS))))
        pool = stack.enter_context(concurrent.futures.ThreadPoolExecutor(8))

        # 1. Two tool turns per session: the first through its owner's port, the second through the next node's.
        for sid in sids:
            server.script(
                [call(sid, "a", f"echo {sid}"), TextReply(content=f"{sid} one"), call(sid, "b", "echo two"), TextReply(content=f"{sid} two")], session=sid
            )

        def two_turns(i: int, sid: str) -> list[str]:
            first, _ = post(client, base[NODES[i % 3]], sid, f"{sid} m1")
            assert first.status_code == 200 and first.json()["choices"][0]["message"]["content"] == f"{sid} one", first.text
            second, _ = post(client, base[NODES[(i + 1) % 3]], sid, f"{sid} m2")
            assert second.status_code == 200 and second.json()["choices"][0]["message"]["content"] == f"{sid} two", second.text
            return [f"{sid} m1", f"{sid} m2"]

        for texts in pool.map(two_turns, range(len(sids)), sids):
            acked.extend(texts)

        # Through a port that is not the owner's: a streamed turn, a session's messages; a forged node request refused.
        server.script([TextReply(content="streamed from node-1")], session="s000")
        headers = {"authorization": f"Bearer {KEY}", "x-hermes-session-id": "s000"}
        body = {"messages": [{"role": "user", "content": "s000 streamed"}], "stream": True}
        with client.stream("POST", f"{base['node-3']}/v1/chat/completions", json=body, headers=headers) as streamed:
            assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in streamed.iter_lines() if line.startswith("data: {")]
        acked.append("s000 streamed")
        deltas = [json.loads(line[6:]) for line in lines]
        assert "".join(d["choices"][0]["delta"].get("content") or "" for d in deltas if d["choices"]) == "streamed from node-1"
        listed = client.get(f"{base['node-2']}/v1/sessions/s000/messages", headers={"authorization": f"Bearer {KEY}"})
        assert listed.status_code == 200 and [m["content"] for m in listed.json()["data"] if m["role"] == "user"] == ["s000 m1", "s000 m2", "s000 streamed"]
        forged = client.get(f"{base['node-1']}/v1/sessions/s000", headers={"x-hermes-cluster-from": "node-2", "x-hermes-cluster-timestamp": str(time.time())})
        assert forged.status_code == 401 and "HERMES_CLUSTER_SECRET" in forged.json()["error"]["message"]

        # 2. node-1's and node-2's sessions mid-tool; node-1 killed, node-2 paused.
        victims = [sid for sid in sids if owner[sid] in ("node-1", "node-2")]
        for sid in victims:
            # node-1's outlives the test (its group is reaped below); node-2's ends about when it is paused.
            slow = "sleep 300" if owner[sid] == "node-1" else f"sleep {2 + SESSIONS * 0.1:g}"
            server.script([call(sid, "k", slow), TextReply(content=f"{sid} after"), TextReply(content=f"{sid} five")], session=sid)
            run = client.post(f"{base[owner[sid]]}/v1/runs", json={"input": f"{sid} m3", "session_id": sid}, headers={"authorization": f"Bearer {KEY}"})
            assert run.status_code == 202, run.text
            acked.append(f"{sid} m3")

        def all_mid_tool(db: psycopg.Connection) -> bool:
            row = db.execute("SELECT count(*) FROM messages WHERE role = 'assistant' AND tool_calls LIKE %s", ('%-k"%',)).fetchone()
            return row is not None and int(row[0]) == len(victims)

        watch.wait(all_mid_tool, "every victim session mid-tool", deadline=WAIT)
        os.killpg(process["node-1"].pid, signal.SIGKILL)
        os.killpg(process["node-2"].pid, signal.SIGSTOP)
        db = open_store_reader(url)
        try:
            expiry = {lease.session_id: lease.expires_at for lease in read_leases(db)}
        finally:
            db.close()

        # 3. node-3 answers every victim session once its owner's lease is gone.
        refused: Counter[str] = Counter()

        def follow_up(sid: str) -> float:
            reply, at = post(client, base["node-3"], sid, f"{sid} m4", watch=watch, refused=refused)
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == f"{sid} after", reply.text
            return at - expiry[sid]

        with concurrent.futures.ThreadPoolExecutor(len(victims)) as burst:  # every victim's next message at once (a thread and a connection each)
            delays = list(burst.map(follow_up, victims))
        acked.extend(f"{sid} m4" for sid in victims)
        print(
            f"taken over: {len(delays)} sessions answered {max(delays):.2f} s at most after their lease expired (median {sorted(delays)[len(delays) // 2]:.2f} s)"
        )
        for n in ("node-1", "node-2"):  # killed, paused: the delays and refusals per way of dying
            of = sorted(d for sid, d in zip(victims, delays, strict=True) if owner[sid] == n)
            print(f"  {n}'s {len(of)}: min {of[0]:.2f} s, median {of[len(of) // 2]:.2f} s, max {of[-1]:.2f} s")
        print(f"  503s retried: {dict(refused)}")

        # 4. node-2 resumes: its stale sessions write nothing; its port forwards to the new owner.
        os.killpg(process["node-2"].pid, signal.SIGCONT)
        watch.wait(lambda _db: {n["node_id"] for n in live_nodes(base["node-2"])} >= {"node-2", "node-3"}, "node-2 beats again")
        for sid in (s for s in victims if owner[s] == "node-2"):
            reply, _ = post(client, base["node-2"], sid, f"{sid} m5", watch=watch)
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == f"{sid} five", reply.text
            acked.append(f"{sid} m5")

        # The model calls of each session: one node after another, never back and forth.
        calls: dict[str, list[str]] = {}
        for request in server.requests:
            if request.session and request.path.endswith("/chat/completions"):
                calls.setdefault(request.session, []).append(request.api_key or "")
        for n in ("node-2", "node-3"):  # the survivors stop cleanly: their sessions end in order
            os.killpg(process[n].pid, signal.SIGTERM)
            _, stderr = process[n].communicate(timeout=WAIT)
            assert "Traceback" not in stderr, stderr[-4000:]
            assert process[n].returncode == 0, n

    left = reap_orphan_groups(homes[0] / "run" / "groups")  # the killed node's tools, as its next start would
    assert left and all("sleep 300" in " ".join(group.argv) for group in left), left
    with StoreReader(url) as reader:
        stored_users: Counter[str] = Counter()
        for sid in sids:
            messages = reader.load_messages(sid, every_segment=True)
            stored_users.update(m.content or "" for m in messages if m.role == "user")
            ids = [c.id for m in messages for c in m.tool_calls or ()]
            results = Counter(m.tool_call_id for m in messages if m.role == "tool")
            assert all(results[i] == 1 for i in ids) and sum(results.values()) == len(ids), (
                sid,
                [(m.role, (m.content or "")[:50], m.tool_call_id) for m in messages],
            )
            assert all(t.status != "running" for t in reader.load_turns(sid)), sid
            blocks = [k for j, k in enumerate(calls[sid]) if j == 0 or calls[sid][j - 1] != k]
            assert len(blocks) == len(set(blocks)), (sid, calls[sid])  # no reply from two nodes at once
            if sid in victims:
                assert blocks[-1] == "sk-node-3", (sid, blocks)
    assert all(stored_users[text] == 1 for text in acked), [t for t in acked if stored_users[t] != 1]
    assert sum(stored_users.values()) == len(acked)  # nothing stored that was not acknowledged, nothing twice
    if FULL_RUN:  # the figure (a timing: checked only in the full run, on a quiet machine)
        assert max(delays) < 5.0, sorted(delays)[-5:]
