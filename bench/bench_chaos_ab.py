"""Chaos A/B: sessions per CPU second of the simulator in two source trees, chunk by chunk.

Measured: ``actors.chaos._sim.sweep`` (trace off, invariants checked after every step) over
the ``calm``, ``default`` and ``crash`` presets; CPU time (``time.process_time``) of each
sweep. Each round starts one fresh interpreter per tree (a new memory layout, and the round's
string hash seed, the same in both: ``PYTHONHASHSEED`` = round + 1), warms it up (imports,
caches, 200 seeds), then hands the two the same chunks of seeds in turn (A B, B A, ...): a
chunk is ``--chunk`` seeds, about a quarter of a CPU second, so both trees meet the same
state of the machine. A round's rate is its sessions over its CPU seconds; the ratio B / A
of each round, and its median over the rounds, is the result.

Two sets of plans (``--plans``):

- ``own``: each tree runs its own presets. A tree whose plans gained faults (process death,
  pool crashes and key faults came after b9e05da) measures that extra work too.
- ``base``: both trees run the base tree's presets, sent as JSON and read by each tree's
  ``parse_plan`` (a field the base does not know keeps the tree's default: off). The same
  simulated work in both: what the code costs, not what the plan asks for.

Each worker runs with the tree as its working directory, ``PYTHONPATH`` set to it and the
tree first on ``sys.path``, and checks that ``actors`` and ``protocols`` were imported from
it (an editable install of another tree would otherwise win, as it did once).

``python bench/bench_chaos_ab.py --base ../wt-base [--tree .] [--rounds 5] [--seeds 2000]
[--chunk 200] [--plans own,base] [--quick] [--json]`` (about 20 s a round of 2,000 seeds per
plan and set on an idle 2-vCPU VM; ``--quick``: 2 rounds of 200).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import bench_parser, print_header, print_json, quiet_loggers, versions

PLANS = ("calm", "default", "crash")
SETS = ("own", "base")

WORKER = r"""
import json, sys
tree = sys.argv[1]
sys.path.insert(0, tree)
import actors, protocols
for module in (actors, protocols):
    assert module.__file__.startswith(tree + "/"), f"{module.__name__} came from {module.__file__}, not {tree}"
import msgspec
from actors.chaos._faults import PRESETS, parse_plan
from actors.chaos._sim import sweep
plans = {("own", name): PRESETS[name]() for name in PRESETS}
sweep(range(1_000_000, 1_000_200), plans["own", "default"])  # warm-up: imports, caches
print(json.dumps({name: msgspec.json.encode(plan).decode() for (_, name), plan in plans.items()}), flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    if "plans" in ask:  # the base tree's presets, as JSON
        for name, text in ask["plans"].items():
            plans["base", name] = parse_plan(text, "json")
        print("{}", flush=True)
        continue
    result = sweep(range(ask["start"], ask["start"] + ask["count"]), plans[ask["set"], ask["plan"]])
    print(json.dumps({"sessions": result.sessions, "cpu_s": result.cpu_s, "failing": len(result.failures)}), flush=True)
"""


class Worker:
    """One tree's interpreter, kept for a round: asked for sweeps, a line each way."""

    def __init__(self, tree: Path, hash_seed: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": str(hash_seed)}
        argv = [sys.executable, "-c", WORKER, str(tree)]
        self.tree = tree
        self.process = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.presets: dict[str, str] = self._read()

    def _read(self) -> Any:
        stdout = self.process.stdout
        line = stdout.readline() if stdout is not None else ""
        if not line:
            stderr = self.process.stderr.read() if self.process.stderr is not None else ""
            raise SystemExit(f"{self.tree}: the worker stopped: {stderr.strip()}")
        return json.loads(line)

    def ask(self, request: dict[str, Any]) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def run_round(trees: dict[str, Path], sets: list[str], r: int, seeds: int, chunk: int) -> dict[tuple[str, str, str], list[float]]:
    """One round: (side, set, plan) -> [sessions, CPU seconds, failing seeds], summed over its chunks."""
    workers = {side: Worker(tree, hash_seed=r + 1) for side, tree in trees.items()}
    try:
        if "base" in sets:
            for worker in workers.values():
                worker.ask({"plans": workers["base"].presets})
        sums: dict[tuple[str, str, str], list[float]] = {}
        turn = r
        for plan_set in sets:
            for plan in PLANS:
                for start in range(r * seeds, (r + 1) * seeds, chunk):
                    sides = list(workers) if turn % 2 == 0 else list(workers)[::-1]
                    turn += 1
                    for side in sides:
                        got = workers[side].ask({"set": plan_set, "plan": plan, "start": start, "count": min(chunk, (r + 1) * seeds - start)})
                        total = sums.setdefault((side, plan_set, plan), [0.0, 0.0, 0.0])
                        total[0] += got["sessions"]
                        total[1] += got["cpu_s"]
                        total[2] += got["failing"]
        return sums
    finally:
        for worker in workers.values():
            worker.close()


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--base", type=Path, required=True, help="tree A (the baseline), e.g. a worktree of b9e05da")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent, help="tree B (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=2000, help="seeds per plan per round")
    parser.add_argument("--chunk", type=int, default=200, help="seeds a tree runs before the other runs the same ones")
    parser.add_argument("--plans", default="own,base", help="which plans: own (each tree's presets), base (the base's presets in both), or both")
    options = parser.parse_args()
    quiet_loggers()
    sets = [s.strip() for s in options.plans.split(",") if s.strip()]
    if not sets or any(s not in SETS for s in sets):
        parser.error(f"--plans takes own, base or own,base, not {options.plans!r}")
    rounds, seeds, chunk = (2, 200, 100) if options.quick else (options.rounds, options.seeds, options.chunk)
    trees = {"base": options.base.resolve(), "tree": options.tree.resolve()}
    text = f"simulator A/B: {rounds} rounds of {seeds:,} seeds per plan in chunks of {chunk}, plans {'+'.join(sets)}, base {trees['base']} against tree {trees['tree']}"
    print_header("chaos_ab", versions("msgspec"), options.json, text, base=str(trees["base"]), tree=str(trees["tree"]), plans=sets)
    rates: dict[tuple[str, str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        sums = run_round(trees, sets, r, seeds, chunk)
        for plan_set in sets:
            for plan in PLANS:
                in_base, in_tree = sums["base", plan_set, plan], sums["tree", plan_set, plan]
                rate_a, rate_b = in_base[0] / in_base[1], in_tree[0] / in_tree[1]
                rates.setdefault(("base", plan_set, plan), []).append(rate_a)
                rates.setdefault(("tree", plan_set, plan), []).append(rate_b)
                ratios.setdefault((plan_set, plan), []).append(rate_b / rate_a)
                row = {
                    "bench": "chaos_ab",
                    "metric": "round",
                    "round": r,
                    "plans": plan_set,
                    "plan": plan,
                    "base": round(rate_a),
                    "tree": round(rate_b),
                    "ratio": round(rate_b / rate_a, 3),
                }
                if options.json:
                    print_json([row])
                else:
                    failing = f" (failing {in_base[2]:.0f} / {in_tree[2]:.0f})" if in_base[2] or in_tree[2] else ""
                    print(f"round {r} {plan_set:<4} {plan:<8} base {rate_a:,.0f}, tree {rate_b:,.0f}, ratio {rate_b / rate_a:.3f}{failing}", flush=True)
    for plan_set in sets:
        for plan in PLANS:
            base, tree = statistics.median(rates["base", plan_set, plan]), statistics.median(rates["tree", plan_set, plan])
            each = ratios[plan_set, plan]
            ratio = statistics.median(each)
            row = {
                "bench": "chaos_ab",
                "metric": "median",
                "plans": plan_set,
                "plan": plan,
                "base": round(base),
                "tree": round(tree),
                "ratio": round(ratio, 3),
                "ratio_min": round(min(each), 3),
                "ratio_max": round(max(each), 3),
            }
            if options.json:
                print_json([row])
            else:
                print(
                    f"{plan_set:<4} {plan:<8} sessions / CPU s, median: base {base:,.0f}, tree {tree:,.0f}; ratio median {ratio:.3f} (rounds {min(each):.3f}..{max(each):.3f})"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
