"""A user's turn latency with background reviews forked after every turn, against none.

Two runtimes in one process, each with its own store, against one test model server (echo
mode: every reply is immediate). ``review`` forks a memory review after every user turn
(``memory.nudge_interval: 1``): a child session that makes its own model call while the
user's next turn runs. ``off`` (baseline): the same sessions without nudges. Timed from the
main thread: ``StartTurn`` told to the session to its ``TurnCompleted`` on a subscriber queue.
Turns alternate between the two runtimes after a warm-up. Reported: median / p90 / p99 in
microseconds and the ratio of medians (goal: about 1, reviews run off the user's path).

Run from the repository root: ``python bench/bench_review.py [--quick] [--json]``
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
from actors.agent._nudges import NudgeSettings
from actors.chaos import ModelServer
from actors.tools import REGISTRY
from protocols import ReviewFinished, StartTurn, Subscribe, TurnCompleted


class Events:
    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def tell(self, event: Any) -> None:
        self.queue.put(event)


def runtime(folder: Path, server: ModelServer, nudges: NudgeSettings) -> Any:
    folder.mkdir()
    tools = {n: REGISTRY.get(n).spec() for n in ("memory", "skill_manage", "skill_view", "skills_list")}
    deps = SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(folder / "state.db"),
        model=ModelSettings(model="test-model", base_url=server.base_url, api_key="k"),
        clients=ModelClients(),
        tools=tools,
        config=MachineConfig(traits={n: t.traits for n, t in tools.items()}, turn_timeout=60.0),
        idle_timeout=0,
        home=folder,
        nudges=nudges,
    )
    return start_agent_runtime(folder / "state.db", deps)


def main() -> None:
    options = parse_options(__doc__)
    turns = 20 if options.quick else 100
    print_header("review", versions("pykka", "trio", "msgspec"), options.json, f"{turns} user turns each, review after every turn vs none")
    with tempfile.TemporaryDirectory() as tmp, ModelServer(seed=1) as server:
        on = runtime(Path(tmp) / "on", server, NudgeSettings(memory_interval=1, min_turns=0, skill_interval=0))
        off = runtime(Path(tmp) / "off", server, NudgeSettings.OFF)
        timings: dict[str, list[float]] = {"review": [], "off": []}
        reviews = 0
        try:
            subscribers = {}
            for name, rt in (("review", on), ("off", off)):
                events = subscribers[name] = Events()
                session_address(rt.registry, rt.lookup("/sessions"), "bench").tell(Subscribe(subscriber=events))
            for n in range(turns + 5):
                order = (("review", on), ("off", off)) if n % 2 == 0 else (("off", off), ("review", on))
                for name, rt in order:
                    events = subscribers[name]
                    started = time.perf_counter()
                    session_address(rt.registry, rt.lookup("/sessions"), "bench").tell(StartTurn(text=f"message {n}"))
                    while True:
                        event = events.queue.get(timeout=30)
                        if isinstance(event, ReviewFinished):
                            reviews += 1
                        if isinstance(event, TurnCompleted):
                            break
                    if n >= 5:
                        timings[name].append((time.perf_counter() - started) * 1e6)
        finally:
            on.stop(timeout=30)
            off.stop(timeout=30)
    row = latency_row("review", "user_turn", timings["review"], timings["off"], target_us=None, note=f"{reviews} reviews finished during the run")
    if options.json:
        print_json([row])
    else:
        print(
            f"user turn with reviews: median {row['median_us']:.0f} us, p90 {row['p90_us']:.0f} us; without: median {row['baseline_median_us']:.0f} us; ratio {row['ratio']}; {reviews} reviews finished"
        )


if __name__ == "__main__":
    main()
