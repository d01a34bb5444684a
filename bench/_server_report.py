"""bench_server.py's samples and report: what one concurrency level measured, its JSON row,
the goal rows, and the table.

The stack side (our API server) and the baseline side are both a :class:`Side`; a
:class:`Level` holds both plus what the server process showed at that level.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from typing import Any

from _common import percentile
from _server_procs import MODEL_LATENCY

MODEL_TIME = 2 * MODEL_LATENCY
"""The model's own time per turn: two round trips."""
ADDED_P99_TARGET_MS = 100.0
"""At C = 100."""
THROUGHPUT_RATIO_TARGET = 0.8
"""At C = 1,000, against the baseline."""


@dataclasses.dataclass
class Side:
    """Samples of one side at one concurrency level."""

    name: str
    walls: list[float] = dataclasses.field(default_factory=list)
    errors: Counter[str] = dataclasses.field(default_factory=Counter)
    warmup_errors: Counter[str] = dataclasses.field(default_factory=Counter)
    first_walls: list[float] = dataclasses.field(default_factory=list)
    """The untimed warm-up round: each session's first turn (the server creates the session)."""
    expected: int = 0
    rates: list[float] = dataclasses.field(default_factory=list)
    cpu: dict[str, float] = dataclasses.field(default_factory=lambda: {"server": 0.0, "model": 0.0, "client": 0.0})
    server_threads: dict[str, float] = dataclasses.field(default_factory=dict)
    """CPU seconds of the server's threads by name during this side's timed rounds."""
    lag_max_ms: float = 0.0
    """The server reactor's worst heartbeat lag during this side's timed rounds."""


@dataclasses.dataclass
class Level:
    concurrency: int
    turns: int
    rounds: int
    stack: Side
    base: Side
    peak_rss_kib: int = 0
    rss_kib: int = 0
    threads: int = 0
    reactor_lag_max_ms: float | None = None
    listen_overflows: int = 0
    server_errors_logged: list[str] = dataclasses.field(default_factory=list)
    stopped_cleanly: str = ""
    seconds: float = 0.0
    stagger: bool = True
    model_requests: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    """Per side: requests the model server got and over how many TCP connections."""
    client: str = "h11"
    """The stack side's HTTP client: ``h11`` (the runtime's own, one pool) or ``httpx``."""


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def side_row(side: Side) -> dict[str, Any]:
    n = len(side.walls)
    per_turn = {key: round(value * 1000 / n, 2) if n else None for key, value in side.cpu.items()}
    return {
        "turns": side.expected,
        "completed_ok": n,
        "errors": sum(side.errors.values()),
        "error_kinds": dict(side.errors),
        "warmup_errors": sum(side.warmup_errors.values()),
        "first_turn_wall_p50_ms": ms(statistics.median(side.first_walls)) if side.first_walls else None,
        "first_turn_wall_p99_ms": ms(percentile(side.first_walls, 99)) if side.first_walls else None,
        "wall_p50_ms": ms(statistics.median(side.walls)) if n else None,
        "wall_p99_ms": ms(percentile(side.walls, 99)) if n else None,
        "added_p50_ms": ms(statistics.median(side.walls) - MODEL_TIME) if n else None,
        "added_p99_ms": ms(percentile(side.walls, 99) - MODEL_TIME) if n else None,
        "turns_per_s": round(statistics.median(side.rates), 1) if side.rates else None,
        "cpu_ms_per_turn": per_turn,
        "server_cpu_ms_per_turn_by_thread": {
            name: round(seconds * 1000 / n, 2)
            for name, seconds in sorted(side.server_threads.items(), key=lambda item: -item[1])
            if n and seconds * 1000 / n >= 0.01
        },
    }


def level_row(level: Level) -> dict[str, Any]:
    stack, base = side_row(level.stack), side_row(level.base)
    row: dict[str, Any] = {
        "bench": "server",
        "concurrency": level.concurrency,
        "rounds": level.rounds,
        "turns_per_client_per_round": level.turns,
        "turns_per_session": 1 + level.rounds * level.turns,
        "stack_client": level.client,
        "stack": stack,
        "baseline": base,
    }
    if stack["turns_per_s"] and base["turns_per_s"]:
        row["throughput_ratio"] = round(stack["turns_per_s"] / base["turns_per_s"], 2)
    if stack["wall_p50_ms"] and base["wall_p50_ms"]:
        row["wall_p50_ratio"] = round(stack["wall_p50_ms"] / base["wall_p50_ms"], 2)
    row["server"] = {
        "peak_rss_mib": round(level.peak_rss_kib / 1024, 1),
        "rss_end_mib": round(level.rss_kib / 1024, 1),
        "threads_end": level.threads,
        "reactor_lag_max_ms": level.reactor_lag_max_ms,
        "errors_logged": len(level.server_errors_logged),
        "stop": level.stopped_cleanly,
    }
    row["model_requests"] = level.model_requests
    row["host_listen_overflows"] = level.listen_overflows
    row["seconds"] = round(level.seconds, 1)
    return row


def goal_rows(rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    goals = []
    if 100 in rows:
        measured = rows[100]["stack"]["added_p99_ms"]
        baseline = rows[100]["baseline"]["added_p99_ms"]
        goals.append(
            {
                "bench": "server",
                "goal": "C=100 p99 added <= 100 ms",
                "measured_ms": measured,
                "baseline_ms": baseline,
                "met": measured is not None and measured <= ADDED_P99_TARGET_MS,
            }
        )
    if 1000 in rows:
        stack = rows[1000]["stack"]
        goals.append(
            {
                "bench": "server",
                "goal": "C=1000 0 errors",
                "measured": stack["errors"] + stack["warmup_errors"],
                "met": stack["errors"] + stack["warmup_errors"] == 0,
            }
        )
        goals.append(
            {
                "bench": "server",
                "goal": "C=1000 every turn completes",
                "measured": f"{stack['completed_ok']}/{stack['turns']}",
                "met": stack["completed_ok"] == stack["turns"],
            }
        )
        ratio = rows[1000].get("throughput_ratio")
        goals.append(
            {
                "bench": "server",
                "goal": "C=1000 throughput >= 80% of baseline",
                "measured": ratio,
                "met": ratio is not None and ratio >= THROUGHPUT_RATIO_TARGET,
            }
        )
    return goals


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'C':>5} {'side':<9} {'turns':>6} {'err':>4} {'wall p50':>9} {'p99':>7} {'added p50':>10} {'p99':>7} {'turns/s':>8} {'ratio':>6}  cpu ms/turn server/model/client"
    )
    for row in rows:
        for name in ("stack", "baseline"):
            side = row[name]
            cpu = side["cpu_ms_per_turn"]
            ratio = row.get("throughput_ratio") if name == "stack" else None
            print(
                f"{row['concurrency']:>5} {name:<9} {side['turns']:>6} {side['errors']:>4} {side['wall_p50_ms'] or 0:>9.1f} {side['wall_p99_ms'] or 0:>7.1f} "
                f"{side['added_p50_ms'] or 0:>10.1f} {side['added_p99_ms'] or 0:>7.1f} {side['turns_per_s'] or 0:>8.1f} {'' if ratio is None else f'{ratio:.2f}':>6}  "
                f"{cpu['server'] or 0:.2f} / {cpu['model'] or 0:.2f} / {cpu['client'] or 0:.2f}"
            )
        server = row["server"]
        kinds = {**row["stack"]["error_kinds"], **{f"baseline: {k}": v for k, v in row["baseline"]["error_kinds"].items()}}
        print(
            f"      server: peak RSS {server['peak_rss_mib']} MiB, {server['threads_end']} threads, reactor lag max {server['reactor_lag_max_ms']} ms, "
            f"{server['errors_logged']} errors logged, {server['stop']}; first turns p50 {row['stack']['first_turn_wall_p50_ms']} / {row['baseline']['first_turn_wall_p50_ms']} ms, "
            f"warm-up errors {row['stack']['warmup_errors']}/{row['baseline']['warmup_errors']}; "
            f"listen overflows {row['host_listen_overflows']}; {row['seconds']} s" + (f"; errors: {kinds}" if kinds else "")
        )
        threads = ", ".join(f"{name} {value}" for name, value in row["stack"]["server_cpu_ms_per_turn_by_thread"].items())
        print(f"      server CPU ms/turn by thread: {threads}")
        model = ", ".join(f"{name} {v['requests']} over {v['connections']} connections" for name, v in row["model_requests"].items())
        print(f"      model requests: {model}")
