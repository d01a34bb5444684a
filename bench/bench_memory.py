"""A user's turn latency with the ``store`` memory provider's prefetch, against the built-in memory only.

Two runtimes in one process, each with its own store, against one test model server that
answers every turn with the same scripted short reply (not echo mode: an echo would repeat the
recalled block and time its streaming instead). ``store``: ``memory.provider: store`` with 1,000 facts saved
first (through the store writer), so each turn first asks ``/memory/store`` for the facts
relevant to its text (FTS5 bm25) and sends them in a ``<memory-context>`` block. ``builtin``
(baseline): no external provider, no prefetch. Timed from the main thread: ``StartTurn`` told
to the session to its ``TurnCompleted``. Turns alternate after a warm-up. Reported: median /
p90 / p99 in microseconds and the ratio of medians (the prefetch's cost per turn).

Run from the repository root: ``python bench/bench_memory.py [--quick] [--json]``
"""

from __future__ import annotations

import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import latency_row, parse_options, print_header, print_json, versions

from actors.agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, reader_opener, session_address, start_agent_runtime
from actors.chaos import ModelServer, TextReply
from actors.memory import MemoryOptions
from protocols import StartTurn, Subscribe, TurnCompleted
from protocols._memory import SaveFact
from protocols._store import GetStoreStatistics

TOPICS = ("editor", "boat", "garden", "server", "kettle", "bicycle", "compiler", "violin", "harbour", "lantern")


class Events:
    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def tell(self, event: Any) -> None:
        self.queue.put(event)


def runtime(folder: Path, server: ModelServer, memory: MemoryOptions) -> Any:
    folder.mkdir()
    deps = SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(folder / "state.db"),
        model=ModelSettings(model="test-model", base_url=server.base_url, api_key="k"),
        clients=ModelClients(),
        config=MachineConfig(turn_timeout=60.0),
        idle_timeout=0,
        home=folder,
        memory=memory,
    )
    return start_agent_runtime(folder / "state.db", deps)


def main() -> None:
    options = parse_options(__doc__)
    turns = 20 if options.quick else 100
    print_header(
        "memory", versions("pykka", "trio", "msgspec", "apsw"), options.json, f"{turns} user turns each, store provider (1,000 facts) vs built-in only"
    )
    with tempfile.TemporaryDirectory() as tmp, ModelServer(seed=1) as server:
        store = runtime(Path(tmp) / "store", server, MemoryOptions(provider="store", prefetch_timeout=5.0))
        builtin = runtime(Path(tmp) / "builtin", server, MemoryOptions())
        timings: dict[str, list[float]] = {"store": [], "builtin": []}
        try:
            writer = store.lookup("/store")
            for n in range(1_000):
                topic = TOPICS[n % len(TOPICS)]
                writer.tell(SaveFact(content=f"Fact {n}: the user's {topic} number {n} is kept in room {n % 37}.", saved_at=time.time()))
            writer.ask(GetStoreStatistics(), timeout=60)
            subscribers = {}
            for name, rt in (("store", store), ("builtin", builtin)):
                server.script([TextReply(content="noted") for _ in range(turns + 5)], session=f"bench-{name}")
                events = subscribers[name] = Events()
                session_address(rt.registry, rt.lookup("/sessions"), f"bench-{name}").tell(Subscribe(subscriber=events))
            for n in range(turns + 5):
                order = (("store", store), ("builtin", builtin)) if n % 2 == 0 else (("builtin", builtin), ("store", store))
                for name, rt in order:
                    events = subscribers[name]
                    started = time.perf_counter()
                    text = f"where is my {TOPICS[n % len(TOPICS)]} number {n}?"
                    session_address(rt.registry, rt.lookup("/sessions"), f"bench-{name}").tell(StartTurn(text=text))
                    while not isinstance(events.queue.get(timeout=30), TurnCompleted):
                        pass
                    if n >= 5:
                        timings[name].append((time.perf_counter() - started) * 1e6)
        finally:
            store.stop(timeout=30)
            builtin.stop(timeout=30)
    row = latency_row("memory", "user_turn", timings["store"], timings["builtin"], target_us=None, note="store provider prefetch over 1,000 facts")
    if options.json:
        print_json([row])
    else:
        print(
            f"user turn with the store provider: median {row['median_us']:.0f} us, p90 {row['p90_us']:.0f} us; "
            f"built-in only: median {row['baseline_median_us']:.0f} us; ratio {row['ratio']}"
        )


if __name__ == "__main__":
    main()
