"""Added latency of hooks per tool call: the pre_tool_call dispatch of 1 and of 5 in-process
no-op plugin hooks (well-behaved plugins share one lane: one thread hand-off per call; goal
<= 20 us each) and of 1 shell hook
(goal <= 15 ms, spawn included), against a call with no hook, all in one run. Two floors in the
same run: the round trip reactor -> another thread -> reactor with nothing else in it: a
``queue.SimpleQueue`` there and a ``threading.Lock`` the reactor blocks on back (the path a quick
plugin's answer takes), ``TrioToken.run_sync_soon`` back (a trio wake-up), and a pykka ``tell``.
Medians; --json for one object per line."""

from __future__ import annotations

import argparse
import json
import platform
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pykka
import trio

from actors.hooks import Hooks, hooks_spec
from actors.hooks._plugins import discover
from actors.hooks._shell import shell_hooks
from actors.hooks._unit import UnitSource
from supervisor import Runtime


def _measure(runtime: Runtime, hooks: Hooks | None, rounds: int) -> list[float]:
    out: queue.Queue[list[float]] = queue.Queue()

    async def run() -> None:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            if hooks is not None and hooks.wants("pre_tool_call", "terminal"):
                await hooks.call(
                    "pre_tool_call", {"tool_name": "terminal", "args": {"command": "ls"}, "task_id": "s"}, tool_name="terminal", stop_at_block=True
                )
            times.append(time.perf_counter() - started)
        out.put(times)

    runtime.reactor.call_soon(trio.lowlevel.spawn_system_task, run)
    return out.get(timeout=600)


BLOCKS = 10


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        message()  # wake the reactor
        return None


def _floor(runtime: Runtime, rounds: int, via: str) -> list[float]:
    """Round trips reactor -> thread -> reactor that do nothing else (the hop's floor)."""
    out: queue.Queue[list[float]] = queue.Queue()
    jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def serve() -> None:
        while (job := jobs.get()) is not None:
            job()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    echo = _Echo.start()

    async def run() -> None:
        wake = trio.lowlevel.current_trio_token().run_sync_soon
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            done = trio.Event()
            if via == "lock":  # the thread releases a lock the reactor blocks on (the GIL released)
                lock = threading.Lock()
                lock.acquire()
                jobs.put(lock.release)
                lock.acquire(timeout=10)
                times.append(time.perf_counter() - started)
                continue
            if via == "simplequeue":
                jobs.put(lambda done=done: wake(done.set))
            else:
                echo.tell(lambda done=done: wake(done.set))
            with trio.move_on_after(10):
                await done.wait()
            times.append(time.perf_counter() - started)
        out.put(times)

    try:
        runtime.reactor.call_soon(trio.lowlevel.spawn_system_task, run)
        return out.get(timeout=600)
    finally:
        jobs.put(None)
        echo.stop()


def _plugins(home: Path, names: list[str]) -> Hooks:
    for name in names:
        plugin = home / "plugins" / name
        plugin.mkdir(parents=True)
        (plugin / "plugin.yaml").write_text(f"name: {name}\n")
        (plugin / "__init__.py").write_text('def register(ctx):\n    ctx.register_hook("pre_tool_call", lambda **kw: None)\n')
    manifests, _ = discover(home)
    return Hooks([UnitSource("plugin", m) for m in manifests if m.name in names], [], env={})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--shell-rounds", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps({"python": sys.version.split()[0], "platform": platform.platform(), "trio": trio.__version__}), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        plugins = _plugins(home, [f"noop{n}" for n in range(5)])
        one = _plugins(home / "one", ["single"])
        shell, _ = shell_hooks({"pre_tool_call": [{"command": "true", "matcher": "terminal"}]})
        one_shell = Hooks([], shell, env={})
        runtime = Runtime([hooks_spec()]).start()
        try:
            plugins.bind(runtime.registry, runtime.reactor)
            one.bind(runtime.registry, runtime.reactor)
            one_shell.bind(runtime.registry, runtime.reactor)
            _measure(runtime, plugins, 200)  # warm up: imports done, events known
            _measure(runtime, one, 200)
            # Interleaved in blocks, so a change of load on the machine hits every case alike.
            samples: dict[str, list[float]] = {"base": [], "lock": [], "queue": [], "pykka": [], "single": [], "five": []}
            block = max(1, args.rounds // BLOCKS)
            for _ in range(BLOCKS):
                samples["base"] += _measure(runtime, None, block)
                samples["lock"] += _floor(runtime, block, "lock")
                samples["queue"] += _floor(runtime, block, "simplequeue")
                samples["pykka"] += _floor(runtime, block, "pykka")
                samples["single"] += _measure(runtime, one, block)
                samples["five"] += _measure(runtime, plugins, block)
            base, floor_lock, floor_queue, floor_pykka, single, five = (
                statistics.median(samples[k]) for k in ("base", "lock", "queue", "pykka", "single", "five")
            )
            spawn = statistics.median(_measure(runtime, one_shell, args.shell_rounds))
        finally:
            runtime.stop(timeout=10)
    rows: list[dict[str, Any]] = [
        {"case": "no_hooks", "median_us": round(base * 1e6, 2)},
        {"case": "floor_lock_hop", "median_us": round(floor_lock * 1e6, 2)},
        {"case": "floor_simplequeue_hop", "median_us": round(floor_queue * 1e6, 2)},
        {"case": "floor_pykka_hop", "median_us": round(floor_pykka * 1e6, 2)},
        {
            "case": "1_plugin_noop",
            "median_us": round(single * 1e6, 2),
            "added_us_each": round((single - base) * 1e6, 2),
            "goal_us_each": 20,
            "vs_lock_floor": round(single / floor_lock, 2) if floor_lock else None,
        },
        {
            "case": "5_plugin_noops",
            "median_us": round(five * 1e6, 2),
            "added_us_each": round((five - base) * 1e6 / 5, 2),
            "goal_us_each": 20,
            "ratio": round(five / base, 1) if base else None,
            "vs_lock_floor": round(five / floor_lock, 2) if floor_lock else None,
        },
        {"case": "1_shell_hook", "median_ms": round(spawn * 1e3, 2), "added_ms": round((spawn - base) * 1e3, 2), "goal_ms": 15},
    ]
    for row in rows:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
