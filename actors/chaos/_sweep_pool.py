"""A sweep split over worker processes: the same seeds, the same results, in less wall time.

Each seed is simulated independently and deterministically, so cutting the range into chunks
and simulating the chunks in separate processes gives exactly the failures and counts of one
:func:`._sim.sweep` over the whole range (the failures in seed order). The workers are
spawned, not forked: the caller may have threads running (a test process, a runtime), and a
fork copies their locks in whatever state they are. A plan crosses to a worker by its preset
name, so nothing but two integers and a string is pickled on the way in.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

from ._faults import load_plan
from ._sim import SimOptions, SweepResult, sweep

CHUNKS_PER_WORKER = 4
"""Chunks per worker: presets whose seeds cost unevenly still finish together."""


def default_jobs() -> int:
    """Worker processes to use: the cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def open_pool(jobs: int) -> concurrent.futures.ProcessPoolExecutor:
    return concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))


def _sweep_chunk(start: int, stop: int, plan_name: str, bug: str | None) -> SweepResult:
    return sweep(range(start, stop), load_plan(plan_name), options=SimOptions(trace=False, bug=bug))  # type: ignore[arg-type]


def merge(results: list[SweepResult]) -> SweepResult:
    """One result of chunks swept apart (in seed order)."""
    counts: dict[str, int] = {}
    for result in results:
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
    return SweepResult(
        seeds=sum(r.seeds for r in results),
        sessions=sum(r.sessions for r in results),
        steps=sum(r.steps for r in results),
        cpu_s=sum(r.cpu_s for r in results),
        failures=tuple(f for r in results for f in r.failures),
        counts=counts,
    )


def sweep_in_pool(
    pool: concurrent.futures.ProcessPoolExecutor, seeds: range, plan_name: str, jobs: int, *, bug: str | None = None, timeout: float = 1800.0
) -> SweepResult:
    """Sweep ``seeds`` (a step-1 range) of preset ``plan_name`` in ``pool``'s ``jobs`` workers,
    within ``timeout`` seconds (``TimeoutError`` past it); ``bug``: a planted bug (tests)."""
    count = max(1, min(len(seeds), jobs * CHUNKS_PER_WORKER))
    bounds = [seeds.start + len(seeds) * i // count for i in range(count + 1)]
    futures = [pool.submit(_sweep_chunk, bounds[i], bounds[i + 1], plan_name, bug) for i in range(count)]
    _, pending = concurrent.futures.wait(futures, timeout=timeout)
    if pending:
        for future in pending:
            future.cancel()
        raise TimeoutError(f"sweeping {len(seeds)} seeds of {plan_name} took more than {timeout:g} s")
    return merge([future.result() for future in futures])
