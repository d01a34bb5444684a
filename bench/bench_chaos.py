"""Chaos: how many seeded sessions the deterministic simulator checks per CPU second, and a real run.

Measured, in one invocation:

- ``sim_sessions``: ``actors.chaos._sim.sweep`` over consecutive seeds (one session per
  seed, trace off, as ``hermes chaos sim`` runs them) for the ``calm``, ``default`` and
  ``crash`` plans; CPU time (``time.process_time``) of the sweep; sessions, machine steps and
  world events per CPU second. Several rounds on fresh seed ranges; medians reported.
  Baseline (``machine_only``), in the same round: every ``(state, input)`` pair the turn
  machine saw during a capture run of the same seeds is fed to ``actors.agent._machine.step``
  again, alone (no world, no checker): the CPU the real machine costs per session. ``ratio``
  = simulator / machine-only, i.e. what the simulated world and the invariant checks add.
  Goal: thousands of sessions per CPU second.
- ``real_run`` (skipped with ``--quick``): ``actors.chaos._runner.run_chaos`` with the
  default plan, 12 sessions and 4 kills of settled sessions against the in-process test
  model server (real store file in a temporary directory): wall time, process CPU, turns,
  turns per wall second, p50/p99 turn latency (``TurnStarted`` to the turn's end, wall
  clock), faults injected, violations (must be 0).

Run from the repository root: ``python bench/bench_chaos.py [--quick] [--json]``
(about 40 s; ``--quick`` about 3 s).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import parse_options, print_header, print_json, versions

from actors.agent import (
    _machine,
    _session_host,
)
from actors.chaos._faults import PRESETS
from actors.chaos._runner import RunOptions, run_chaos
from actors.chaos._sim import sweep

GOAL_SESSIONS_PER_CPU_S = 1_000


def emit(row: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json([row])
        return
    name = row.get("metric", "")
    rest = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("bench", "metric"))
    print(f"{name:<14} {rest}", flush=True)


def machine_inputs(plan_name: str, seeds: range) -> list[tuple[Any, Any, Any]]:
    """Every (state, input, config) the machine saw while the simulator ran ``seeds``."""
    seen: list[tuple[Any, Any, Any]] = []
    real_step = _session_host.step

    def recording_step(state: Any, event: Any, config: Any) -> Any:
        seen.append((state, event, config))
        return real_step(state, event, config)

    _session_host.step = recording_step  # type: ignore[assignment]
    try:
        sweep(seeds, PRESETS[plan_name]())
    finally:
        _session_host.step = real_step  # type: ignore[assignment]
    return seen


def time_machine_only(pairs: list[tuple[Any, Any, Any]]) -> float:
    step = _machine.step
    start = time.process_time()
    for state, event, config in pairs:
        step(state, event, config)
    return time.process_time() - start


def bench_sim(plan_name: str, seeds: int, rounds: int, as_json: bool) -> None:
    plan = PRESETS[plan_name]()
    rates, steps_rates, machine_rates, ratios, failing = [], [], [], [], []
    for r in range(rounds):
        window = range(r * seeds, (r + 1) * seeds)
        result = sweep(window, plan)
        pairs = machine_inputs(plan_name, window)
        machine_s = time_machine_only(pairs)
        rates.append(result.sessions / result.cpu_s)
        steps_rates.append(len(pairs) / result.cpu_s)
        machine_rates.append(result.sessions / machine_s)
        ratios.append(result.cpu_s / machine_s)
        failing.append(len(result.failures))
    median = statistics.median(rates)
    emit(
        {
            "bench": "chaos",
            "metric": "sim_sessions",
            "plan": plan_name,
            "seeds_per_round": seeds,
            "rounds": rounds,
            "median_sessions_per_cpu_s": round(median),
            "median_machine_steps_per_cpu_s": round(statistics.median(steps_rates)),
            "machine_only_sessions_per_cpu_s": round(statistics.median(machine_rates)),
            "ratio": round(statistics.median(ratios), 2),
            "failing_seeds_per_round": failing,
            "goal_per_cpu_s": GOAL_SESSIONS_PER_CPU_S,
            "meets_goal": median >= GOAL_SESSIONS_PER_CPU_S,
        },
        as_json,
    )


def bench_real(as_json: bool) -> bool:
    plan = PRESETS["default"]()
    options = RunOptions(sessions=12, kills=4, kill_when="settled", seed=1, timeout=90.0)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    report = run_chaos(plan, options)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    emit(
        {
            "bench": "chaos",
            "metric": "real_run",
            "sessions": report.sessions,
            "turns": report.turns,
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "turns_per_wall_s": round(report.turns / report.wall_s, 2),
            "p50_turn_ms": round(report.percentile(0.5), 1),
            "p99_turn_ms": round(report.percentile(0.99), 1),
            "kills": report.kills,
            "restarts": report.restarts,
            "faults": sum(report.faults.values()),
            "model_requests": report.model_requests,
            "violations": len(report.violations),
        },
        as_json,
    )
    return report.ok


def main() -> int:
    options = parse_options(__doc__)
    seeds, rounds = (300, 3) if options.quick else (2_000, 5)
    text = f"simulator: {rounds} rounds of {seeds:,} seeds per plan\n"
    print_header("chaos", versions("msgspec", "pykka", "trio"), options.json, text)
    sweep(range(50), PRESETS["default"]())  # warm-up: imports, caches
    for plan_name in ("calm", "default", "crash"):
        bench_sim(plan_name, seeds, rounds, options.json)
    ok = True
    if not options.quick:
        ok = bench_real(options.json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
