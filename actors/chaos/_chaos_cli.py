"""``hermes chaos``: simulate seeded sessions, replay a seed, print a plan, run the real runtime under faults.

::

    hermes chaos sim --seeds 2000 [--start 0] [--plan default|crash|storm|calm|FILE | --all-presets] [--bug NAME]
    hermes chaos replay SEED [--plan ...] [--mask ID,ID] [--minimal] [--full]
    hermes chaos plan [NAME|FILE] [--yaml]
    hermes chaos run [--sessions 12] [--plan ...] [--kills 6] [--kill-when settled|anytime] [--seed 0]

Exit status: 0 when every invariant held, 1 when one broke (the report says which, where,
and how to replay it), 2 for a usage error.

``sim --all-presets`` sweeps the same seeds of every preset in turn (the long sweep, run by
hand: ``hermes chaos sim --all-presets --seeds 100000``) and ends with one line a preset:
seeds, failing seeds, violations, wall time, sessions per CPU second. Every sweep names the
commit it ran (``-dirty`` when the checkout has uncommitted changes), so its figures can be
quoted with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import subprocess
import sys
import time
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from protocols._faults import FaultPlan

from .._errors import UsageError
from ._faults import PRESETS, dump_plan, load_plan
from ._sim import SimOptions, SweepResult, format_result, replay, shrink, summary, sweep
from ._sim_bugs import PlantedBug

BUGS: tuple[str, ...] = tuple(name for literal in typing.get_args(PlantedBug) for name in typing.get_args(literal))
"""Every bug ``--bug`` can plant (the session's and the credential pool's)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermes chaos", description="Fault injection: the deterministic simulator and the real runtime under a fault plan.")
    commands = parser.add_subparsers(dest="command", required=True)
    plans = f"a preset ({', '.join(PRESETS)}) or a .json/.yaml file"

    sim = commands.add_parser("sim", help="simulate seeded sessions and check the invariants after every step")
    sim.add_argument("--seeds", type=int, default=1000, help="how many seeds (default 1000)")
    sim.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    sim.add_argument("--plan", help=f"{plans} (default: default)")
    sim.add_argument("--all-presets", action="store_true", help="sweep the same seeds of every preset in turn, then print one line a preset")
    sim.add_argument("--bug", choices=BUGS, help="plant a bug on purpose (to see the checker catch it)")
    sim.add_argument("--show", type=int, default=3, help="failing seeds to shrink and print (default 3)")
    sim.add_argument("--json", action="store_true", help="one JSON object with the figures and failing seeds")
    sim.add_argument("--quiet", action="store_true", help="no progress line")

    rep = commands.add_parser("replay", help="run one seed again and print its trace")
    rep.add_argument("seed", type=int)
    rep.add_argument("--plan", default="default", help=plans)
    rep.add_argument("--bug", choices=BUGS)
    rep.add_argument("--mask", default="", help="comma-separated fault ids to leave out (as a report prints them)")
    rep.add_argument("--minimal", action="store_true", help="shrink first: the fewest faults that still fail")
    rep.add_argument("--full", action="store_true", help="the whole trace, not only up to the first violation")

    show = commands.add_parser("plan", help="print a fault plan (every field)")
    show.add_argument("plan", nargs="?", default="default", help=plans)
    show.add_argument("--yaml", action="store_true")

    run = commands.add_parser("run", help="the real runtime: concurrent sessions against the test model server, with faults and kills")
    run.add_argument("--sessions", type=int, default=12)
    run.add_argument("--plan", default="default", help=plans)
    run.add_argument("--kills", type=int, default=6, help="session actors to crash with InjectCrash (default 6)")
    run.add_argument("--kill-when", choices=("settled", "anytime"), default="anytime", help="kill only settled sessions, or at any moment (default)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--timeout", type=float, default=120.0, help="give up on the run after this many seconds")
    run.add_argument("--json", action="store_true")
    run.add_argument("--quiet", action="store_true")
    return parser


def main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``hermes chaos`` with ``argv`` (the words after ``chaos``); returns the exit status."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse's usage errors and --help
        return int(exc.code) if isinstance(exc.code, int) else 2
    try:
        if args.command == "sim":
            return _sim(args, out, err)
        if args.command == "replay":
            return _replay(args, out)
        if args.command == "plan":
            print(dump_plan(load_plan(args.plan), "yaml" if args.yaml else "json"), file=out)
            return 0
        return _run(args, out, err)
    except UsageError as exc:
        print(f"hermes chaos: {exc}", file=err)
        return 2


def _sim(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    if args.all_presets and args.plan is not None:
        raise UsageError("give --plan or --all-presets, not both")
    sources = list(PRESETS) if args.all_presets else [args.plan if args.plan is not None else "default"]
    plans = [(source, load_plan(source)) for source in sources]  # every plan checked before the first sweep
    commit = source_commit()
    rows = []
    for source, plan in plans:
        started = time.monotonic()
        result = _sweep_plan(plan, args, err)
        wall_s = time.monotonic() - started
        _print_sweep(source, plan.name, result, wall_s, commit, args, out)
        rows.append((plan.name, result, wall_s))
    if args.all_presets and not args.json:
        print(file=out)
        print(f"every preset, seeds {args.start}-{args.start + args.seeds - 1}; commit {commit}", file=out)
        for name, result, wall_s in rows:
            violations = sum(len(f.violations) for f in result.failures)
            print(
                f"  {name:<16} {result.seeds} seeds, {len(result.failures)} failing, {violations} violations, "
                f"{wall_s:.1f} s wall, {result.sessions_per_cpu_s:,.0f} sessions per CPU second",
                file=out,
            )
    return 1 if any(result.failures for _, result, _ in rows) else 0


def _sweep_plan(plan: FaultPlan, args: argparse.Namespace, err: TextIO) -> SweepResult:
    show_progress = not args.quiet and err.isatty()
    last = [0.0]

    def progress(done: int, failing: int) -> None:
        now = time.monotonic()
        if show_progress and (now - last[0] > 0.2 or done == args.seeds):
            last[0] = now
            print(f"\rsim {plan.name}: {done}/{args.seeds} seeds, {failing} failing", end="", file=err, flush=True)

    result = sweep(range(args.start, args.start + args.seeds), plan, options=SimOptions(bug=args.bug, trace=False), progress=progress)
    if show_progress:
        print(file=err)
    return result


def _print_sweep(source: str, name: str, result: SweepResult, wall_s: float, commit: str, args: argparse.Namespace, out: TextIO) -> None:
    """The report of a sweep of plan ``name``; ``source`` is what ``--plan`` takes to replay its seeds."""
    if args.json:
        record: dict[str, Any] = {
            "plan": name,
            "seeds": result.seeds,
            "start": args.start,
            "sessions": result.sessions,
            "steps": result.steps,
            "cpu_s": round(result.cpu_s, 3),
            "wall_s": round(wall_s, 3),
            "sessions_per_cpu_s": round(result.sessions_per_cpu_s, 1),
            "commit": commit,
            "failing_seeds": [f.seed for f in result.failures],
            "violations": [{"seed": f.seed, "rule": v.rule, "detail": v.detail} for f in result.failures for v in f.violations],
            "counts": result.counts,
        }
        print(json.dumps(record), file=out)
        return
    print(
        f"{result.seeds} seeds, {result.sessions} sessions, {result.steps} steps in {result.cpu_s:.2f} s of CPU "
        f"({result.sessions_per_cpu_s:,.0f} sessions per CPU second), {wall_s:.2f} s wall; plan {name}; commit {commit}",
        file=out,
    )
    print(f"  {summary(result.counts)}", file=out)
    if not result.failures:
        print("  every invariant held", file=out)
        return
    rules: dict[str, int] = {}
    for failure in result.failures:
        for violation in failure.violations:
            rules[violation.rule] = rules.get(violation.rule, 0) + 1
    seeds = ", ".join(str(f.seed) for f in result.failures[:20]) + (" ..." if len(result.failures) > 20 else "")
    print(f"  {len(result.failures)} failing seed(s): {seeds}", file=out)
    print(f"  violations by rule: {', '.join(f'{k} {v}' for k, v in sorted(rules.items()))}", file=out)
    for failure in result.failures[: max(0, args.show)]:
        print(file=out)
        print(format_result(shrink(failure, options=SimOptions(bug=args.bug)), plan_name=source, bug=args.bug), file=out)


def source_commit() -> str:
    """The commit of the code running (``git rev-parse --short HEAD``), ``-dirty`` when the
    checkout has uncommitted changes; ``unknown`` outside a git checkout or without git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = head.stdout.strip() or "unknown"
    return f"{commit}-dirty" if status.stdout.strip() and commit != "unknown" else commit


def _replay(args: argparse.Namespace, out: TextIO) -> int:
    plan = load_plan(args.plan)
    options = SimOptions(bug=args.bug)
    mask = [m for m in args.mask.split(",") if m]
    result = replay(args.seed, plan, options=options, mask=mask)
    if args.minimal:
        result = shrink(result, options=options)
    if args.full:
        text = format_result(result, plan_name=args.plan, trace=False, bug=args.bug)
        lines = text.splitlines()
        print("\n".join(lines[:-1]), file=out)
        print("  trace:", file=out)
        for step, at, what in result.trace:
            print(f"    {at:10.4f}  [{step:>5}]  {what}", file=out)
        print(lines[-1], file=out)
    else:
        print(format_result(result, plan_name=args.plan, bug=args.bug), file=out)
    print(f"  {summary(result.counts)}; {result.steps} steps, {result.virtual_s:.3f} virtual seconds", file=out)
    return 0 if result.ok else 1


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ._runner import RunOptions, format_report, run_chaos

    if args.sessions < 1 or args.kills < 0:
        raise UsageError("--sessions must be at least 1 and --kills at least 0")
    plan = load_plan(args.plan)
    if plan.model.key_faults or plan.crashes.pool:
        print("note: key faults and credential pool crashes are simulated only (hermes chaos sim); this run uses one key and no pool faults", file=err)
    show_progress = not args.quiet and err.isatty()

    def progress(line: str) -> None:
        if show_progress:
            print(f"\r{line}", end="", file=err, flush=True)

    options = RunOptions(sessions=args.sessions, kills=args.kills, kill_when=args.kill_when, seed=args.seed, timeout=args.timeout)
    with _quiet_logs():  # the crashes are on purpose; the report says what matters
        report = run_chaos(plan, options, progress=progress)
    if show_progress:
        print(file=err)
    if args.json:
        print(json.dumps(report.as_dict()), file=out)
    else:
        print(format_report(report), file=out)
    return 0 if report.ok else 1


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("actors", "supervisor")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
