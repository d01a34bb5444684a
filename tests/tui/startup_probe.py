"""Measures how long ``hermes chat`` takes from start to a usable prompt, in a real terminal (tmux).

Not a test (the house rules keep timed assertions out of ``tests/``): run it by hand::

    .venv/bin/python -m tests.tui.startup_probe [--runs 7] [--json]

For each run it starts the command in a fresh tmux session (120x32) and polls the pane
every 5 ms. ``prompt`` is when the prompt's placeholder is drawn (the input takes keys
from then on); ``ready`` is when the status bar says ``idle`` (the runtime is up and a
message goes out at once; anything typed earlier is sent then). Variants:

- ``hermes chat``: the installed console script (``python -m actors.cli chat`` without one);
- ``module``: ``python -m actors.platforms.tui chat`` as the package is today;
- ``lazy-platforms``: the same, with ``actors.platforms``'s ``__init__`` replaced by an
  empty package, to show what a lazy ``actors/platforms/__init__.py`` would give;
- ``python``: a bare ``python -c pass``, the floor.

The model is the test model server (it is not called: nothing is sent).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from actors.chaos import ModelServer

ROOT = Path(__file__).resolve().parents[2]
LAZY_PLATFORMS = (
    "import sys, types, pathlib, actors; "
    "p = types.ModuleType('actors.platforms'); p.__path__ = [str(pathlib.Path(actors.__file__).parent / 'platforms')]; "
    "sys.modules['actors.platforms'] = p; "
    "from actors.platforms.tui.__main__ import main; sys.exit(main(['chat']))"
)


def _pane(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout


def measure(command: str, env: dict[str, str], *, prompt_mark: str | None, ready_mark: str | None, timeout: float = 20.0) -> tuple[float, float]:
    name = f"probe{os.getpid()}{time.monotonic_ns()}"
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    started = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "32", f"cd {ROOT} && env {exports} {command}; sleep 30"], check=True)
    prompt = ready = float("nan")
    try:
        while time.monotonic() - started < timeout:
            text = _pane(name)
            now = time.monotonic() - started
            if prompt != prompt and (prompt_mark is None or prompt_mark in text):
                prompt = now
            if ready_mark is None or ready_mark in text:
                ready = now
                break
            time.sleep(0.005)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    return prompt, ready


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    print(f"python {sys.version.split()[0]}, tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()}")
    python = sys.executable
    keeper = f"probe-keeper{os.getpid()}"  # killing the last session ends the tmux server; keep one
    subprocess.run(["tmux", "new-session", "-d", "-s", keeper, "sleep 600"], check=True)
    try:
        return _probe(args, python)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", keeper], capture_output=True)


def _probe(args: argparse.Namespace, python: str) -> int:
    with ModelServer() as server, tempfile.TemporaryDirectory() as home:
        env = {"HERMES_HOME": home, "HERMES_MODEL": "test-model", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
        hermes = Path(python).with_name("hermes")
        variants = {
            "python": (f"{python} -c 'print(\"up\")'", "up", "up"),
            "hermes chat": (f"{hermes} chat" if hermes.exists() else f"{python} -m actors.cli chat", "Ask anything", " idle "),
            "module": (f"{python} -m actors.platforms.tui chat", "Ask anything", " idle "),
            "lazy-platforms": (f'{python} -c "{LAZY_PLATFORMS}"', "Ask anything", " idle "),
        }
        measure(variants["module"][0], env, prompt_mark="Ask anything", ready_mark=" idle ")  # warm the file cache
        for label, (command, prompt_mark, ready_mark) in variants.items():
            runs = [measure(command, env, prompt_mark=prompt_mark, ready_mark=ready_mark) for _ in range(args.runs)]
            prompt = statistics.median(r[0] for r in runs) * 1000
            ready = statistics.median(r[1] for r in runs) * 1000
            if args.json:
                print(json.dumps({"variant": label, "runs": args.runs, "prompt_ms": round(prompt), "ready_ms": round(ready)}))
            else:
                print(f"{label:<16} prompt usable {prompt:6.0f} ms   runtime ready {ready:6.0f} ms   (median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
