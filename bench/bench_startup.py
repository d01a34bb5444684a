"""Start-up: what ``hermes --help`` costs, against a bare interpreter, and what reading config.yaml costs.

Issue 16 sets ``hermes --help`` <= 150 ms: the typed configuration must not make the command
line slower, so ``actors.cli`` imports none of ``actors.config`` (nor YAML) at start.

- ``help``: wall time of ``python -m actors.cli --help`` (a fresh interpreter each run, output
  discarded), median of N runs.
- ``baseline``: ``python -c pass`` in the same invocation, runs interleaved with ``help`` (ABAB),
  so the ratio ``help / baseline`` is read on the same machine state.
- ``config_import``: ``python -c "import actors.config"`` minus the baseline: what a command
  that reads config.yaml (serve, chat, doctor, config) pays once.
- ``load``: in this process, ``load_config`` of a config.yaml in Hermes's layout (about 100
  keys, every section of tests/config/hermes_layout.py) with a ``.env``, median of many calls
  (YAML parse, ``${NAME}`` expansion, the key walk, msgspec conversion).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import parse_options, print_header, print_json, versions

from actors.config import load_config
from tests.config.hermes_layout import HERMES_CONFIG

BUDGET_MS = 150.0


def _run(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    options = parse_options(__doc__)
    runs = 5 if options.quick else 25
    loads = 50 if options.quick else 500
    info = versions("msgspec", "pyyaml", ("ruamel.yaml", __import__("ruamel.yaml").yaml.__version__))
    print_header("startup", info, options.json, f"{runs} runs each, interleaved; load_config x {loads}", runs=runs)
    python = sys.executable
    commands = {
        "baseline": [python, "-c", "pass"],
        "help": [python, "-m", "actors.cli", "--help"],
        "config_import": [python, "-c", "import actors.config"],
    }
    for argv in commands.values():  # warm the page cache and .pyc files
        _run(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(_run(argv))
    median = {name: statistics.median(values) for name, values in times.items()}

    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        (home / "config.yaml").write_text(HERMES_CONFIG)
        (home / ".env").write_text("LOCAL_KEY=sk-local-0123456789\n")
        load_config(home, {})
        samples = []
        for _ in range(loads):
            started = time.perf_counter()
            load_config(home, {})
            samples.append((time.perf_counter() - started) * 1000)
    rows = [
        {"metric": "baseline", "median_ms": round(median["baseline"], 1)},
        {"metric": "help", "median_ms": round(median["help"], 1), "ratio": round(median["help"] / median["baseline"], 2), "budget_ms": BUDGET_MS},
        {"metric": "config_import", "median_ms": round(median["config_import"] - median["baseline"], 1), "note": "minus baseline"},
        {"metric": "load", "median_ms": round(statistics.median(samples), 3), "p90_ms": round(sorted(samples)[int(len(samples) * 0.9)], 3)},
    ]
    if options.json:
        print_json(rows)
    else:
        for row in rows:
            print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 0 if median["help"] <= BUDGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
