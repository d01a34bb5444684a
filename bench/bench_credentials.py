"""Credential pool: what leasing a key adds to a model call, with 1,000 sessions on one pool.

Every model call of a session leases a key from its provider's pool actor and reports how the
call went: ``LeaseKey`` (session -> pool), ``KeyLeased`` (pool -> session), ``ReportKey``
(session -> pool). This bench times that cycle with 1,000 callers on one pool, against the
same messages answered by an echo actor, in the same invocation.

The runtime is a real ``supervisor.Runtime``: ``/store`` (a ``StoreWriter`` on a temporary
store file), ``/credentials`` (``credential_specs`` with one provider of 8 keys,
``PoolOptions(store_file=..., store_path="/store")``, default save debounce), ``/echo``, and
``/callers``, a ``DynamicSupervisor`` with 1,000 ``Caller`` actors (one thread each, as
sessions have). A caller, told ``Start``, repeats ``cycles`` times: look the target up in the
registry (as a session does for each lease and each report), tell it
``LeaseKey(reply_to=its address)``; on ``KeyLeased`` tell ``ReportKey(ok=True, tokens)`` and
lease again at once. So every caller always has a lease asked for or held; the pool's
``in_flight``, sampled halfway through each pool round, is 500-1,000 (a caller may lose the
GIL between its report and its next lease).

- ``cycle_wall``: time from the driver's first ``Start`` to the last caller's last
  ``KeyLeased``, divided by callers x cycles. With 1,000 callers leasing back to back this is
  the inverse of the throughput: what one lease + report costs the process.
- ``cycle_cpu``: process CPU time (all threads) over the same span, divided the same way.
- Baseline ``echo``: the same callers, the same messages and round trips, to ``/echo``, which
  answers each ``LeaseKey`` at once with a constant ``KeyLeased`` and drops each
  ``ReportKey``. Pool and echo rounds alternate (ABBA), after one warm-up round each.
- ``added`` = median pool cycle - median echo cycle: what the pool's decisions and state
  cost per model call, pykka's message passing subtracted. Goal (issue 14): <= 50 us (a
  ``--quick`` run is too short to judge it and gives no verdict).
- ``lease_wait``: each caller's time from telling ``LeaseKey`` to handling ``KeyLeased``. At
  this load it is queueing (1,000 requests in one inbox), not what a session waits for a key
  when leases are spread out.
- ``core``: the pure core alone, no actors, no messages: ``report`` of the oldest lease
  (FIFO, a ``ReportKey`` built per cycle) then ``lease`` of a new id, on a ``PoolState`` with
  1,000 leases in flight and ``SETTLED_KEEP`` settled ids; ``core_1`` the same with one
  lease in flight (the difference is what grows with ``in_flight``; lookups in the settled
  ids are in both). ``--profile`` adds the core's cProfile top functions.

At the end the pool's status must show every lease reported, warm-up included (``in_flight``
0, successes = leases told); the bench exits with status 1 otherwise.

Run from the repository root: ``python bench/bench_credentials.py [--quick] [--json]``.
Bounded run time: about 15 s (about 4 s with ``--quick``); ~1,000 threads.
"""

from __future__ import annotations

import cProfile
import pstats
import queue
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
from _common import bench_parser, percentile, print_header, print_json, quiet_loggers, versions

from actors import Actor, Address
from actors.credentials import (
    SETTLED_CHUNK,
    SETTLED_KEEP,
    STRATEGIES,
    KeySpec,
    PoolOptions,
    PoolState,
    ProviderSpec,
    credential_specs,
    lease,
    pool_address,
    pool_path,
    report,
    restore,
    settled_lease_ids,
)
from actors.store import StoreWriter
from protocols import KeyLeased, LeaseKey, NoKeyAvailable, PoolStatus, PoolStatusRequest, ReportKey
from supervisor import ChildSpec, DynamicSupervisor, Restart, Runtime

GOAL_ADDED_US = 50.0
PROVIDER = "openai"
KEYS = tuple(KeySpec(key_id=f"key-{n}", api_key=f"sk-bench-{n:02d}-0123456789abcdef{n:04d}") for n in range(1, 9))
ECHO_PATH = "/echo"
DEADLINE = 120.0
"""Seconds the driver waits for any answer before it gives up."""
INPUT_TOKENS, OUTPUT_TOKENS = 1_200, 300
"""What each report counts (a model call's usage)."""


# -- messages of the bench ------------------------------------------------------------------------


class Start(msgspec.Struct, frozen=True, kw_only=True):
    """Run ``cycles`` lease + report cycles against the actor at ``target``, then tell ``done``."""

    target: str
    """A registry path: the pool's or the echo's."""
    cycles: int
    tag: str
    """Part of each lease id, so ids stay unique across rounds."""
    done: Any
    """Local-only: where ``Finished`` is told."""


class Finished(msgspec.Struct, frozen=True, kw_only=True):
    at: float
    """``perf_counter()`` when the last ``KeyLeased`` was handled."""
    waits: list[float]
    """Seconds from each ``LeaseKey`` told to its ``KeyLeased`` handled."""
    error: str = ""


class Ready(msgspec.Struct, frozen=True, kw_only=True):
    """Asked once per caller after the start: the answer means its thread runs."""


# -- the actors -----------------------------------------------------------------------------------


class Caller(Actor[Any]):
    """A session reduced to its key traffic: lease, report, lease again."""

    def started(self) -> None:
        assert self.context is not None
        self.registry = self.context.registry
        self.run: Start | None = None
        self.count = 0
        self.asked_at = 0.0
        self.waits: list[float] = []

    def receive(self, message: Any) -> Any:
        match message:
            case KeyLeased(lease_id=lease_id, key_id=key_id):
                now = time.perf_counter()
                self.waits.append(now - self.asked_at)
                run = self._run()
                self.registry.lookup(run.target).tell(
                    ReportKey(lease_id=lease_id, key_id=key_id, ok=True, input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS)
                )
                self.count += 1
                if self.count < run.cycles:
                    self._lease(run)
                else:
                    run.done.tell(Finished(at=now, waits=self.waits))
            case Start():
                self.run, self.count, self.waits = message, 0, []
                self._lease(message)
            case NoKeyAvailable(reason=reason):
                self._run().done.tell(Finished(at=time.perf_counter(), waits=self.waits, error=reason))
            case Ready():
                return True
            case _:
                return super().receive(message)
        return None

    def _run(self) -> Start:
        assert self.run is not None, "a KeyLeased before Start"
        return self.run

    def _lease(self, run: Start) -> None:
        request = LeaseKey(lease_id=f"{self.path}/{run.tag}/{self.count}", session_id=self.path, reply_to=self.address)
        self.asked_at = time.perf_counter()
        self.registry.lookup(run.target).tell(request)


class Echo(Actor[Any]):
    """The baseline: answers each ``LeaseKey`` at once with the same ``KeyLeased``; drops reports."""

    def receive(self, message: Any) -> Any:
        match message:
            case LeaseKey(lease_id=lease_id, reply_to=reply_to):
                key = KEYS[0]
                reply_to.tell(KeyLeased(lease_id=lease_id, provider=PROVIDER, key_id=key.key_id, api_key=key.api_key, shown=key.shown))
            case ReportKey():
                pass
            case _:
                return super().receive(message)
        return None


class Inbox:
    """The driver's reply address: anything told lands in a queue."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def tell(self, message: Any) -> None:
        self.queue.put(message)

    def get(self, what: str) -> Any:
        try:
            return self.queue.get(timeout=DEADLINE)
        except queue.Empty:
            raise SystemExit(f"no {what} within {DEADLINE:g} s") from None


# -- the actor rounds -----------------------------------------------------------------------------


class Round(msgspec.Struct, kw_only=True):
    wall: float
    cpu: float
    cycles: int
    waits: list[float]
    in_flight: int | None = None
    """The pool's ``in_flight`` halfway through the round (pool rounds only)."""


def pool_status(pool: Address[Any], inbox: Inbox) -> PoolStatus:
    pool.tell(PoolStatusRequest(reply_to=inbox))
    answer = inbox.get("PoolStatus")
    assert isinstance(answer, PoolStatus), answer
    return answer


def one_round(callers: list[Address[Any]], target: str, cycles: int, tag: str, sample: Callable[[], int] | None, half: float) -> Round:
    inbox = Inbox()
    cpu0, started = time.process_time(), time.perf_counter()
    for caller in callers:
        caller.tell(Start(target=target, cycles=cycles, tag=tag, done=inbox))
    in_flight = None
    if sample is not None:
        time.sleep(half)  # the end is stamped by the callers, so this sleep is not timed
        in_flight = sample()
    finished = [inbox.get("Finished") for _ in callers]
    cpu = time.process_time() - cpu0
    errors = [f.error for f in finished if f.error]
    if errors:
        raise SystemExit(f"{len(errors)} caller(s) got no key: {errors[0]}")
    waits = [w for f in finished for w in f.waits]
    return Round(wall=max(f.at for f in finished) - started, cpu=cpu, cycles=len(waits), waits=waits, in_flight=in_flight)


def actor_rounds(db: Path, spec: ProviderSpec, callers_n: int, rounds: int, cycles: int) -> tuple[list[Round], list[Round], PoolStatus, int]:
    """Pool and echo rounds on one runtime; the pool's final status and the leases it was told."""
    template = ChildSpec(id="caller", actor=Caller, restart=Restart.TEMPORARY)
    runtime = Runtime(
        [
            ChildSpec(id="store", actor=StoreWriter, args=(str(db),)),
            credential_specs([spec], PoolOptions(store_file=db, store_path="/store")),
            ChildSpec(id=ECHO_PATH.strip("/"), actor=Echo),
            ChildSpec(id="callers", actor=DynamicSupervisor, args=(template,)),
        ]
    ).start()
    try:
        pool = pool_address(runtime.registry, spec.name)
        control = Inbox()
        pool_status(pool, control)  # answered once the saved state is loaded
        callers = [runtime.start_child("/callers", f"c{n}") for n in range(callers_n)]
        for caller in callers:
            assert caller.ask(Ready(), timeout=DEADLINE) is True
        target = {"pool": pool_path(spec.name).path, "echo": ECHO_PATH}

        def sample() -> int:
            return pool_status(pool, control).in_flight

        told = 0
        for side in ("pool", "echo"):  # warm-up: first messages, first save, allocator
            warm = one_round(callers, target[side], max(1, cycles // 4), f"warm-{side}", None, 0.0)
            told += warm.cycles if side == "pool" else 0
        pools: list[Round] = []
        echoes: list[Round] = []
        for n in range(rounds):
            order = ("pool", "echo") if n % 2 == 0 else ("echo", "pool")
            for side in order:
                if side == "pool":
                    half = pools[-1].wall / 2 if pools else 0.0
                    done = one_round(callers, target[side], cycles, f"r{n}", sample if half else None, half)
                    pools.append(done)
                    told += done.cycles
                else:
                    echoes.append(one_round(callers, target[side], cycles, f"r{n}", None, 0.0))
        final = pool_status(pool, control)
    finally:
        if not runtime.stop(timeout=DEADLINE):
            print("warning: the runtime did not stop within the deadline", file=sys.stderr)
    return pools, echoes, final, told


# -- the pure core --------------------------------------------------------------------------------


def core_cycles(spec: ProviderSpec, in_flight: int, cycles: int, profiler: cProfile.Profile | None = None) -> float:
    """Microseconds per ``report`` (oldest lease) + ``lease`` (new id) with ``in_flight`` leases held
    (``profiler``, if given, runs during the timed cycles only)."""
    now = time.time()
    state = restore(None, spec)
    held: deque[tuple[str, str]] = deque()

    def cycle(state: PoolState, lease_id: str) -> PoolState:
        old_id, key_id = held.popleft()
        state = report(state, spec, ReportKey(lease_id=old_id, key_id=key_id, ok=True, input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS), now)
        state, outcome = lease(state, spec, lease_id, now)
        held.append((lease_id, getattr(outcome, "key_id", "")))
        return state

    for n in range(in_flight):
        state, outcome = lease(state, spec, f"fill-{n}", now)
        held.append((f"fill-{n}", getattr(outcome, "key_id", "")))
    for n in range(SETTLED_KEEP + 100):  # the settled ids fill up to their cap
        state = cycle(state, f"warm-{n}")
    assert len(state.in_flight) == in_flight and len(settled_lease_ids(state)) > SETTLED_KEEP - SETTLED_CHUNK
    if profiler is not None:
        profiler.enable()
    started = time.perf_counter()
    for n in range(cycles):
        state = cycle(state, f"lease-{n}")
    elapsed = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
    return elapsed / cycles * 1e6


def core_profile(spec: ProviderSpec, cycles: int, top: int = 8) -> list[dict[str, Any]]:
    """cProfile of the timed part of ``core_cycles`` at 1,000 in flight: the functions with the
    most own time (the profiler inflates them; read the shares)."""
    profiler = cProfile.Profile()
    core_cycles(spec, 1_000, cycles, profiler)
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    total = sum(entry[2] for entry in stats.values())
    return [
        {
            "function": f"{Path(file).name}:{line}({name})",
            "calls_per_cycle": round(entry[1] / cycles, 1),
            "own_us_per_cycle": round(entry[2] / cycles * 1e6, 1),
            "share": round(entry[2] / total, 3),
        }
        for (file, line, name), entry in rows
    ]


# -- report ---------------------------------------------------------------------------------------


def per_cycle(rounds: list[Round], field: str) -> list[float]:
    return [getattr(r, field) / r.cycles * 1e6 for r in rounds]


def cycle_row(metric: str, pool: list[float], echo: list[float], shared: dict[str, Any], *, judge: bool) -> dict[str, Any]:
    """Pool against echo per cycle; ``meets_goal`` is None when not ``judge`` (a smoke run)."""
    pool_median, echo_median = statistics.median(pool), statistics.median(echo)
    added = pool_median - echo_median
    return {
        **shared,
        "metric": metric,
        "pool_median_us": round(pool_median, 1),
        "echo_median_us": round(echo_median, 1),
        "added_median_us": round(added, 1),
        "ratio": round(pool_median / echo_median, 2),
        "goal_added_us": GOAL_ADDED_US,
        "meets_goal": added <= GOAL_ADDED_US if judge else None,
        "pool_us": [round(v, 1) for v in pool],
        "echo_us": [round(v, 1) for v in echo],
    }


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    for row in rows:
        metric = row["metric"]
        if metric.startswith("cycle_"):
            verdict = {True: "met", False: "MISSED", None: "no verdict in a smoke run"}[row["meets_goal"]]
            print(
                f"{metric:<11} pool {row['pool_median_us']:>7.1f} us   echo {row['echo_median_us']:>6.1f} us   "
                f"added {row['added_median_us']:>6.1f} us (goal <= {GOAL_ADDED_US:g}: {verdict})   ratio {row['ratio']:.2f}"
            )
        elif metric == "lease_wait":
            print(
                f"{metric:<11} pool median {row['pool_median_ms']:>6.1f} ms p99 {row['pool_p99_ms']:>6.1f}   "
                f"echo median {row['echo_median_ms']:>6.1f} ms p99 {row['echo_p99_ms']:>6.1f}   (queueing at this load)"
            )
        elif metric == "in_flight":
            print(f"{metric:<11} pool in_flight halfway through the rounds: {row['samples']}; at the end {row['at_end']}")
        elif metric in ("core", "core_1"):
            print(f"{metric:<11} {row['median_us']:>7.1f} us per report + lease, {row['in_flight']:,} in flight (pure core, no actors)")
        elif metric == "core_profile":
            print("core cProfile (1,000 in flight), own time per cycle (inflated by the profiler; read the shares):")
            for entry in row["top"]:
                print(f"  {entry['own_us_per_cycle']:>7.1f} us  {entry['calls_per_cycle']:>7.1f} calls  {entry['share']:>6.1%}  {entry['function']}")
    sys.stdout.flush()


def main() -> int:
    parser = bench_parser(__doc__, quick_help="2 rounds of 3 cycles per caller, a shorter core loop, no verdict (about 4 s)")
    parser.add_argument("--callers", type=int, default=1_000, help="concurrent callers (default 1000)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="fill_first", help="the pool's strategy (default fill_first)")
    parser.add_argument("--profile", action="store_true", help="also print the pure core's cProfile top functions")
    options = parser.parse_args()
    quiet_loggers()
    rounds, cycles = (2, 3) if options.quick else (5, 8)
    core_n, core_rounds = (2_000, 3) if options.quick else (5_000, 5)
    spec = ProviderSpec(name=PROVIDER, base_url="http://127.0.0.1:1/v1", model="bench", keys=KEYS, strategy=options.strategy)
    info = versions("pykka", "trio", "msgspec")
    print_header(
        "credentials",
        info,
        options.json,
        f"{options.callers:,} callers on one pool ({len(KEYS)} keys, {options.strategy}); {rounds} rounds per side of "
        f"{options.callers * cycles:,} lease + report cycles; core {core_rounds} x {core_n:,} cycles",
        callers=options.callers,
        keys=len(KEYS),
        strategy=options.strategy,
        rounds=rounds,
        cycles_per_round=options.callers * cycles,
    )
    with tempfile.TemporaryDirectory(prefix="bench_credentials_") as tmp:
        pools, echoes, final, told = actor_rounds(Path(tmp) / "store.db", spec, options.callers, rounds, cycles)
    cores = {n: [core_cycles(spec, n, core_n) for _ in range(core_rounds)] for n in (1_000, 1)}

    shared = {"bench": "credentials", "callers": options.callers, "rounds": rounds, "cycles_per_round": options.callers * cycles}
    rows = [
        cycle_row("cycle_wall", per_cycle(pools, "wall"), per_cycle(echoes, "wall"), shared, judge=not options.quick),
        cycle_row("cycle_cpu", per_cycle(pools, "cpu"), per_cycle(echoes, "cpu"), shared, judge=not options.quick),
    ]
    pool_waits = [w * 1000 for r in pools for w in r.waits]
    echo_waits = [w * 1000 for r in echoes for w in r.waits]
    rows.append(
        {
            **shared,
            "metric": "lease_wait",
            "pool_median_ms": round(statistics.median(pool_waits), 2),
            "pool_p99_ms": round(percentile(pool_waits, 99), 2),
            "echo_median_ms": round(statistics.median(echo_waits), 2),
            "echo_p99_ms": round(percentile(echo_waits, 99), 2),
        }
    )
    samples = [r.in_flight for r in pools if r.in_flight is not None]
    rows.append({**shared, "metric": "in_flight", "samples": samples, "at_end": final.in_flight})
    for n, values in cores.items():
        rows.append(
            {
                "bench": "credentials",
                "metric": "core" if n > 1 else "core_1",
                "in_flight": n,
                "median_us": round(statistics.median(values), 1),
                "cycles": core_n,
            }
        )
    if options.profile:
        rows.append({"bench": "credentials", "metric": "core_profile", "in_flight": 1_000, "top": core_profile(spec, core_n)})
    emit(rows, options.json)

    successes = sum(k.successes for k in final.keys)
    if final.in_flight != 0 or successes != told:
        print(f"the pool's books do not balance: in_flight {final.in_flight}, successes {successes}, leases told {told}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
