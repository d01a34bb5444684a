"""Issue 22's acceptance: three ``hermes serve`` nodes on one Postgres, one killed and one paused mid-run.

Three real nodes (cluster mode, a short ``lease_ttl``) on the session's Postgres server, each
with its own test model server whose replies name it: every turn runs a ``terminal`` call that
sleeps and prints the node's mark, then answers. ``SESSIONS`` clients each send their turns one
at a time to the next port of one round robin over the three nodes (so most requests land on a
node that does not own the session and are forwarded; every other turn is streamed), retrying a
refused attempt with a new text (``cluster_clients``). Mid-run:

1. node-1 is SIGKILLed while turns run on it; its sessions' leases at that instant are read;
2. node-2 is SIGSTOPped while turns run on it and kept stopped until its heartbeat and every
   lease it held are older than the ttl; meanwhile a second client of each session it had a
   turn running in sends a turn to node-3 (which takes the session over); then node-2 is
   SIGCONTinued, wakes up in the middle of those turns, and must write nothing (fences);
3. the clients run one more turn each, then stop.

Then, from the tables (psycopg) and through the API (``cluster_checks``): every acknowledged
user message stored exactly once and none twice; every tool call with exactly one result; no
turn with replies from two nodes, and no node writing in a session after another took it
from it; every turn completed, failed ``interrupted`` or cancelled, one per user message;
every turn answered within its deadline; the API's transcripts are the tables'; the two
remaining nodes stop cleanly. Each of node-1's sessions answered within 5 s of its lease's
expiry is measured and printed in every run, and asserted in the long run only (a bound in
seconds fails on a loaded shared machine). Every node's process group is reaped whatever
happens (``cluster_nodes.running_node``).

Size: ``SESSIONS`` is 24 (25-40 s on 2 cores); ``HERMES_LONG_CLUSTER=1`` runs the issue's
300 sessions (about 5 minutes; not in CI).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import trio

from actors.chaos import ModelServer
from tests.conftest import DEADLINE
from tests.postgres_server import PostgresServer
from tests.store_conformance.cluster_checks import (
    StoredMessage,
    a_turn_per_user_message,
    answered_after_takeover,
    no_write_after_losing,
    one_writer_per_turn,
    takeover_delays,
    tool_calls_answered_once,
    turns_terminal,
    user_messages_stored_once,
)
from tests.store_conformance.cluster_clients import TURN_DEADLINE, Ledger, RoundRobin, api_messages, ask_turn, run_session
from tests.store_conformance.cluster_nodes import (
    beating,
    leases_of,
    no_turn_running,
    node_home,
    node_lapsed,
    outputs_on_failure,
    read_rows,
    running_turns_on,
    script_tool_turns,
    start_nodes,
    stop_node,
)
from tests.store_conformance.cluster_watch import StoreWatch

LONG = os.environ.get("HERMES_LONG_CLUSTER") == "1"
SESSIONS = 300 if LONG else 24
TURNS = 40
"""Most turns a client sends; the run stops them sooner (after the faults, one turn more each)."""
LEASE_TTL = 6.0 if LONG else 3.0
"""Short, so the faults play out in seconds; longer for 300 sessions, whose renewals queue behind their turns on 2 cores."""
TOOL_SECONDS = 0.3
TAKEOVER_LIMIT = 5.0
"""Seconds after a dead node's lease expiry within which its sessions are answered (the issue's figure)."""
NAMES = ("node-1", "node-2", "node-3")
STOP_TRIES = 5
"""Times node-2 is stopped to find a turn running on it (a short turn may end in between)."""


def phase(began: float, text: str) -> None:
    """A line in the test's output: when each step of the run happened (read on a failure)."""
    print(f"{time.time() - began:6.2f} s  {text}", flush=True)


def transcripts_differ(table: list[StoredMessage], api: dict[str, list[StoredMessage]]) -> list[str]:
    """Each session's transcript through the API is its rows in the tables (system prompt aside)."""
    out: list[str] = []
    rows: dict[str, list[tuple[object, ...]]] = {s: [] for s in api}
    for m in table:
        if m.session_id in rows and m.role != "system":
            rows[m.session_id].append((m.id, m.role, m.content, m.tool_call_id))
    for session, messages in sorted(api.items()):
        seen = [(m.id, m.role, m.content, m.tool_call_id) for m in messages if m.role != "system"]
        if seen != rows[session]:
            out.append(
                f"{session}: the API shows {len(seen)} messages, the tables hold {len(rows[session])} (first difference: {_first_difference(seen, rows[session])})"
            )
    return out


def _first_difference(a: Sequence[tuple[object, ...]], b: Sequence[tuple[object, ...]]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return f"{x!r} != {y!r}"
    return "one is longer"


async def test_three_nodes_survive_a_killed_and_a_paused_node_with_every_turn_settled_once(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.new_database()
    sessions = [f"s{i:03d}" for i in range(SESSIONS)]
    began = time.time()
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(ModelServer(seed=i + 1)) for i, name in enumerate(NAMES)}
        for name, server in servers.items():
            script_tool_turns(server, name, sessions, turns=TURNS + 4, tool_seconds=TOOL_SECONDS)
        homes = {name: node_home(tmp_path, name, servers[name].base_url, url, lease_ttl=LEASE_TTL) for name in NAMES}
        nodes = start_nodes(stack, homes)
        killed, paused, survivor = nodes["node-1"], nodes["node-2"], nodes["node-3"]
        stack.enter_context(outputs_on_failure(nodes.values(), url))
        watch = stack.enter_context(StoreWatch(url, ("nodes", "turns")))  # the nodes tell nothing: their commits wake the test
        watch.attach_trio()
        ledger, stop = Ledger(), trio.Event()
        await watch.until(lambda db: beating(db, LEASE_TTL) == set(NAMES), "all three nodes beating", DEADLINE, ledger.late)
        assert not ledger.late, ledger.late
        phase(began, "nodes beating: " + ", ".join(f"{n.name} {n.base}" for n in nodes.values()))

        ports = RoundRobin([node.base for node in nodes.values()], watch, LEASE_TTL)
        async with httpx.AsyncClient(timeout=httpx.Timeout(TURN_DEADLINE), limits=httpx.Limits(max_connections=None), trust_env=False) as client:
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(functools.partial(run_session, client, ledger, ports, session, turns=TURNS, stop=stop))
                await ledger.wait_until(lambda: ledger.answered_since(0) >= set(sessions), "every session answered once", DEADLINE + SESSIONS / 2)
                phase(began, "every session answered once")

                # 1. node-1 dies mid-turn.
                await watch.until(lambda db: bool(running_turns_on(db, "node-1")), "a turn running on node-1", DEADLINE, ledger.late)
                killed_at = time.time()
                killed.signal_group(signal.SIGKILL)
                killed.process.wait(timeout=DEADLINE)
                expiries = {s: at for s, at in (await trio.to_thread.run_sync(leases_of, url, "node-1")).items() if at > killed_at}
                phase(began, f"node-1 killed, holding {len(expiries)} live leases")
                await ledger.wait_until(
                    lambda: all(s in ledger.answered_since(killed_at) or s in ledger.finished for s in expiries),
                    "node-1's sessions answered by the others",
                    LEASE_TTL + TAKEOVER_LIMIT + DEADLINE,
                )
                phase(began, "node-1's sessions answered")

                # 2. node-2 sleeps past its leases while another node takes its running sessions over.
                for _ in range(STOP_TRIES):  # the turn seen running may end before the signal lands: then again
                    await watch.until(lambda db: bool(running_turns_on(db, "node-2")), "a turn running on node-2", DEADLINE, ledger.late)
                    paused.signal_group(signal.SIGSTOP)
                    in_flight = await trio.to_thread.run_sync(watch.ask, lambda db: running_turns_on(db, "node-2"))
                    if in_flight:
                        break
                    paused.signal_group(signal.SIGCONT)
                phase(began, f"node-2 stopped, {len(in_flight)} turns running on it")
                await watch.until(lambda db: node_lapsed(db, "node-2", LEASE_TTL), "node-2 past its leases", LEASE_TTL + DEADLINE, ledger.late)
                phase(began, "node-2 past its leases")
                async with trio.open_nursery() as probes:
                    for session in in_flight:
                        probes.start_soon(
                            functools.partial(ask_turn, client, ledger, RoundRobin([survivor.base], watch, LEASE_TTL), session, f"{session} probe")
                        )
                phase(began, "node-2's running sessions answered by node-3")
                paused.signal_group(signal.SIGCONT)
                continued_at = time.time()
                phase(began, "node-2 continued")

                # 3. One more turn each, then stop.
                await ledger.wait_until(
                    lambda: all(s in ledger.answered_since(continued_at) or s in ledger.finished for s in sessions),
                    "every session answered after node-2 continued",
                    TURN_DEADLINE,
                )
                stop.set()
                phase(began, "every session answered after node-2 continued; the clients stop")

            # A turn a client gave up on may still run: the rows are read once every turn ended.
            await watch.until(no_turn_running, "every turn ended after the clients stopped", TURN_DEADLINE, ledger.late)
            messages, turns = await trio.to_thread.run_sync(read_rows, url)
            phase(began, f"clients done; {len(messages)} messages and {len(turns)} turns read")
            live = RoundRobin([paused.base, survivor.base], watch, LEASE_TTL)
            api = {session: await api_messages(client, live, session) for session in sessions}

        stopped = stop_node(paused) + stop_node(survivor)
        phase(began, "node-2 and node-3 stopped")
        internal = [error for server in servers.values() for error in server.internal_errors]
        logs = {node.name: "".join(node.output) for node in nodes.values()}
        for name, text in logs.items():
            (tmp_path / f"{name}.log").write_text(text)

    acknowledged = set(ledger.acknowledged)
    readable = {s: rows for s, rows in api.items() if rows is not None}
    api_rows = [m for rows in readable.values() for m in rows]
    violations = {
        "acknowledged user messages stored once": user_messages_stored_once(messages, ledger.sent, acknowledged),
        "tool calls with exactly one result": tool_calls_answered_once(messages),
        "one node's replies per turn": one_writer_per_turn(messages),
        "no write after losing a session": no_write_after_losing(messages),
        "every turn terminal": turns_terminal(turns),
        "one turn per user message": a_turn_per_user_message(messages, turns),
        "every turn answered within its deadline": ledger.unanswered,
        "every step of the run in time": ledger.late,
        "answers carry a node's mark": ledger.odd,
        "the API gives every session's transcript": [f"{s}: not readable through the API" for s, rows in sorted(api.items()) if rows is None],
        "the API shows the tables' transcripts": transcripts_differ(messages, readable),
        "tool calls with one result, through the API": tool_calls_answered_once(api_rows),
        "one node's replies per turn, through the API": one_writer_per_turn(api_rows),
        "the remaining nodes stop cleanly": stopped,
        "the model servers had no internal error": internal,
    }
    # A bound in seconds holds on a quiet machine only: asserted in the long run, reported in CI's.
    timed = answered_after_takeover(expiries, ledger.answers, killed_at, TAKEOVER_LIMIT)
    violations[f"node-1's sessions answered within {TAKEOVER_LIMIT} s of lease expiry"] = timed if LONG else []
    delays = takeover_delays(expiries, ledger.answers, killed_at)
    print(
        f"{SESSIONS} sessions, {len(acknowledged)} turns acknowledged of {len(ledger.sent)} attempts, {len(turns)} turns stored;"
        f" node-1's {len(expiries)} sessions answered {min(delays, default=0):.2f}..{max(delays, default=0):.2f} s after their leases expired"
        f" (median {delays[len(delays) // 2] if delays else 0:.2f} s);"
        f" node-2 had {len(in_flight)} turns running when stopped; refusals: {dict(ledger.refused)}"
    )
    if timed and not LONG:
        print(f"NOTE (asserted with HERMES_LONG_CLUSTER=1 only) node-1's sessions answered within {TAKEOVER_LIMIT} s of lease expiry: {timed[:3]}")
    for check, found in violations.items():
        print(f"{'PASS' if not found else 'FAIL'} {check}" + "".join(f"\n    {line}" for line in found[:5]))
    # The checker is not blind on these rows: a stored copy of an acknowledged message is caught.
    first = next(m for m in messages if m.role == "user" and (m.session_id, m.content) in acknowledged)
    planted = [*messages, StoredMessage(id=max(m.id for m in messages) + 1, session_id=first.session_id, role="user", content=first.content)]
    assert user_messages_stored_once(planted, ledger.sent, acknowledged), "the duplicate planted in a copy of the rows was not caught"
    assert expiries, "node-1 held no live lease when it was killed: the takeover was not exercised"
    assert in_flight, "node-2 had no running turn when it was stopped: the fences were not exercised"
    assert not any(violations.values()), (
        f"the nodes' output: {tmp_path}/node-*.log\n"
        + "\n".join(f"{check}: {line}" for check, found in violations.items() for line in found[:10])
        + _log_lines(logs, ledger.unanswered)
    )


def _log_lines(logs: dict[str, str], unanswered: list[str]) -> str:
    """What each node logged about the sessions of unanswered turns (a CI run's tmp dir is gone when it is read)."""
    sessions = {line.split()[0] for line in unanswered}
    found = [f"{name}: {line}" for name, text in logs.items() for line in text.splitlines() if any(s in line for s in sessions)]
    return "".join(f"\n    {line}" for line in found[:60])
