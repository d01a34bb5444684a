"""The deterministic simulator: seeded sessions on a virtual clock, invariants checked after every step.

Each seed is one small world (``Workload.sessions`` sessions, their clients, the store,
the model and the tools) run to rest on one thread. The sessions run the real turn
machine, batch planner and sanitizer (see ``_sim_session.py``); the rest is simulated
(``_sim_world.py``) and broken by the fault plan. :class:`~._invariants.Invariants` is fed
as things happen and judges the stored transcripts at the end.

A failing seed is reported with its violations and the trace up to the first one;
:func:`shrink` looks for the fewest injected faults (and client actions) that still break
the same rule, by re-running the seed with the others masked; :func:`replay` reruns a seed
(and mask) exactly.

Example::

    result = simulate(7, default_plan())
    assert result.ok, format_result(shrink(result))
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any, get_args

from protocols._faults import FaultPlan

from ..agent._compress import CompressionSettings
from ..agent._machine import MachineConfig
from ..agent._plan import ToolTraits
from ._faults import default_plan
from ._invariants import Violation
from ._sim_bugs import PlantedBug
from ._sim_client import SimClient
from ._sim_memory import MemoryBug, SimProvider
from ._sim_process import schedule_process_death
from ._sim_review import ReviewBug, SimReviews
from ._sim_session import SimSession
from ._sim_world import TOOL_SCHEMAS, World

TRAITS = {
    "read_file": ToolTraits(read_only=True, path_argument="path"),
    "write_file": ToolTraits(path_argument="path"),
    "terminal": ToolTraits(),
}
"""The simulated tools, with what the batch planner knows of them."""


@dataclasses.dataclass(frozen=True, slots=True)
class SimOptions:
    """How to run the simulator (not part of the plan: the same plan, another harness)."""

    bug: PlantedBug | None = None
    """A bug planted on purpose (tests only), to prove the checker catches it."""
    max_steps: int = 100_000
    """A world still busy after this many steps is reported (``no_quiescence``)."""
    trace: bool = True
    """Record the event trace (sweeps turn it off and replay the failing seeds with it)."""
    load_s: float = 0.005
    """Longest time a session takes to load its transcript."""
    restart_s: float = 0.001
    """Time the supervisor takes to restart a crashed session."""


@dataclasses.dataclass(frozen=True, slots=True)
class SimResult:
    """What one seed did."""

    seed: int
    plan: FaultPlan
    mask: frozenset[str]
    violations: tuple[Violation, ...]
    injected: tuple[str, ...]
    """Ids of the faults (and client actions, ``workload:...``) this run injected."""
    trace: tuple[tuple[int, float, str], ...]
    steps: int
    virtual_s: float
    counts: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def faults(self) -> tuple[str, ...]:
        """The injected faults proper (client actions left out)."""
        return tuple(f for f in self.injected if not f.startswith("workload:"))


@dataclasses.dataclass(frozen=True, slots=True)
class SweepResult:
    """Many seeds of one plan."""

    seeds: int
    sessions: int
    steps: int
    cpu_s: float
    failures: tuple[SimResult, ...]
    counts: dict[str, int]

    @property
    def sessions_per_cpu_s(self) -> float:
        return self.sessions / self.cpu_s if self.cpu_s > 0 else 0.0


def machine_config(plan: FaultPlan) -> MachineConfig:
    """The session limits a plan's workload sets (retries as the runtime's defaults; compression
    when the workload names a context window)."""
    w = plan.workload
    config = MachineConfig(
        traits=TRAITS,
        max_iterations=w.max_iterations,
        turn_timeout=w.turn_timeout_s,
        model_timeout=w.model_timeout_s,
        tool_timeout=w.tool_timeout_s,
        max_attempts=w.max_attempts,
        queue_limit=w.queue_limit,
    )
    if w.context_length:  # compression on, with the runtime's defaults fitted to the window
        config = dataclasses.replace(config, compression=CompressionSettings(), context_length=w.context_length, tools_size=TOOL_SCHEMAS)
    return config


_CONFIGS: dict[int, tuple[FaultPlan, MachineConfig]] = {}
"""id(plan) -> (plan, its machine config): a sweep runs one plan thousands of times, and both
are frozen (by identity, as ``_pool_core._facts``: hashing a plan costs more than the work)."""


def _config_of(plan: FaultPlan) -> MachineConfig:
    known = _CONFIGS.get(id(plan))
    if known is not None and known[0] is plan:
        return known[1]
    if len(_CONFIGS) >= 64:
        _CONFIGS.clear()
    config = machine_config(plan)
    _CONFIGS[id(plan)] = (plan, config)
    return config


def simulate(seed: int, plan: FaultPlan | None = None, *, options: SimOptions = SimOptions(), mask: Iterable[str] = ()) -> SimResult:
    """Run one seed of ``plan`` (the default plan when None) to rest and check it."""
    plan = plan if plan is not None else default_plan()
    world = World(seed, plan, mask=frozenset(mask), trace=options.trace)
    world.store.ack_before_commit = options.bug == "ack_before_commit"
    world.store.half_segments = options.bug == "half_segment"
    if plan.reviews.enabled:
        world.reviews = SimReviews(world)
        world.reviews.bug = options.bug if options.bug in get_args(ReviewBug) else None  # type: ignore[assignment]
    if plan.providers.enabled:
        world.memory = SimProvider(world)
        world.memory.bug = options.bug if options.bug in get_args(MemoryBug) else None  # type: ignore[assignment]
    config = _config_of(plan)
    sessions = []
    for k in range(plan.workload.sessions):
        session = SimSession(world, f"s{k}", config, bug=options.bug, load_s=options.load_s, restart_s=options.restart_s)
        world.sessions[session.session_id] = session
        SimClient(world, session).begin()
        sessions.append(session)
    schedule_process_death(world)
    checker = world.checker
    if world.run(options.max_steps):
        store = world.store
        for session in sessions:
            sid = session.session_id
            copied = sid in store.copied
            originals = store.originals(sid) if copied else None
            if world.reviews is not None:
                checker.reviews.user_transcript(sid, store.durable.get(sid, []), world.now)
            if world.memory is not None:
                checker.memory.transcript(sid, store.durable.get(sid, []), world.now)
            users = None if copied else store.user_texts.get(sid)  # what it stored once, counted as it stored it
            checker.durable_transcript(sid, store.segment(sid), world.now, originals=originals, users=users)
    else:
        checker.violate("no_quiescence", "-", f"the world was still busy after {options.max_steps} steps", world.now)
    violations = checker.finish(world.now)
    counts = dict(checker.counts)
    counts["sessions"] = len(sessions)
    counts["faults"] = sum(1 for f in world.dice.injected if not f.startswith("workload:"))
    counts["store_writes"] = world.store.writes
    result = SimResult(
        seed=seed,
        plan=plan,
        mask=frozenset(mask),
        violations=tuple(violations),
        injected=tuple(world.dice.injected),
        trace=tuple(world.trace),
        steps=world.steps,
        virtual_s=world.now,
        counts=counts,
    )
    world.close()
    return result


def replay(seed: int, plan: FaultPlan | None = None, *, options: SimOptions = SimOptions(), mask: Iterable[str] = ()) -> SimResult:
    """Run ``seed`` again, trace on: the same plan, seed and mask give the same run."""
    return simulate(seed, plan, options=dataclasses.replace(options, trace=True), mask=mask)


def shrink(result: SimResult, *, options: SimOptions = SimOptions(), passes: int = 3) -> SimResult:
    """The same seed with as few faults and client actions as still break the first violation's rule.

    Each injected fault is masked in turn; the mask is kept when the run still fails the
    same rule first. Returns the smallest run found (trace on); a passing result is returned as is.
    """
    if result.ok:
        return result
    rule = result.violations[0].rule
    quiet = dataclasses.replace(options, trace=False)
    mask = set(result.mask)
    current = result
    for _ in range(passes):
        changed = False
        for fault in current.injected:
            if fault in mask:
                continue
            trial = simulate(result.seed, result.plan, options=quiet, mask=mask | {fault})
            if trial.violations and trial.violations[0].rule == rule:
                mask.add(fault)
                current = trial
                changed = True
        if not changed:
            break
    return replay(result.seed, result.plan, options=options, mask=mask)


def sweep(
    seeds: Iterable[int],
    plan: FaultPlan | None = None,
    *,
    options: SimOptions = SimOptions(trace=False),
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Simulate every seed; failures are kept (without traces: :func:`replay` them)."""
    plan = plan if plan is not None else default_plan()
    quiet = dataclasses.replace(options, trace=False)
    failures: list[SimResult] = []
    counts: dict[str, int] = {}
    seen = sessions = steps = 0
    start = time.process_time()
    for seed in seeds:
        result = simulate(seed, plan, options=quiet)
        seen += 1
        sessions += result.counts["sessions"]
        steps += result.steps
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
        if not result.ok:
            failures.append(result)
        if progress is not None:
            progress(seen, len(failures))
    return SweepResult(seeds=seen, sessions=sessions, steps=steps, cpu_s=time.process_time() - start, failures=tuple(failures), counts=counts)


def failure_trace(result: SimResult) -> list[str]:
    """The trace up to (and including) the step of the first violation, as lines."""
    limit = result.violations[0].step if result.violations else -1
    lines = []
    for step, at, text in result.trace:
        if limit >= 0 and step > limit:
            break
        lines.append(f"{at:10.4f}  [{step:>5}]  {text}")
    return lines


def format_result(result: SimResult, *, plan_name: str | None = None, trace: bool = True, bug: str | None = None) -> str:
    """A report of one seed: violations, the faults that matter, the trace, how to replay it.

    ``plan_name`` is what to pass to ``--plan`` to replay (a preset or a file); ``bug`` the
    planted bug the run had, if any.
    """
    name = plan_name or result.plan.name
    lines = [f"seed {result.seed} (plan {name}): " + ("ok" if result.ok else f"{len(result.violations)} violation(s)")]
    lines += [f"  {v.describe()}" for v in result.violations]
    faults = result.faults
    lines.append(f"  faults injected: {', '.join(faults) if faults else 'none'}")
    if result.mask:
        lines.append(f"  masked: {len(result.mask)} fault(s) / client action(s) not needed to fail")
    if trace and result.trace:
        shown = failure_trace(result)
        lines.append(f"  trace ({len(shown)} entries, to the first violation):")
        lines += [f"    {line}" for line in shown]
    mask = f" --mask {','.join(sorted(result.mask))}" if result.mask else ""
    planted = f" --bug {bug}" if bug else ""
    lines.append(f"  replay: hermes chaos replay {result.seed} --plan {name}{planted}{mask}")
    return "\n".join(lines)


def summary(counts: dict[str, Any]) -> str:
    keys = ("sessions", "turns", "completed", "failed", "cancelled", "rejected", "queued", "restarts", "recovered", "tool_runs", "faults")
    line = ", ".join(f"{k} {counts.get(k, 0)}" for k in keys)
    if counts.get("reviews"):  # plans with background reviews: how they ended
        line += ", " + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("reviews", "reviews_ok", "reviews_failed", "reviews_cancelled", "turns_during_review"))
    if counts.get("prefetches"):  # plans with an external memory provider: its prefetches and what became of them
        memory = ("prefetches", "prefetch_skipped", "memory_blocks", "syncs", "provider_restarts")
        line += ", " + ", ".join(f"{k} {counts.get(k, 0)}" for k in memory)
    return line
