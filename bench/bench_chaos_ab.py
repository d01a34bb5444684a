"""Chaos A/B: sessions per CPU second of the simulator in two source trees, interleaved.

Measured: ``actors.chaos._sim.sweep`` (trace off, invariants checked after every step) over
the ``calm``, ``default`` and ``crash`` presets, each tree in a fresh subprocess per round;
CPU time (``time.process_time``) of each sweep. Round ``r`` runs seeds ``r*N .. (r+1)*N - 1``
in both trees, the trees' order alternating from round to round (A B, B A, ...), after a
50-seed warm-up. Medians over the rounds, and the ratio B / A.

Each subprocess runs with the tree as its working directory, ``PYTHONPATH`` set to it and the
tree first on ``sys.path``, and checks that ``actors`` and ``protocols`` were imported from
it (an editable install of another tree would otherwise win, as it did once). Each tree runs
its own presets: a tree whose plans changed measures its own plans.

``python bench/bench_chaos_ab.py --base ../wt-base [--tree .] [--rounds 5] [--seeds 600]
[--quick] [--json]`` (about 40 s a round on an idle 2-vCPU VM; ``--quick``: 2 rounds of 100).
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

CHILD = r"""
import json, sys
tree, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, tree)
import actors, protocols
for module in (actors, protocols):
    assert module.__file__.startswith(tree + "/"), f"{module.__name__} came from {module.__file__}, not {tree}"
from actors.chaos._faults import PRESETS
from actors.chaos._sim import sweep
sweep(range(1_000_000, 1_000_050), PRESETS["default"]())  # warm-up: imports, caches
out = {"file": actors.__file__}
for name in sys.argv[4:]:
    result = sweep(range(start, start + count), PRESETS[name]())
    out[name] = {"rate": result.sessions / result.cpu_s, "cpu_s": result.cpu_s, "steps": result.steps, "failing": len(result.failures)}
print(json.dumps(out))
"""


def run_tree(tree: Path, start: int, count: int) -> dict[str, Any]:
    """One round of every plan in ``tree``, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", CHILD, str(tree), str(start), str(count), *PLANS]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--base", type=Path, required=True, help="tree A (the baseline), e.g. a worktree of b9e05da")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent, help="tree B (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=600, help="seeds per plan per round")
    options = parser.parse_args()
    quiet_loggers()
    rounds, seeds = (2, 100) if options.quick else (options.rounds, options.seeds)
    trees = {"base": options.base.resolve(), "tree": options.tree.resolve()}
    text = f"simulator A/B: {rounds} rounds of {seeds:,} seeds per plan, base {trees['base']} against tree {trees['tree']}"
    print_header("chaos_ab", versions("msgspec"), options.json, text, base=str(trees["base"]), tree=str(trees["tree"]))
    rates: dict[str, dict[str, list[float]]] = {side: {plan: [] for plan in PLANS} for side in trees}
    for r in range(rounds):
        order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]
        for side, tree in order:
            out = run_tree(tree, r * seeds, seeds)
            for plan in PLANS:
                rates[side][plan].append(out[plan]["rate"])
            row = {"bench": "chaos_ab", "metric": "round", "round": r, "side": side, **{p: round(out[p]["rate"]) for p in PLANS}}
            if options.json:
                print_json([row])
            else:
                print(f"round {r} {side:<4}: " + ", ".join(f"{p} {out[p]['rate']:,.0f} (failing {out[p]['failing']})" for p in PLANS), flush=True)
    for plan in PLANS:
        base, tree = statistics.median(rates["base"][plan]), statistics.median(rates["tree"][plan])
        row = {"bench": "chaos_ab", "metric": "median", "plan": plan, "base": round(base), "tree": round(tree), "ratio": round(tree / base, 3)}
        if options.json:
            print_json([row])
        else:
            print(f"{plan:<8} sessions / CPU s, median: base {base:,.0f}, tree {tree:,.0f}, ratio {tree / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
