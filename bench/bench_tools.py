"""Cost of the file tools' fuzzy patch on a large file, wall time of a parallel tool batch, and the command checker.

Measured:

- ``patch_fuzzy``: one call of ``actors.tools._replace.fuzzy_replace(content, old, new)``
  on a generated 10,000-line Python file (about 330 KB; 1,250 functions of 8 lines), in
  memory, for an ``old_string`` built so that a given strategy is the first that matches
  (the chain runs every stricter strategy before it, so later strategies cost more). The
  target block sits at 60 % of the file. Reported per strategy: median and p90 over the
  repetitions, and the ratio to the baseline. Baseline, same run, same file: plain
  ``str.replace(old, new, 1)`` with the exact ``old_string``. Goal: median < 50 ms for
  every strategy. ``not_found`` is the failure path (all nine strategies, then the
  search for the most similar lines that the error message shows).
- ``patch_tool``: the ``patch`` tool end to end through ``REGISTRY.get("patch").run``
  inside ``trio.run``: read the file in a worker thread, decode, match, atomic write
  (temporary file + fsync + rename + directory fsync) of the same 10,000-line file in a
  temporary directory; each repetition patches the block back and forth. Baseline:
  ``Path.read_text`` + ``str.replace`` + ``Path.write_text`` (no fsync, not atomic).
- ``parallel_batch``: the whole session stack (``tests/agent/session_kit.start_kit``:
  store on SQLite, session actor, reactor) against the test model server
  (``actors.chaos.ModelServer``), scripted to answer one ``ToolCallsReply`` with 8 calls
  of a registered read-only tool whose handler is ``await trio.sleep(1.0)``, then text.
  Timed: from the first ``ToolStarted`` to the last ``ToolFinished`` reaching a
  subscriber (``batch_s``), and the whole turn from ``StartTurn`` to ``TurnCompleted``
  (``turn_s``). Goal: batch <= 1.2 s. Baseline: 8 ``trio.sleep(1.0)`` in one nursery.

- ``danger_check``: ``actors.tools._danger.check_command`` called once per command of the
  danger corpus (``tests/tools/danger_corpus.py``: several hundred hardline, dangerous and
  ordinary commands, multi-line heredocs included), with the corpus's home, working
  directory and HERMES_HOME; every command, 20 rounds (3 with ``--quick``). Reported:
  median, p90 and p99 of single calls (µs). Baseline, same run, same commands:
  ``shlex.split`` (tokenising only). Goal: median <= 200 µs. Every verdict is also checked
  against the corpus first (``wrong_verdicts``).

Run from the repository root: ``python bench/bench_tools.py [--quick] [--json] [--only SUBJECT]``
(about 15 s; ``--quick`` about 5 s; ``--only danger_check`` about 1 s). Exit status 1 if a
strategy did not match as intended, a turn did not complete, a tool failed, or a corpus
command got another verdict than the corpus states.
"""

from __future__ import annotations

import functools
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import trio
from _common import bench_parser, print_json, quiet_loggers, versions, versions_line
from _danger_measure import bench_danger

import actors.tools._patch  # noqa: F401  (registers patch)
from actors.agent import MachineConfig, ToolContext, ToolTraits, Workspace
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply
from actors.tools import REGISTRY, Registry, tool
from actors.tools._replace import PatchRefused, fuzzy_replace
from protocols._session import (
    Subscribe,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnFailed,
)

FUZZY_TARGET_MS = 50.0
BATCH_TARGET_S = 1.2
BATCH_SIZE = 8
DEADLINE = 20.0


# -- the file and the old_strings ----------------------------------------------------------------


def block(i: int) -> str:
    """Function ``i`` of the file: 7 lines, unique by name and constants."""
    return (
        f"def handler_{i:04d}(request, config):\n"
        f'    """Handle request kind {i}."""\n'
        f"    limit = config.get('limit_{i}', {i * 7 % 1000})\n"
        f"    items = [x for x in request.items if x.size < limit]\n"
        f"    total = sum(x.size for x in items)\n"
        f'    log.debug("handler {i}: %d items", len(items))\n'
        f"    return total + {i}"
    )


def make_file(functions: int = 1250) -> str:
    """10,000 lines: 1,250 functions of 7 lines, each followed by a blank line."""
    return "".join(block(i) + "\n\n" for i in range(functions))


def cases(i: int) -> dict[str, tuple[str, str]]:
    """strategy -> (old_string, new_string) whose first match is that strategy."""
    exact = block(i)
    new = exact.replace(f"return total + {i}", f"return total + {i} + 1")
    lines = exact.split("\n")
    return {
        "exact": (exact, new),
        "line_trimmed": ("\n".join(line + "  " for line in lines), new),
        "whitespace_normalized": (exact.replace("total = sum(", "total  =  sum("), new),
        "indentation_flexible": ("\n".join("  " + line for line in lines), new),
        "escape_normalized": (exact.replace("\n", "\\n").replace('"', '\\"'), new.replace("\n", "\\n").replace('"', '\\"')),
        "trimmed_boundary": ("\n\n\n" + exact + "\n\n\n", new),
        "unicode_normalized": (exact.replace('"handler', "\u201chandler").replace('items",', "items\u201d,"), new),
        "block_anchor": (exact.replace("x.size < limit", "x.weight <= limit"), new),
        "context_aware": (exact.replace(f"def handler_{i:04d}(request, config):", f"def handler_{i:04d}(req, cfg):"), new),
    }


# -- measuring ------------------------------------------------------------------------------------


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def p90(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.9) - 1)]


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def bench_fuzzy(repeat: int) -> tuple[list[dict[str, Any]], int]:
    content = make_file()
    target = int(1250 * 0.6)
    exact, new = cases(target)["exact"]
    assert content.count(exact) == 1
    baseline = timed(lambda: content.replace(exact, new, 1), repeat)
    rows: list[dict[str, Any]] = []
    failures = 0
    for strategy, (old, replacement) in cases(target).items():
        patched = fuzzy_replace(content, old, replacement)
        if patched.strategy != strategy or f"return total + {target} + 1\n" not in patched.text:
            failures += 1
        samples = timed(functools.partial(fuzzy_replace, content, old, replacement), repeat)
        rows.append(fuzzy_row(strategy, samples, baseline, matched=patched.strategy))
    missing = "def nowhere(a, b):\n    return a.b.c(d)\n    raise SystemExit(42)\n    # not in the file"

    def not_found() -> None:
        try:
            fuzzy_replace(content, missing, "x")
        except PatchRefused:
            pass

    rows.append(fuzzy_row("not_found", timed(not_found, repeat), baseline, matched=None))
    return rows, failures


def fuzzy_row(strategy: str, samples: list[float], baseline: list[float], matched: str | None) -> dict[str, Any]:
    median = statistics.median(samples)
    base = statistics.median(baseline)
    return {
        "metric": "patch_fuzzy",
        "strategy": strategy,
        "matched": matched,
        "median_ms": ms(median),
        "p90_ms": ms(p90(samples)),
        "baseline_median_ms": ms(base),
        "ratio": round(median / base, 1) if base else None,
        "target_ms": FUZZY_TARGET_MS if matched else None,
        "meets_target": median * 1e3 < FUZZY_TARGET_MS if matched else None,
        "n": len(samples),
        "lines": 10_000,
    }


def bench_tool(repeat: int) -> tuple[dict[str, Any], int]:
    """The patch tool end to end (thread hop, decode, match, atomic write with fsync)."""
    target = int(1250 * 0.6)
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "big.py"
        path.write_text(make_file())
        call = ToolContext(session_id="bench", turn_id="t", call_id="c", home=Path(workdir) / "home", workspace=Workspace(Path(workdir)))
        patch = REGISTRY.get("patch")
        samples: dict[str, list[float]] = {"exact": [], "context_aware": []}
        failures = 0

        async def main() -> None:
            nonlocal failures
            for strategy in samples:
                old, new = cases(target)[strategy]
                exact_new = cases(target)["exact"][1]
                for _ in range(repeat):
                    start = time.perf_counter()
                    forward = await patch.run({"path": "big.py", "old_string": old, "new_string": new}, call)
                    samples[strategy].append(time.perf_counter() - start)
                    back = await patch.run({"path": "big.py", "old_string": exact_new, "new_string": cases(target)["exact"][0]}, call)
                    failures += (not forward.ok) + (not back.ok)

        trio.run(main)
        exact, new = cases(target)["exact"]

        def plain() -> None:
            text = path.read_text()
            path.write_text(text.replace(exact, new, 1))
            path.write_text(path.read_text().replace(new, exact, 1))

        baseline = [s / 2 for s in timed(plain, repeat)]
    base = statistics.median(baseline)
    row = {
        "metric": "patch_tool",
        "exact_median_ms": ms(statistics.median(samples["exact"])),
        "context_aware_median_ms": ms(statistics.median(samples["context_aware"])),
        "exact_p90_ms": ms(p90(samples["exact"])),
        "baseline_median_ms": ms(base),
        "ratio_exact": round(statistics.median(samples["exact"]) / base, 1) if base else None,
        "n": repeat,
    }
    return row, failures


# -- the parallel batch through the session stack ---------------------------------------------------


class SleepArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    seconds: float = 1.0


def sleep_tool_registry() -> Registry:
    registry = Registry()

    @tool(
        name="sleep_1s",
        toolset="bench",
        description="Wait a second, then answer.",
        traits=ToolTraits(read_only=True),
        registry=registry,
    )
    async def sleep_1s(context: ToolContext, args: SleepArgs) -> str:
        await trio.sleep(args.seconds)
        return "slept"

    return registry


class Subscriber:
    """Stamps every session event on arrival."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[float, Any]] = queue.Queue()

    def tell(self, message: Any) -> None:
        self.inbox.put((time.perf_counter(), message))

    def until_terminal(self) -> list[tuple[float, Any]]:
        seen = []
        while True:
            item = self.inbox.get(timeout=DEADLINE)
            seen.append(item)
            if isinstance(item[1], (TurnCompleted, TurnFailed)) or type(item[1]).__name__ == "TurnCancelled":
                return seen


def bench_batch(rounds: int) -> tuple[dict[str, Any], int]:
    from tests.agent.session_kit import (
        start_kit,  # the test kit: store + sessions against a model server
    )

    spec = sleep_tool_registry().get("sleep_1s").spec()
    batch, turns, failures = [], [], 0
    with tempfile.TemporaryDirectory() as workdir, ModelServer(seed=0) as server:
        kit = start_kit(
            Path(workdir) / "state.db",
            server,
            tools={"sleep_1s": spec},
            config=MachineConfig(traits={"sleep_1s": spec.traits}, retry_base=0.01, turn_timeout=60.0),
            home=Path(workdir) / "home",
            workdir=Path(workdir),
        )
        try:
            for r in range(rounds):
                session = f"batch-{r}"
                calls = tuple(ScriptedCall(name="sleep_1s", arguments="{}", id=f"call_{r}_{i}") for i in range(BATCH_SIZE))
                server.script([ToolCallsReply(calls=calls), TextReply(content="all slept")], session=session)
                subscriber = Subscriber()
                kit.session(session).tell(Subscribe(subscriber=subscriber))
                start = time.perf_counter()
                kit.start_turn(session, "sleep eight times")
                events = subscriber.until_terminal()
                started = [t for t, e in events if isinstance(e, ToolStarted)]
                finished = [(t, e) for t, e in events if isinstance(e, ToolFinished)]
                if not isinstance(events[-1][1], TurnCompleted) or len(finished) != BATCH_SIZE or not all(e.ok for _, e in finished):
                    failures += 1
                    continue
                batch.append(max(t for t, _ in finished) - min(started))
                turns.append(events[-1][0] - start)
        finally:
            kit.runtime.stop(timeout=DEADLINE)

    async def bare() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(BATCH_SIZE):
                nursery.start_soon(trio.sleep, 1.0)

    baseline = timed(lambda: trio.run(bare), 1)
    median = statistics.median(batch) if batch else float("nan")
    row = {
        "metric": "parallel_batch",
        "batch_s": round(median, 4),
        "batch_max_s": round(max(batch), 4) if batch else None,
        "turn_s": round(statistics.median(turns), 4) if turns else None,
        "baseline_s": round(baseline[0], 4),
        "overhead_ms": round((median - baseline[0]) * 1e3, 1) if batch else None,
        "target_s": BATCH_TARGET_S,
        "meets_target": bool(batch) and median <= BATCH_TARGET_S,
        "n": len(batch),
        "tools": BATCH_SIZE,
    }
    return row, failures


# -- output ----------------------------------------------------------------------------------------


def ripgrep_version() -> str:
    rg = shutil.which("rg")
    return subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0] if rg else "not installed"


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    if any(r.get("metric") == "patch_fuzzy" for r in rows):
        print(f"{'patch_fuzzy strategy':<24} {'median ms':>10} {'p90 ms':>8} {'str.replace ms':>15} {'ratio':>8}  target")
    for r in rows:
        if r.get("metric") == "patch_fuzzy":
            if r["target_ms"] is None:
                verdict = "(error path: no target)"
            else:
                verdict = ("ok" if r["meets_target"] else "MISS") + f" < {r['target_ms']:g} ms"
            print(f"{r['strategy']:<24} {r['median_ms']:>10.3f} {r['p90_ms']:>8.3f} {r['baseline_median_ms']:>15.3f} {r['ratio']:>8}  {verdict}")
    for r in rows:
        if r.get("metric") == "patch_tool":
            print(
                f"\npatch tool end to end: exact {r['exact_median_ms']:.2f} ms (p90 {r['exact_p90_ms']:.2f}), "
                f"context_aware {r['context_aware_median_ms']:.2f} ms; read+replace+write baseline {r['baseline_median_ms']:.2f} ms "
                f"(ratio {r['ratio_exact']})"
            )
        if r.get("metric") == "danger_check":
            verdict = "ok" if r["meets_target"] else "MISS"
            print(
                f"danger check over {r['commands']} commands: median {r['median_us']} us, p90 {r['p90_us']}, p99 {r['p99_us']}; "
                f"shlex.split {r['baseline_median_us']} us (ratio {r['ratio']}); wrong verdicts {r['wrong_verdicts']}  "
                f"{verdict} <= {r['target_median_us']:g} us"
            )
        if r.get("metric") == "parallel_batch":
            verdict = "ok" if r["meets_target"] else "MISS"
            print(
                f"parallel batch of {r['tools']} x 1 s tools: {r['batch_s']:.3f} s (max {r['batch_max_s']}), turn {r['turn_s']} s, "
                f"bare trio {r['baseline_s']:.3f} s, overhead {r['overhead_ms']} ms, n={r['n']}  {verdict} <= {r['target_s']} s"
            )


SUBJECTS = ("patch_fuzzy", "patch_tool", "parallel_batch", "danger_check")


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--only", choices=SUBJECTS, help="measure this subject alone")
    options = parser.parse_args()
    quiet_loggers()
    wanted = [options.only] if options.only else list(SUBJECTS)
    repeat = 5 if options.quick else 31
    rounds = 1 if options.quick else 3
    info = versions("trio", "msgspec", "pykka", ("ripgrep", ripgrep_version()))
    rows: list[dict[str, Any]] = [{"bench": "tools", "versions": info, "quick": options.quick}]
    if not options.json:
        print(versions_line(info), flush=True)
    failures = 0
    if "patch_fuzzy" in wanted:
        fuzzy, fuzzy_failures = bench_fuzzy(repeat)
        rows += fuzzy
        failures += fuzzy_failures
    for subject, measure in (
        ("patch_tool", lambda: bench_tool(max(3, repeat // 3))),
        ("parallel_batch", lambda: bench_batch(rounds)),
        ("danger_check", lambda: bench_danger(3 if options.quick else 20)),
    ):
        if subject in wanted:
            row, subject_failures = measure()
            rows.append(row)
            failures += subject_failures
    emit(rows, options.json)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
