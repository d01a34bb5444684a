"""The Telegram gateway's added latency and memory: N chats on the test Bot API server.

This process runs the real tree (store, sessions, ``/platforms/telegram`` = ``TelegramAdapter``)
on a SQLite file in a temporary directory (``gc.freeze`` once it started, as ``hermes serve``
does). The test Bot API server
(``tests/platforms/gateway/telegram_server.py``: keep-alive, as Telegram) and the test model
server in echo mode run in a child process on 127.0.0.1, as Telegram and the model are other
machines: their threads take no turn at this process's GIL. A probe subscribes to every chat's
session hub and stamps ``time.monotonic`` when the session publishes ``TurnStarted`` and
``TurnCompleted`` (in the publishing thread); the servers stamp the same clock (CLOCK_MONOTONIC
is one clock for the machine).

- ``warm``: N chats (default 1,000) each send one message (pushed 50 at a time); all answered.
  ``idle_chat_kib``: the process's RSS after, minus before, divided by N (session actors that
  stay, their hubs, the gateway's seen log; the chats' sessions are idle then).
- ``inbound`` (S samples, one message at a time, round robin over the N chats): from the Bot
  API server's ``getUpdates`` answer carrying the update written to the socket to
  ``TurnStarted`` of the chat's session: reading and parsing the answer, the lane's decision
  (``_inbound_lane.py``: dedup, access, an idle chat) and the ``StartTurn`` told from the poll's
  wait, and the session taking it (the adapter decides the batch and writes the state file
  beside it, not before: ``_effects.py``). Baseline (same run): ``StartTurn`` told straight to a session of
  the same chats, as idle as the samples' (as the API server tells it) to ``TurnStarted``.
- ``outbound``: from ``TurnCompleted`` to the ``sendMessage`` request read by the Bot API
  server: the hub hop, the reply decided when the turn started (``_answer_plan.py``), sent by
  the turn's wait: MarkdownV2, the HTTP call on a kept-alive connection (the actor decides the
  chat's end and writes the outbox beside it). Baseline: a plain thread woken by
  ``TurnCompleted`` that POSTs the same ``sendMessage`` with httpx.

The difference of the medians is the gateway's own cost; the ratio is against the baseline;
``baseline_p99_us`` is the plain hop's own tail on the machine at that moment.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx
from _common import latency_row, parse_options, percentile, print_header, print_json, versions

from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, agent_specs, reader_opener
from actors.agent._address import SESSIONS_PATH, tell_session
from actors.chaos import ModelServer
from actors.platforms.gateway import AccessPolicy, Chats, TelegramAdapter
from protocols import StartTurn, TurnCompleted, TurnStarted
from supervisor import ChildSpec, Runtime, Supervisor
from tests.platforms.gateway.telegram_server import TOKEN, TelegramServer

DEADLINE = 120.0


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Probe:
    """Stamps when each turn starts and completes (told from the session's thread)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.completed: dict[str, float] = {}
        self.cond = threading.Condition()

    def tell(self, event: Any) -> None:
        now = time.monotonic()
        if isinstance(event, TurnStarted):
            self.started.setdefault(event.turn_id, now)
        elif isinstance(event, TurnCompleted):
            with self.cond:
                self.completed.setdefault(event.turn_id, now)
                self.cond.notify_all()

    def wait_completed(self, turn_id: str) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: turn_id in self.completed, DEADLINE):
                raise TimeoutError(f"turn {turn_id} did not complete")
            return self.completed[turn_id]


class Servers:
    """The test Bot API server and the test model server in a child process (as Telegram and
    the model are other machines: their threads take no turn at this process's GIL), driven
    over a pipe. Their stamps are ``time.monotonic`` (CLOCK_MONOTONIC: one clock for every
    process of the machine), so they compare with the probe's."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve_child, args=(child,), daemon=True)
        self.process.start()
        self.telegram_url, self.model_url = self.call("urls")

    def call(self, *command: Any) -> Any:
        self.conn.send(command)
        end = time.monotonic() + DEADLINE
        while not self.conn.poll(0.5):
            if not self.process.is_alive() or time.monotonic() > end:
                raise RuntimeError(f"the servers' process did not answer {command[0]} (exit code {self.process.exitcode})")
        return self.conn.recv()

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.call("stop")
        self.process.join(10.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def serve_child(conn: Any) -> None:
    """The servers' process: answers the bench's calls until ``stop``."""
    with ModelServer(seed=1) as model, TelegramServer() as telegram:
        while True:
            command, *args = conn.recv()
            if command == "urls":
                conn.send((telegram.base_url, model.base_url))
            elif command == "push":
                conn.send(telegram.push(*args))
            elif command == "wait_delivered":
                conn.send([(s.at, s.raw) for s in telegram.wait_delivered(*args)])
            elif command == "delivered":
                conn.send([(s.at, s.raw) for s in telegram.delivered(*args)])
            elif command == "handed":
                conn.send(telegram.handed[args[0]])
            else:
                conn.send(None)
                return


def main() -> None:
    options = parse_options(__doc__)
    chats = 50 if options.quick else 1000
    samples = 30 if options.quick else 300
    info = versions("pykka", "trio", "httpx", "msgspec")
    print_header("gateway", info, options.json, f"{chats} chats, {samples} samples per path", chats=chats, samples=samples)
    load_before = os.getloadavg()[0]
    servers = Servers()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inbound, outbound, base_in, base_out, idle_kib = run(Path(tmp), servers, chats, samples)
    finally:
        servers.close()
    rows = [
        latency_row(
            "gateway",
            "inbound_update_to_turn_started",
            inbound,
            base_in,
            target_us=None,
            note="Bot API answer handed out -> TurnStarted; baseline: StartTurn told -> TurnStarted",
        ),
        latency_row(
            "gateway",
            "outbound_completed_to_send",
            outbound,
            base_out,
            target_us=None,
            note="TurnCompleted -> sendMessage at the Bot API; baseline: a thread POSTs it",
        ),
    ]
    for row, base in zip(rows[:2], (base_in, base_out), strict=True):
        row["baseline_p99_us"] = round(percentile(base, 99), 1)  # one plain thread hop's own tail on this machine now
        row["added_median_us"] = round(row["median_us"] - row["baseline_median_us"], 1)
    rows.append({"bench": "gateway", "metric": "idle_chat_kib", "value": round(idle_kib, 1), "chats": chats})
    rows.append({"bench": "gateway", "metric": "load_average_1min", "before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)})
    if options.json:
        print_json(rows)
    else:
        for row in rows:
            print(row)


def run(home: Path, servers: Servers, chats: int, samples: int) -> tuple[list[float], list[float], list[float], list[float], float]:
    store = home / "state.db"
    hubs = HubRegistry()
    deps = SessionDeps(
        hubs=hubs,
        open_reader=reader_opener(store),
        model=ModelSettings(model="test-model", base_url=servers.model_url, api_key="test-key"),
        clients=ModelClients(),
        tools={},
        config=MachineConfig(turn_timeout=60.0),
        store_file=store,
        home=home,
    )
    adapter = ChildSpec(
        id="telegram",
        actor=TelegramAdapter,
        kwargs={
            "token": TOKEN,
            "base_url": servers.telegram_url,
            "poll_timeout": 20.0,
            "home": home,
            "hubs": hubs,
            "policy": AccessPolicy(allowed=frozenset(), allow_all=True),
            "chats": Chats(mode="queue"),
        },
    )
    runtime = Runtime([*agent_specs(store, deps), ChildSpec(id="platforms", actor=Supervisor, args=((adapter,),))])
    runtime.reactor.at_stop(deps.clients.aclose)
    runtime.start()
    gc.collect()  # as hermes serve does once the tree started (what startup built stays out of the collector's way)
    gc.freeze()
    probe = Probe()
    try:
        user = lambda i: 10_000 + i  # noqa: E731
        for i in range(chats):
            hubs.get(f"agent:main:telegram:dm:{user(i)}").subscribe(probe, after_seq=0)
        before = rss_kib()
        for first in range(0, chats, 50):
            batch = range(first, min(first + 50, chats))
            for i in batch:
                servers.call("push", user(i), f"hello {i}")
            for i in batch:
                servers.call("wait_delivered", user(i), 1)
        idle_kib = (rss_kib() - before) / chats

        inbound: list[float] = []
        outbound: list[float] = []
        for n in range(samples):
            i = n % chats
            update = servers.call("push", user(i), f"sample {n}")
            turn_id = f"gw-telegram-{user(i)}-{update['message']['message_id']}"
            sent_at, _ = servers.call("wait_delivered", user(i), 2 + n // chats)[-1]
            done = probe.wait_completed(turn_id)
            inbound.append((probe.started[turn_id] - servers.call("handed", update["update_id"])) * 1e6)
            outbound.append((sent_at - done) * 1e6)

        base_in: list[float] = []
        base_out: list[float] = []
        registry = runtime.registry
        with httpx.Client() as client:
            for n in range(samples):
                session = f"agent:main:telegram:dm:{user((n + chats // 2) % chats)}"  # the same sessions, as idle as the samples'
                turn_id = f"base-{n}"
                told = time.monotonic()
                tell_session(registry, registry.lookup(SESSIONS_PATH), session, StartTurn(text=f"base {n}", turn_id=turn_id))
                done = probe.wait_completed(turn_id)
                base_in.append((probe.started[turn_id] - told) * 1e6)
                chat = 90_000 + n
                client.post(f"{servers.telegram_url}/bot{TOKEN}/sendMessage", json={"chat_id": chat, "text": f"echo: base {n}"})
                base_out.append((servers.call("delivered", chat)[0][0] - done) * 1e6)
    finally:
        runtime.stop()
    return inbound, outbound, base_in, base_out, idle_kib


if __name__ == "__main__":
    main()
