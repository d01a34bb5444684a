"""Cost of the reactor hop: actor -> trio reactor thread -> actor, and how fast a cancel lands.

Measured, each against a baseline run in the same invocation on a private trio thread:

- ``wait_rtt``: an ``actors.Actor`` child of a ``supervisor.Runtime`` calls
  ``self.start_wait(noop, tag=..., timeout=5)`` (``noop`` returns at once) and stamps
  ``time.perf_counter()`` before the call and again when ``WaitFinished`` arrives; the
  actor loops N round trips itself. Baseline: a plain thread calls
  ``TrioToken.run_sync_soon(event.set)`` and waits on the ``threading.Event``
  (``baseline_task_*``: the callback spawns a trio task that awaits ``noop`` first, which
  is what a wait does). Target: median <= 300 us. ``wait_rtt_1cpu`` repeats both with
  every thread involved pinned to one CPU (removes the scheduler's thread placement).
- ``cancel_sleep``: the actor starts ``trio.sleep(30)`` as a wait, then (once the
  coroutine runs) ``self.cancel_wait(handle)``; latency from the cancel call to the actor
  receiving ``WaitFinished(status="cancelled")``. Baseline: ``run_sync_soon(scope.cancel)``
  on a task sleeping in the private trio thread, until that task signals an Event.
- ``cancel_process``: the same for ``self.run_process(["bash", "-c", "...; sleep 30; echo"])``
  (bash stays the group leader with ``sleep`` as its child). The script first writes a line
  to a FIFO, so the bench cancels once the group is running without sleeping. Baseline:
  ``trio.lowlevel.open_process`` of the same group, killed with ``os.killpg(SIGTERM)`` and
  reaped in the private trio thread. Target: median <= 50 ms. After each run the bench
  scans ``/proc`` for survivors of the group (``leftover_processes`` must be 0) and
  reports the worst reactor heartbeat lag seen (``reactor_lag_max_ms``).

Each round uses a fresh runtime and baseline thread; samples of all rounds are pooled.

Run from the repository root: ``python bench/bench_reactor.py [--quick] [--json]``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from _common import (
    can_pin,
    fifo_reader,
    group_survivors,
    latency_row,
    parse_options,
    pinned,
    print_header,
    print_json,
    versions,
)

from actors import Actor, WaitHandle
from protocols import WaitFinished
from supervisor import ChildSpec, Runtime

RTT_TARGET_US = 300.0
CANCEL_TARGET_US = 50_000.0
DEADLINE = 10.0
"""Seconds any barrier waits before the bench fails instead of hanging."""


async def noop() -> None:
    return None


async def native_thread_id() -> int:
    return threading.get_native_id()


async def long_sleep(running: threading.Event) -> None:
    running.set()
    await trio.sleep(30)


def wait_for(event: threading.Event, what: str) -> None:
    if not event.wait(DEADLINE):
        msg = f"{what} did not happen within {DEADLINE} s"
        raise AssertionError(msg)


# -- driver -> actor commands (in-process objects: they carry threading primitives) ----------


class RoundTrips:
    """Do ``n`` start_wait(noop) round trips; put the durations (s) in ``samples``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.samples: list[float] = []
        self.done = threading.Event()


class StartLong:
    """Start a long wait: ``trio.sleep(30)`` or, with ``argv``, a subprocess group."""

    def __init__(self, running: threading.Event, argv: list[str] | None = None) -> None:
        self.running = running
        self.argv = argv


class CancelLong:
    """Cancel the long wait; report cancel -> WaitFinished latency (s) and the status."""

    def __init__(self) -> None:
        self.latency = 0.0
        self.status = ""
        self.done = threading.Event()


class ReactorThreadId:
    """Ask: the reactor thread's native id (the prober learned it through a wait)."""


class ActorThreadId:
    """Ask: the prober's own native thread id."""


class Prober(Actor):
    """Does round trips through the reactor and cancels long waits, timing both itself."""

    def started(self) -> None:
        self.job: RoundTrips | None = None
        self.sent_at = 0.0
        self.long: WaitHandle | None = None
        self.cancel: CancelLong | None = None
        self.cancelled_at = 0.0
        self.reactor_thread_id = 0
        self.start_wait(native_thread_id, tag="reactor-id", timeout=5)

    def receive(self, message: Any) -> Any:
        match message:
            case WaitFinished(tag="rtt"):
                arrived = time.perf_counter()
                assert self.job is not None
                self.job.samples.append(arrived - self.sent_at)
                if len(self.job.samples) < self.job.n:
                    self._bounce()
                else:
                    self.job.done.set()
            case WaitFinished(tag="long", status=status):
                arrived = time.perf_counter()
                assert self.cancel is not None
                self.cancel.latency = arrived - self.cancelled_at
                self.cancel.status = status
                self.long = None
                self.cancel.done.set()
            case WaitFinished(tag="reactor-id", value=value):
                self.reactor_thread_id = value
            case ActorThreadId():
                return threading.get_native_id()
            case ReactorThreadId():
                return self.reactor_thread_id
            case RoundTrips():
                self.job = message
                self._bounce()
            case StartLong(argv=None, running=running):
                self.long = self.start_wait(long_sleep, running, tag="long", timeout=60)
            case StartLong(argv=list() as argv):
                self.long = self.run_process(argv, tag="long", timeout=60)
            case CancelLong():
                assert self.long is not None
                self.cancel = message
                self.cancelled_at = time.perf_counter()
                self.cancel_wait(self.long)
            case _:
                return super().receive(message)
        return None

    def _bounce(self) -> None:
        self.sent_at = time.perf_counter()
        self.start_wait(noop, tag="rtt", timeout=5)


# -- baseline: a private trio thread ---------------------------------------------------------


class TrioThread:
    """A bare ``trio.run`` in a thread, driven through its TrioToken (the baseline)."""

    def __init__(self) -> None:
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.native_id = 0
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name="bench-trio", daemon=True)

    def __enter__(self) -> TrioThread:
        self._thread.start()
        wait_for(self._ready, "the baseline trio thread start")
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self.token is not None and self._stop is not None
        self.token.run_sync_soon(self._stop.set)
        self._thread.join(DEADLINE)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self.native_id = threading.get_native_id()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def hop(self, n: int) -> list[float]:
        """``run_sync_soon(event.set)`` round trips from this thread."""
        assert self.token is not None
        samples: list[float] = []
        for _ in range(n):
            event = threading.Event()
            start = time.perf_counter()
            self.token.run_sync_soon(event.set)
            event.wait(DEADLINE)
            samples.append(time.perf_counter() - start)
        return samples

    def task(self, n: int) -> list[float]:
        """Round trips that spawn a task awaiting ``noop``, as a reactor wait does."""
        assert self.token is not None and self.nursery is not None
        nursery = self.nursery

        async def run(event: threading.Event) -> None:
            await noop()
            event.set()

        samples: list[float] = []
        for _ in range(n):
            event = threading.Event()
            start = time.perf_counter()
            self.token.run_sync_soon(nursery.start_soon, run, event)
            event.wait(DEADLINE)
            samples.append(time.perf_counter() - start)
        return samples

    def cancel_sleep(self) -> float:
        assert self.token is not None and self.nursery is not None
        running, done = threading.Event(), threading.Event()
        scope = trio.CancelScope()

        async def sleeper() -> None:
            with scope:
                running.set()
                await trio.sleep(30)
            done.set()

        self.token.run_sync_soon(self.nursery.start_soon, sleeper)
        wait_for(running, "the baseline sleep start")
        start = time.perf_counter()
        self.token.run_sync_soon(scope.cancel)
        wait_for(done, "the baseline sleep cancel")
        return time.perf_counter() - start

    def cancel_process(self, argv: list[str], fifo: str) -> tuple[float, int]:
        assert self.token is not None and self.nursery is not None
        done = threading.Event()
        scope = trio.CancelScope()

        async def child() -> None:
            process = await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            try:
                with scope:
                    await process.wait()
            finally:
                with trio.CancelScope(shield=True):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGTERM)
                    await process.wait()
                    for stream in (process.stdout, process.stderr):
                        if stream is not None:
                            await stream.aclose()
                done.set()

        with fifo_reader(fifo, DEADLINE) as wait_running:
            self.token.run_sync_soon(self.nursery.start_soon, child)
            pgid = wait_running()
        start = time.perf_counter()
        self.token.run_sync_soon(scope.cancel)
        wait_for(done, "the baseline process cancel")
        return time.perf_counter() - start, pgid


# -- subprocess helpers -----------------------------------------------------------------------


def process_argv(fifo: str) -> list[str]:
    # bash writes its pid (= the group id) to the FIFO once it runs, then stays the
    # group leader with sleep as its child.
    return ["bash", "-c", 'echo $$ > "$0"; sleep 30; echo', fifo]


# -- runs -----------------------------------------------------------------------------------------


def actor_round_trips(prober: Any, n: int) -> list[float]:
    job = RoundTrips(n)
    prober.tell(job)
    wait_for(job.done, f"{n} reactor round trips")
    return job.samples


def actor_cancel(prober: Any, argv: list[str] | None, fifo: str | None) -> tuple[float, str, int]:
    """Start a long wait, cancel it once it runs; (latency s, status, process group or 0)."""
    running = threading.Event()
    pgid = 0
    if argv is None:
        prober.tell(StartLong(running))
        wait_for(running, "the long sleep start")
    else:
        assert fifo is not None
        with fifo_reader(fifo, DEADLINE) as wait_running:
            prober.tell(StartLong(running, argv))
            pgid = wait_running()
    cancel = CancelLong()
    prober.tell(cancel)
    wait_for(cancel.done, "WaitFinished after cancel")
    return cancel.latency, cancel.status, pgid


class Results:
    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {}
        self.statuses: list[str] = []
        self.leftovers = 0
        self.base_leftovers = 0
        self.lag_max_ms = 0.0
        """Worst reactor heartbeat lateness seen (a blocked reactor thread shows here)."""

    def add(self, name: str, seconds: list[float] | float) -> None:
        values = seconds if isinstance(seconds, list) else [seconds]
        self.series.setdefault(name, []).extend(v * 1e6 for v in values)


def one_round(results: Results, *, trips: int, sleeps: int, processes: int, workdir: str) -> None:
    runtime = Runtime([ChildSpec(id="prober", actor=Prober)]).start()
    try:
        prober = runtime.lookup("/prober")
        with TrioThread() as baseline:
            # Warm up both sides.
            actor_round_trips(prober, 50)
            baseline.hop(50)
            baseline.task(50)
            results.add("wait_rtt", actor_round_trips(prober, trips))
            results.add("hop", baseline.hop(trips))
            results.add("task", baseline.task(trips))
            if can_pin():
                reactor_id = prober.ask(ReactorThreadId())
                actor_id = prober.ask(ActorThreadId())
                assert reactor_id, "the prober has not learned the reactor thread id yet"
                with pinned([reactor_id, actor_id, baseline.native_id]):
                    results.add("wait_rtt_1cpu", actor_round_trips(prober, trips // 2))
                    results.add("hop_1cpu", baseline.hop(trips // 2))
                    results.add("task_1cpu", baseline.task(trips // 2))

            for _ in range(sleeps):
                latency, status, _ = actor_cancel(prober, None, None)
                results.add("cancel_sleep", latency)
                results.statuses.append(status)
                results.add("cancel_sleep_base", baseline.cancel_sleep())

            for index in range(processes):
                fifo = os.path.join(workdir, f"running-{time.monotonic_ns()}-{index}")
                os.mkfifo(fifo)
                latency, status, pgid = actor_cancel(prober, process_argv(fifo), fifo)
                results.add("cancel_process", latency)
                results.statuses.append(status)
                results.leftovers += group_survivors(pgid)
                latency, pgid = baseline.cancel_process(process_argv(fifo), fifo)
                results.add("cancel_process_base", latency)
                results.base_leftovers += group_survivors(pgid)
                os.unlink(fifo)
        results.lag_max_ms = max(results.lag_max_ms, runtime.reactor.statistics().lag_max_ms)
    finally:
        runtime.stop()


# -- output -----------------------------------------------------------------------------------


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    header = f"{'metric':<16} {'median us':>10} {'p90 us':>10} {'p99 us':>10} {'base us':>9} {'ratio':>7} {'target':>8} {'n':>6}"
    print(header + "  note")
    for item in rows:
        target = item.get("target_median_us")
        target_text = "" if target is None else ("ok " if item["meets_target"] else "MISS ") + f"{target:g}"
        print(
            f"{item['metric']:<16} {item['median_us']:>10.1f} {item['p90_us']:>10.1f} {item['p99_us']:>10.1f} "
            f"{item['baseline_median_us']:>9.1f} {item['ratio']:>7.2f} {target_text:>8} {item['n']:>6}  {item['note']}"
        )


def main() -> int:
    options = parse_options(__doc__)

    rounds = 2 if options.quick else 5
    trips = 300 if options.quick else 2_000
    sleeps = 5 if options.quick else 20
    processes = 2 if options.quick else 5

    text = f"rounds {rounds} (fresh runtime each); per round: {trips} round trips, {sleeps} sleep cancels, {processes} process cancels\n"
    print_header("reactor", versions("pykka", "trio", "msgspec"), options.json, text)

    results = Results()
    with tempfile.TemporaryDirectory(prefix="bench-reactor-") as workdir:
        for _ in range(rounds):
            one_round(results, trips=trips, sleeps=sleeps, processes=processes, workdir=workdir)

    s = results.series
    rows = []
    for suffix, note in (("", "start_wait(noop) -> WaitFinished; base: run_sync_soon(Event.set)"), ("_1cpu", "same, all threads pinned to one CPU")):
        if "wait_rtt" + suffix not in s:
            continue
        rtt_row = latency_row("reactor", "wait_rtt" + suffix, s["wait_rtt" + suffix], s["hop" + suffix], target_us=RTT_TARGET_US, note=note)
        task = statistics.median(s["task" + suffix])
        rtt_row["baseline_task_median_us"] = round(task, 1)
        rtt_row["ratio_to_task"] = round(statistics.median(s["wait_rtt" + suffix]) / task, 2)
        rows.append(rtt_row)
    rtt = rows[0]
    note = "cancel_wait -> WaitFinished(cancelled), trio.sleep(30)"
    rows.append(latency_row("reactor", "cancel_sleep", s["cancel_sleep"], s["cancel_sleep_base"], target_us=None, note=note))
    note = "cancel_wait -> WaitFinished(cancelled), bash+sleep group"
    process_row = latency_row("reactor", "cancel_process", s["cancel_process"], s["cancel_process_base"], target_us=CANCEL_TARGET_US, note=note)
    process_row["leftover_processes"] = results.leftovers
    process_row["baseline_leftover_processes"] = results.base_leftovers
    process_row["reactor_lag_max_ms"] = round(results.lag_max_ms, 2)
    rows.append(process_row)
    wrong = [status for status in results.statuses if status != "cancelled"]
    for item in rows[-2:]:
        item["not_cancelled"] = len(wrong)
    emit(rows, options.json)
    if not options.json:
        print(
            f"\nbaseline task round trip (spawn a trio task awaiting noop): median {rtt['baseline_task_median_us']} us, "
            f"wait_rtt / task = {rtt['ratio_to_task']}"
        )
        print(f"statuses other than 'cancelled': {len(wrong)}; processes left after cancel: {results.leftovers}")
        print(f"worst reactor heartbeat lag during the run: {results.lag_max_ms:.2f} ms")
    return 0 if not wrong and results.leftovers == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
