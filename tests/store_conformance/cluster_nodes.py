"""Nodes of a test cluster: homes, their model servers' scripts, the processes, the store's rows.

Each node has its own test model server, so every reply a node's model gives names the node
(``cluster_checks.reply_mark``), and so does every tool output it runs
(``cluster_checks.tool_mark_command``): the store's rows then tell which node wrote them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO

import psycopg

from actors._groups import reap_orphan_groups
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from tests.conftest import DEADLINE
from tests.platforms.serve_process import launched
from tests.store_conformance.cluster_checks import StoredMessage, StoredTurn, reply_mark, tool_mark_command

KEY = "sk-hermes-test-key"
SECRET = "test-cluster-secret-0123456789"
DRAIN = 30.0
"""Seconds ``hermes serve`` drains its requests at SIGTERM (its default ``--drain-timeout``)."""


def node_home(root: Path, name: str, model_url: str, db_url: str, *, lease_ttl: float) -> Path:
    """A ``HERMES_HOME`` for node ``name``: cluster mode on ``db_url``, its model at ``model_url``."""
    home = root / name
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model_url}"\n  api_key: sk-test\n'
        f"cluster:\n  enabled: true\n  node_id: {name}\n  lease_ttl: {lease_ttl}\n"
        "approvals:\n  mode: off\n"
        "memory:\n  nudge_interval: 0\nskills:\n  creation_nudge_interval: 0\n"  # no background review sessions
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\nHERMES_DATABASE_URL={db_url}\nHERMES_CLUSTER_SECRET={SECRET}\n")
    return home


def script_tool_turns(server: ModelServer, node: str, sessions: Iterable[str], *, turns: int, tool_seconds: float) -> None:
    """Queue, per session, ``turns`` pairs (a ``terminal`` call that sleeps then prints the node's
    mark; a text answer) on ``node``'s model server. Any interleaving of these replies ends each
    turn: a call is always followed by an answer."""
    for session in sessions:
        replies: list[ToolCallsReply | TextReply] = []
        for k in range(turns):
            command = f"sleep {tool_seconds}; {tool_mark_command(node)}"
            call = ScriptedCall(id=f"{node}.{session}.{k}", name="terminal", arguments=json.dumps({"command": command}))
            replies.append(ToolCallsReply(calls=(call,), content=f"{reply_mark(node)} running the tool"))
            replies.append(TextReply(content=f"{reply_mark(node)} {session} answered"))
        server.script(replies, session=session)


@dataclasses.dataclass
class Node:
    """One running ``hermes serve`` node, its output read as it comes (a full pipe would stall it)."""

    name: str
    process: subprocess.Popen[str]
    base: str
    output: list[str] = dataclasses.field(default_factory=list)
    drains: list[threading.Thread] = dataclasses.field(default_factory=list)

    def signal_group(self, number: signal.Signals) -> None:
        os.killpg(self.process.pid, number)


def _drain(stream: IO[str], into: list[str]) -> None:
    for line in stream:
        into.append(line)


@contextlib.contextmanager
def running_node(home: Path, name: str) -> Iterator[Node]:
    """``hermes serve`` on ``home`` (``launched``), its stdout and stderr drained by two threads.

    On leaving, a node still running is continued (it may be stopped), asked to stop
    (SIGTERM), and killed with its group when it does not within the deadline; the tool
    process groups a killed node left are killed from its home's records (as its next start
    would); the drain threads end at the pipes' end, before ``launched`` closes them.
    """
    with launched(home) as (process, base):
        node = Node(name, process, base)
        node.drains = [threading.Thread(target=_drain, args=(pipe, node.output), daemon=True) for pipe in (process.stdout, process.stderr) if pipe is not None]
        for thread in node.drains:
            thread.start()
        try:
            yield node
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.signal_group(signal.SIGCONT)
                    process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    node.signal_group(signal.SIGKILL)
                    process.wait(timeout=DEADLINE)
            with contextlib.suppress(ProcessLookupError):
                node.signal_group(signal.SIGKILL)  # the group's leftovers
            reap_orphan_groups(home / "run" / "groups")  # a killed node's tools run in groups of their own
            for thread in node.drains:
                thread.join(DEADLINE)


def start_nodes(stack: contextlib.ExitStack, homes: Mapping[str, Path]) -> dict[str, Node]:
    """Start a node on each home at once (each start imports the runtime: seconds), each left to
    ``stack`` to stop and reap, those started too when another fails to start."""
    subs = {name: stack.enter_context(contextlib.ExitStack()) for name in homes}
    with concurrent.futures.ThreadPoolExecutor(len(homes)) as pool:
        started = {name: pool.submit(subs[name].enter_context, running_node(home, name)) for name, home in homes.items()}
    return {name: future.result() for name, future in started.items()}


def read_rows(url: str) -> tuple[list[StoredMessage], list[StoredTurn]]:
    """Every message and turn of the store at ``url``, straight from its tables."""
    with psycopg.connect(url, autocommit=True) as db:
        messages = [
            StoredMessage(id=int(r[0]), session_id=r[1], role=r[2], content=r[3], tool_call_id=r[4], tool_calls=r[5])
            for r in db.execute("SELECT id, session_id, role, content, tool_call_id, tool_calls FROM messages ORDER BY id")
        ]
        turns = [
            StoredTurn(session_id=r[0], turn_id=r[1], status=r[2], reason=r[3]) for r in db.execute("SELECT session_id, turn_id, status, reason FROM turns")
        ]
    return messages, turns


def leases_of(url: str, node: str) -> dict[str, float]:
    """The sessions whose lease ``node`` holds (session → ``expires_at``, the store's clock)."""
    with psycopg.connect(url, autocommit=True) as db:
        return {str(r[0]): float(r[1]) for r in db.execute("SELECT session_id, expires_at FROM leases WHERE node_id = %s", (node,))}


def running_turns_on(db: psycopg.Connection, node: str) -> list[str]:
    """Sessions with a running turn whose live lease ``node`` holds."""
    rows = db.execute(
        "SELECT DISTINCT t.session_id FROM turns t JOIN leases l ON l.session_id = t.session_id"
        " WHERE t.status = 'running' AND l.node_id = %s AND l.expires_at > extract(epoch FROM clock_timestamp())",
        (node,),
    )
    return sorted(str(r[0]) for r in rows)


def no_turn_running(db: psycopg.Connection) -> bool:
    """True when no turn of the store is running (the nodes are quiet: no write is on its way)."""
    row = db.execute("SELECT count(*) FROM turns WHERE status = 'running'").fetchone()
    return row is not None and int(row[0]) == 0


def node_lapsed(db: psycopg.Connection, node: str, ttl: float) -> bool | float:
    """True once ``node`` is past its leases: none of its leases live, its last heartbeat older
    than ``ttl``; else the seconds until then if it writes nothing more (the store's clock)."""
    row = db.execute(
        "SELECT (SELECT max(expires_at) FROM leases WHERE node_id = %s),"
        " (SELECT heartbeat_at FROM nodes WHERE node_id = %s), now_"
        " FROM (SELECT extract(epoch FROM clock_timestamp()) AS now_) AS clock",
        (node, node),
    ).fetchone()
    assert row is not None
    last_lease, beat, now = row[0], row[1], float(row[2])
    until = max(float(last_lease) if last_lease is not None else now, float(beat) + ttl if beat is not None else now)
    return True if until <= now else until - now


def beating(db: psycopg.Connection, ttl: float) -> set[str]:
    """The nodes whose last heartbeat is younger than ``ttl`` (the store's clock)."""
    rows = db.execute("SELECT node_id FROM nodes WHERE extract(epoch FROM clock_timestamp()) - heartbeat_at < %s", (ttl,))
    return {str(r[0]) for r in rows}


def stop_node(node: Node) -> list[str]:
    """SIGTERM ``node`` (continued first); what was wrong with its stop (not within its drain time, an exit status but 0)."""
    node.signal_group(signal.SIGCONT)
    node.process.send_signal(signal.SIGTERM)
    try:
        code = node.process.wait(timeout=DRAIN + DEADLINE)
    except subprocess.TimeoutExpired:
        return [f"{node.name} did not stop within {DRAIN + DEADLINE} s of SIGTERM"]
    for thread in node.drains:
        thread.join(DEADLINE)  # the pipes end with the process: all it printed is read
    return [] if code == 0 else [f"{node.name} exited {code}"]


@contextlib.contextmanager
def outputs_on_failure(nodes: Iterable[Node], url: str) -> Iterator[None]:
    """Print the end of each node's output and the database's open transactions when the block
    fails (what the nodes logged and who waits on whom are the first clues)."""
    try:
        yield
    except BaseException:
        for node in nodes:
            print(f"--- {node.name} (exit {node.process.poll()}) ---\n" + "".join(node.output[-60:]))
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as db:
            rows = db.execute(
                "SELECT pid, pg_blocking_pids(pid), state, now() - xact_start, left(query, 160) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' ORDER BY xact_start"
            )
            print("--- open transactions (pid, blocked by, state, age, query) ---\n" + "\n".join(map(repr, rows)))
        raise
