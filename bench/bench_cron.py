"""The scheduler with 10,000 jobs in the store: idle CPU per minute and firing lateness p99 (goal <= 100 ms), against 10 jobs in the same run.

Each case is its own runtime (``/store`` and ``/scheduler``, in this process) over a fresh
``state.db`` seeded with the jobs (``every 1d``, anchored so that all but the ``due`` ones
come hours later). After the load, the process's CPU time is measured over an idle window in
which nothing is due (scaled to a minute: the cost of 10,000 sleeping jobs is one timer);
then the ``due`` jobs' occurrences come, spread over a second, and each one's lateness is its
claim time minus its instant (``cron_occurrences.claimed_at - at``, as the scheduler records
them). The runtime has no ``/sessions``: runs end at once as failed, so what is measured is the
scheduler alone. Medians over ``--rounds``; --json for one object per line.
"""

from __future__ import annotations

import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from _common import bench_parser, percentile, print_header, print_json, quiet_loggers, versions

import actors.agent  # noqa: F401  (loaded in hermes serve before any run: a run's first lazy import here would stall the reactor's timers)
from actors.scheduler import SCHEDULER_PATH, scheduler_spec
from actors.scheduler._actor import GetSchedulerStatus, SchedulerOptions
from actors.store import StoreWriter, open_writer
from protocols._scheduler import Job
from supervisor import ChildSpec, Runtime

DAY = 86400.0
GOAL_MS = 100.0


class _Inbox:
    """A ``reply_to`` for the scheduler's status: a queue the main thread reads."""

    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue()

    def tell(self, message: Any) -> None:
        self.queue.put(message)


def _seed(path: Path, jobs: int, due: int, first_due: float, spread: float) -> None:
    """``jobs`` daily jobs; ``due`` of them next come between ``first_due`` and ``first_due + spread``,
    the rest between 1 h and 24 h from now."""
    now = time.time()
    db = open_writer(path)
    rows = []
    for n in range(jobs):
        if n < due:
            nxt = first_due + spread * n / max(1, due)
        else:
            nxt = now + 3600 + (DAY - 7200) * (n - due) / max(1, jobs - due)
        job = Job(id=f"j{n:05d}", name=f"job {n}", prompt="report", schedule="every 1d", created_at=nxt - DAY)
        rows.append((job.id, msgspec.json.encode(job).decode(), now))
    with db:
        db.executemany("INSERT INTO cron_jobs (id, job, saved_at) VALUES (?, ?, ?)", rows)
    db.close()


def _status(runtime: Runtime, inbox: _Inbox) -> Any:
    runtime.lookup(SCHEDULER_PATH).tell(GetSchedulerStatus(reply_to=inbox))
    return inbox.queue.get(timeout=60)


def _case(jobs: int, due: int, idle: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        store = home / "state.db"
        loaded_by = time.time() + 5.0  # the load of 10,000 jobs takes well under this
        first_due = loaded_by + idle + 0.5
        _seed(store, jobs, due, first_due, 1.0)
        options = SchedulerOptions(store_file=store, home=home, max_parallel=3)
        runtime = Runtime([ChildSpec(id="store", actor=StoreWriter, args=(str(store),)), scheduler_spec(options)])
        started = time.perf_counter()
        runtime.start()
        try:
            inbox = _Inbox()
            while not _status(runtime, inbox).loaded:
                time.sleep(0.01)  # the bench's main thread only
            load_s = time.perf_counter() - started
            wait = loaded_by - time.time()
            if wait > 0:
                time.sleep(wait)  # the idle window starts at the same instant in every case
            cpu0, wall0 = time.process_time(), time.perf_counter()
            time.sleep(idle)
            cpu = time.process_time() - cpu0
            wall = time.perf_counter() - wall0
            deadline = time.monotonic() + 60
            while _status(runtime, inbox).fired < due:
                assert time.monotonic() < deadline, "the due jobs did not all fire within a minute"
                time.sleep(0.05)
        finally:
            runtime.stop(timeout=30)
        db = open_writer(store)
        late = [float(c) - float(a) for a, c in db.execute("SELECT at, claimed_at FROM cron_occurrences WHERE manual = 0")]
        db.close()
    return {
        "load_s": load_s,
        "idle_cpu_s_per_min": cpu / wall * 60.0,
        "lateness_p50_ms": statistics.median(late) * 1000,
        "lateness_p99_ms": percentile(late, 99) * 1000,
        "lateness_max_ms": max(late) * 1000,
        "fired": float(len(late)),
    }


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=200, help="jobs of the big case due in the window")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle window")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    quiet_loggers()
    if args.quick:
        args.jobs, args.due, args.idle, args.rounds = 1000, 50, 2.0, 1
    print_header("bench_cron", versions("cronsim", "pykka", "trio"), args.json, f"{args.jobs} jobs vs 10, idle {args.idle:g} s, {args.rounds} rounds")
    results: dict[str, list[dict[str, float]]] = {"baseline_10": [], f"jobs_{args.jobs}": []}
    for _ in range(args.rounds):
        results["baseline_10"].append(_case(10, 10, args.idle))
        results[f"jobs_{args.jobs}"].append(_case(args.jobs, args.due, args.idle))
    rows: list[dict[str, Any]] = []
    medians = {}
    for case, runs in results.items():
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        medians[case] = median
        rows.append({"case": case, **{k: round(v, 4) for k, v in median.items()}})
    base, big = medians["baseline_10"], medians[f"jobs_{args.jobs}"]
    rows.append(
        {
            "case": "ratio",
            "idle_cpu_ratio": round(big["idle_cpu_s_per_min"] / max(base["idle_cpu_s_per_min"], 1e-9), 3),
            "lateness_p99_ratio": round(big["lateness_p99_ms"] / max(base["lateness_p99_ms"], 1e-9), 3),
            "lateness_p99_ms": round(big["lateness_p99_ms"], 2),
            "goal_ms": GOAL_MS,
            "meets_goal": big["lateness_p99_ms"] <= GOAL_MS,
            "cpus": os.cpu_count(),
        }
    )
    if args.json:
        print_json(rows)
    else:
        for row in rows:
            print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
