"""The Telegram gateway's added latency and memory: N chats on the test Bot API server.

One process: the real tree (store, sessions, ``/platforms/telegram`` = ``TelegramAdapter``) on a
SQLite file in a temporary directory, the test Bot API server (``tests/platforms/gateway/
telegram_server.py``) and the test model server in echo mode, all on 127.0.0.1. A probe
subscribes to every chat's session hub and stamps ``time.perf_counter``-equivalent monotonic
times when the session publishes ``TurnStarted`` and ``TurnCompleted`` (in the publishing thread).

- ``warm``: N chats (default 1,000) each send one message (pushed 50 at a time); all answered.
  ``idle_chat_kib``: the process's RSS after, minus before, divided by N (session actors that
  stay, their hubs, the gateway's seen log; the chats' sessions are idle then).
- ``inbound`` (S samples, one message at a time, round robin over the N chats): from the moment
  the Bot API server hands the update out (its ``getUpdates`` answer) to ``TurnStarted`` of the
  chat's session: the HTTP answer, parsing, dedup, the decision, the ``StartTurn`` and the
  session taking it (the state file is written beside it, not before: ``_effects.py``). Baseline (same run): ``StartTurn`` told straight to a
  session of the same chats, as idle as the samples' (as the API server tells it) to ``TurnStarted``.
- ``outbound``: from ``TurnCompleted`` to the ``sendMessage`` request reaching the Bot API
  server: the hub hop, the adapter's decision, MarkdownV2, the HTTP call (the outbox is
  written beside it). Baseline: a plain thread
  woken by ``TurnCompleted`` that POSTs the same ``sendMessage`` with httpx.

The difference of the medians is the gateway's own cost; the ratio is against the baseline.
"""

from __future__ import annotations

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
from _common import latency_row, parse_options, print_header, print_json, versions

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


def main() -> None:
    options = parse_options(__doc__)
    chats = 50 if options.quick else 1000
    samples = 30 if options.quick else 300
    info = versions("pykka", "trio", "httpx", "msgspec")
    print_header("gateway", info, options.json, f"{chats} chats, {samples} samples per path", chats=chats, samples=samples)
    with tempfile.TemporaryDirectory() as tmp, ModelServer(seed=1) as model, TelegramServer() as telegram:
        home = Path(tmp)
        store = home / "state.db"
        hubs = HubRegistry()
        deps = SessionDeps(
            hubs=hubs,
            open_reader=reader_opener(store),
            model=ModelSettings(model="test-model", base_url=model.base_url, api_key="test-key"),
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
                "base_url": telegram.base_url,
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
        probe = Probe()
        try:
            user = lambda i: 10_000 + i  # noqa: E731
            for i in range(chats):
                hubs.get(f"agent:main:telegram:dm:{user(i)}").subscribe(probe, after_seq=0)
            before = rss_kib()
            for first in range(0, chats, 50):
                batch = range(first, min(first + 50, chats))
                for i in batch:
                    telegram.push(user(i), f"hello {i}")
                for i in batch:
                    telegram.wait_delivered(user(i), 1)
            idle_kib = (rss_kib() - before) / chats

            inbound: list[float] = []
            outbound: list[float] = []
            for n in range(samples):
                i = n % chats
                update = telegram.push(user(i), f"sample {n}")
                turn_id = f"gw-telegram-{user(i)}-{update['message']['message_id']}"
                sent = telegram.wait_delivered(user(i), 2 + n // chats)[-1]
                done = probe.wait_completed(turn_id)
                inbound.append((probe.started[turn_id] - telegram.handed[update["update_id"]]) * 1e6)
                outbound.append((sent.at - done) * 1e6)

            base_in: list[float] = []
            base_out: list[float] = []
            registry = runtime.registry
            client = httpx.Client()
            for n in range(samples):
                session = f"agent:main:telegram:dm:{user((n + chats // 2) % chats)}"  # the same sessions, as idle as the samples'
                turn_id = f"base-{n}"
                told = time.monotonic()
                tell_session(registry, registry.lookup(SESSIONS_PATH), session, StartTurn(text=f"base {n}", turn_id=turn_id))
                done = probe.wait_completed(turn_id)
                base_in.append((probe.started[turn_id] - told) * 1e6)
                chat = 90_000 + n
                client.post(f"{telegram.base_url}/bot{TOKEN}/sendMessage", json={"chat_id": chat, "text": f"echo: base {n}"})
                base_out.append((telegram.delivered(chat)[0].at - done) * 1e6)
            client.close()
        finally:
            runtime.stop()
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
    for row in rows:
        row["added_median_us"] = round(row["median_us"] - row["baseline_median_us"], 1)
    rows.append({"bench": "gateway", "metric": "idle_chat_kib", "value": round(idle_kib, 1), "chats": chats})
    if options.json:
        print_json(rows)
    else:
        for row in rows:
            print(row)


if __name__ == "__main__":
    main()
