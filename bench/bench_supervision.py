"""Cost of supervision: spawning a child, restarting a crashed one, and holding 1,000 idle.

Measured, each against a raw pykka baseline in the same invocation:

- ``spawn``: ``runtime.start_child("/sessions", id)`` on a ``supervisor.DynamicSupervisor``
  until the new child answers ``address.ask``. Baseline: ``pykka.ThreadingActor.start()``
  followed by ``ref.ask``.
- ``restart``: tell a child of the root supervisor a message that makes it raise, then
  ``address.ask`` it at once; measured until the *next* incarnation answers (the answer
  carries the incarnation number, which is checked). The root's intensity is raised so
  the bench never escalates, and there is no backoff. Baseline: a plain pykka actor told
  the same message dies; the caller waits for ``ref.actor_stopped``, starts a new actor and
  asks it. Target: median <= 10 ms.
- ``idle_rss``: VmRSS growth per actor after starting N (1,000) children of a
  ``DynamicSupervisor`` and waiting until every one answered an ``ask``; baseline: N raw
  ``pykka.ThreadingActor``s. Each side runs in a fresh child interpreter of this script
  (``--rss-worker``) so that neither inherits the other's freed thread stacks and heap;
  the same child also times starting all N until all answered, and stopping them all.

Run from the repository root: ``python bench/bench_supervision.py [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import pykka
from _common import (
    bench_parser,
    latency_row,
    print_header,
    print_json,
    quiet_loggers,
    versions,
)

from actors import Actor
from supervisor import ChildSpec, DynamicSupervisor, Intensity, Restart, Runtime

RESTART_TARGET_US = 10_000.0
NO_ESCALATION = Intensity(max_restarts=1_000_000, within=1.0)
"""The bench crashes an actor hundreds of times a second on purpose."""


class Ping(msgspec.Struct, frozen=True, kw_only=True):
    """Answered with the incarnation number (1 for raw pykka actors)."""


class Crash(msgspec.Struct, frozen=True, kw_only=True):
    """Makes the receiving actor raise."""


class Boom(Exception):
    """The intentional crash."""


class Worker(Actor):
    """Answers Ping with its incarnation; raises on Crash."""

    def receive(self, message: Any) -> Any:
        if type(message) is Ping:
            assert self.context is not None
            return self.context.incarnation
        if type(message) is Crash:
            raise Boom("crash requested by the bench")
        return super().receive(message)


class RawWorker(pykka.ThreadingActor):
    """Baseline: the same on a plain pykka actor."""

    use_daemon_thread = True

    def on_receive(self, message: Any) -> Any:
        if type(message) is Ping:
            return 1
        if type(message) is Crash:
            raise Boom("crash requested by the bench")
        return None


def runtime_children() -> list[ChildSpec]:
    template = ChildSpec(id="session", actor=Worker, restart=Restart.TEMPORARY)
    return [
        ChildSpec(id="sessions", actor=DynamicSupervisor, args=(template,), kwargs={"intensity": NO_ESCALATION}),
        ChildSpec(id="worker", actor=Worker),
    ]


# -- spawn and restart ------------------------------------------------------------------------


def spawn_samples(runtime: Runtime, prefix: str, n: int, raw_refs: list[Any]) -> tuple[list[float], list[float]]:
    """``n`` spawns on each side, alternating; microseconds. Raw refs go to ``raw_refs``."""
    ping = Ping()
    clock = time.perf_counter_ns
    samples: list[float] = []
    raw_samples: list[float] = []
    for index in range(n):
        start = clock()
        address = runtime.start_child("/sessions", f"{prefix}-{index}")
        answer = address.ask(ping)
        samples.append((clock() - start) / 1000)
        assert answer == 1, answer

        start = clock()
        ref = RawWorker.start()
        answer = ref.ask(ping)
        raw_samples.append((clock() - start) / 1000)
        raw_refs.append(ref)
    return samples, raw_samples


def restart_samples(runtime: Runtime, n: int) -> tuple[list[float], list[float]]:
    """``n`` crash -> next incarnation answers, on each side, alternating; microseconds."""
    ping, crash = Ping(), Crash()
    clock = time.perf_counter_ns
    address = runtime.lookup("/worker")
    incarnation = address.ask(ping)
    raw = RawWorker.start()
    raw.ask(ping)
    samples: list[float] = []
    raw_samples: list[float] = []
    try:
        for _ in range(n):
            start = clock()
            address.tell(crash)
            answer = address.ask(ping)
            samples.append((clock() - start) / 1000)
            if answer != incarnation + 1:
                msg = f"expected incarnation {incarnation + 1} to answer, got {answer}"
                raise AssertionError(msg)
            incarnation = answer

            start = clock()
            raw.tell(crash)
            if not raw.actor_stopped.wait(10):
                msg = "the raw pykka actor did not stop after its crash"
                raise AssertionError(msg)
            raw = RawWorker.start()
            raw.ask(ping)
            raw_samples.append((clock() - start) / 1000)
    finally:
        raw.stop(block=False)
    return samples, raw_samples


# -- idle RSS (in a child interpreter) ------------------------------------------------------------


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    msg = "no VmRSS in /proc/self/status"
    raise RuntimeError(msg)


def rss_worker(side: str, count: int) -> dict[str, Any]:
    """Start ``count`` idle actors on one side; report RSS growth and timings."""
    ping = Ping()
    if side == "runtime":
        runtime = Runtime(runtime_children(), intensity=NO_ESCALATION).start()
        runtime.start_child("/sessions", "warmup").ask(ping)  # first-use costs are not per actor
        gc.collect()
        before = rss_kib()
        start = time.perf_counter()
        addresses = [runtime.start_child("/sessions", f"idle-{i}") for i in range(count)]
        for address in addresses:
            address.ask(ping)
        started = time.perf_counter() - start
        gc.collect()
        after = rss_kib()
        threads = threading.active_count()
        start = time.perf_counter()
        stopped_in_time = runtime.stop()
        stopped = time.perf_counter() - start
    else:
        RawWorker.start().ask(ping)
        gc.collect()
        before = rss_kib()
        start = time.perf_counter()
        refs = [RawWorker.start() for _ in range(count)]
        for ref in refs:
            ref.ask(ping)
        started = time.perf_counter() - start
        gc.collect()
        after = rss_kib()
        threads = threading.active_count()
        start = time.perf_counter()
        pykka.ActorRegistry.stop_all(block=True)
        stopped = time.perf_counter() - start
        stopped_in_time = True
    return {
        "side": side,
        "count": count,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_actor": (after - before) / count,
        "threads": threads,
        "start_all_ms": started * 1000,
        "stop_all_ms": stopped * 1000,
        "stopped_in_time": stopped_in_time,
    }


def run_rss_worker(side: str, count: int) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, "--rss-worker", side, "--count", str(count)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if completed.returncode != 0:
        msg = f"the {side} RSS worker failed ({completed.returncode}):\n{completed.stderr}"
        raise RuntimeError(msg)
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


# -- output -----------------------------------------------------------------------------------


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    print(f"{'metric':<10} {'median us':>10} {'p90 us':>9} {'p99 us':>9} {'base us':>9} {'base p90':>9} {'ratio':>6} {'n':>5}  note")
    latency = [r for r in rows if "median_us" in r]
    for r in latency:
        target = ""
        if "target_median_us" in r:
            target = f" [target <= {r['target_median_us'] / 1000:g} ms: {'ok' if r['meets_target'] else 'MISS'}]"
        print(
            f"{r['metric']:<10} {r['median_us']:>10.1f} {r['p90_us']:>9.1f} {r['p99_us']:>9.1f} {r['baseline_median_us']:>9.1f} "
            f"{r['baseline_p90_us']:>9.1f} {r['ratio']:>6.2f} {r['n']:>5}  {r['note']}{target}"
        )
    for r in rows:
        if r["metric"] != "idle_rss":
            continue
        print(
            f"\nidle_rss ({r['count']} actors, median of {r['runs']} fresh interpreters per side)\n"
            f"{'':<18} {'runtime':>10} {'raw pykka':>10} {'ratio':>6}\n"
            f"{'KiB per actor':<18} {r['kib_per_actor']:>10.1f} {r['baseline_kib_per_actor']:>10.1f} {r['ratio']:>6.2f}\n"
            f"{'start all, ms':<18} {r['start_all_ms']:>10.1f} {r['baseline_start_all_ms']:>10.1f} "
            f"{r['start_all_ms'] / r['baseline_start_all_ms']:>6.2f}\n"
            f"{'stop all, ms':<18} {r['stop_all_ms']:>10.1f} {r['baseline_stop_all_ms']:>10.1f} "
            f"{r['stop_all_ms'] / r['baseline_stop_all_ms']:>6.2f}"
        )


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--rss-worker", choices=("runtime", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1000, help="idle actors per side (default 1000)")
    options = parser.parse_args()
    quiet_loggers()

    if options.rss_worker:
        print(json.dumps(rss_worker(options.rss_worker, options.count)))
        return 0

    spawns = 40 if options.quick else 300
    restarts = 40 if options.quick else 400
    rss_runs = 1 if options.quick else 3
    count = min(options.count, 250) if options.quick else options.count

    text = f"spawns {spawns}, restarts {restarts} per side; idle actors {count} x {rss_runs} runs per side\n"
    print_header("supervision", versions("pykka", "trio", "msgspec"), options.json, text)

    runtime = Runtime(runtime_children(), intensity=NO_ESCALATION).start()
    raw_refs: list[Any] = []
    try:
        runtime.lookup("/worker").ask(Ping())  # the tree is up
        spawn_samples(runtime, "warmup", 10, raw_refs)
        spawn, raw_spawn = spawn_samples(runtime, "session", spawns, raw_refs)
        restart_samples(runtime, 10)
        restart, raw_restart = restart_samples(runtime, restarts)
    finally:
        for ref in raw_refs:
            ref.stop(block=False)
        stopped = runtime.stop()
    if not stopped:
        print("warning: the runtime did not stop within its timeout", file=sys.stderr)

    rss = [run_rss_worker("runtime", count) for _ in range(rss_runs)]
    raw_rss = [run_rss_worker("raw", count) for _ in range(rss_runs)]

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(run[key] for run in runs))

    rows = [
        latency_row(
            "supervision",
            "spawn",
            spawn,
            raw_spawn,
            target_us=None,
            note="start_child + ask / ThreadingActor.start + ask",
            baseline_p90=True,
        ),
        latency_row(
            "supervision",
            "restart",
            restart,
            raw_restart,
            target_us=RESTART_TARGET_US,
            note="crash -> next incarnation answers ask",
            baseline_p90=True,
        ),
        {
            "bench": "supervision",
            "metric": "idle_rss",
            "kib_per_actor": round(med(rss, "kib_per_actor"), 1),
            "baseline_kib_per_actor": round(med(raw_rss, "kib_per_actor"), 1),
            "ratio": round(med(rss, "kib_per_actor") / med(raw_rss, "kib_per_actor"), 2),
            "start_all_ms": round(med(rss, "start_all_ms"), 1),
            "baseline_start_all_ms": round(med(raw_rss, "start_all_ms"), 1),
            "stop_all_ms": round(med(rss, "stop_all_ms"), 1),
            "baseline_stop_all_ms": round(med(raw_rss, "stop_all_ms"), 1),
            "threads": rss[0]["threads"],
            "baseline_threads": raw_rss[0]["threads"],
            "stopped_in_time": all(run["stopped_in_time"] for run in rss),
            "count": count,
            "runs": rss_runs,
            "note": "VmRSS growth per idle actor, fresh interpreter per side",
        },
    ]
    emit(rows, options.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
