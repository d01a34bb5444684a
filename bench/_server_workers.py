"""``bench_server.py --workers 1,2,4``: the real ``hermes serve --workers N`` under the same load.

Per worker count N and concurrency C: a fresh home (config.yaml: the model process, one model
attempt per call, no concurrency cap) and a fresh ``hermes serve --workers N --port 0``
(N = 1: the plain ``hermes serve``, no cluster node). The model scripts the stack's sessions to
call the built-in ``todo`` tool (``{"action": "list"}``, in memory: the server has no bench
tool of its own) and the baseline's to call ``noop`` as in the default run. Clients, rounds and
figures are the default run's (``drive_level``), except that each simulated user keeps its own
keep-alive connection (``h11-each``): its session stays with the worker its connection reached
(a request for a session another worker holds is refused with 409 until forwarding is built),
so the client keeps an idle connection 70 s (the server keeps it 75 s) instead of its usual 5 s;
when its connection was closed anyway (a round of the other side longer than that on a loaded
machine) and the new one reached another worker, the refused turn is sent again on a new
connection (``sticky_turn``): each such resend is counted (``turns_moved``), and its wall time
includes the refusals.
The server's CPU is the parent's and every worker's; its per-thread split and reactor lag are
not read (no control channel). The host's load average (1 min) is recorded around each level:
the machine is shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio
from _common import print_header, print_json, versions
from _server_procs import KEY, MODEL_LATENCY, ROOT, Child, listen_overflows, proc_cpu, proc_status
from _server_report import Level, Side, level_row, print_table

START = 180.0
"""Seconds N interpreters have to start on a shared 2-core machine."""


class Served:
    """A running ``hermes serve [--workers N]``: its pids, port, and a clean stop."""

    def __init__(self, workers: int, home: Path, log: Path) -> None:
        self.log = log.open("w")
        argv = [sys.executable, "-m", "actors.cli", "serve", "--port", "0", "--workers", str(workers), "--drain-timeout", "5"]
        env = {**os.environ, "HERMES_HOME": str(home)}
        env.pop("API_SERVER_KEY", None)
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env, cwd=ROOT, start_new_session=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + START
        first = ""
        while time.monotonic() < deadline and not first and self.process.poll() is None:
            first = self.process.stdout.readline()
        found = re.search(r"listening on http://[\d.]+:(\d+)/v1", first)
        if not found:
            self.close()
            raise RuntimeError(f"hermes serve --workers {workers} did not start: {first!r}; see {log}")
        self.port = int(found.group(1))
        pids = re.search(r"pids ([\d, ]+)\)", first)
        self.pids = [self.process.pid, *(int(p) for p in pids.group(1).split(", "))] if pids else [self.process.pid]
        """The processes whose CPU is the server's: the parent and each worker (or the one server)."""

    def cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            with contextlib.suppress(OSError):
                total += proc_cpu(pid)
        return total

    def peak_rss_kib(self) -> int:
        return sum(int(proc_status(pid)["VmHWM"].split()[0]) for pid in self.pids[1:] or self.pids)

    def close(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            code = -9
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.log.close()
        return "stopped cleanly" if code == 0 else f"exit {code}"


class ServedProbes:
    """``Probes`` for a served command: CPU of its processes, of the model and of this one."""

    def __init__(self, served: Served, model: Child) -> None:
        self.served, self.model = served, model

    def cpu(self) -> dict[str, Any]:
        return {"server": self.served.cpu(), "model": proc_cpu(self.model.pid), "client": time.process_time(), "threads": {}, "lag_max_ms": 0.0}


def make_home(root: Path, model_url: str) -> Path:
    home = root / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f'model:\n  default: test-model\n  base_url: "{model_url}"\n  api_key: bench-key\n'
        "agent:\n  api_max_retries: 0\napi_server:\n  max_concurrent: 1000000\n  model_name: hermes-bench\n"
    )
    (home / ".env").write_text(f"API_SERVER_KEY={KEY}\n")
    return home


@contextlib.contextmanager
def model_process(workdir: Path) -> Iterator[tuple[Child, str]]:
    model = Child(["--model-server"], workdir / "model.log")
    try:
        yield model, model.readline()
    finally:
        model.close()


def run_one(
    workers: int, c: int, plan: tuple[int, int], model: Child, model_url: str, tmp: Path, drive: Callable[..., Any], moves: Callable[[], int]
) -> dict[str, Any]:
    turns, rounds = plan
    level = Level(c, turns, rounds, Side("stack"), Side("baseline"), client="h11-each")
    per_session = 1 + rounds * turns
    for prefix, tool in ((f"s{c}-", " todo"), (f"b{c}-", "")):
        reply = model.command(f"script {prefix} {c} {per_session}{tool}")
        assert reply == "ok", reply
    root = tmp / f"w{workers}-c{c}"
    root.mkdir()
    load_before, moved = os.getloadavg()[0], moves()
    started = time.perf_counter()
    served = Served(workers, make_home(root, model_url), root / "serve.log")
    try:
        overflows = listen_overflows()
        trio.run(drive, level, served.port, model_url, ServedProbes(served, model))
        level.listen_overflows = listen_overflows() - overflows
        level.peak_rss_kib = served.peak_rss_kib()
        for name, prefix in (("stack", f"s{c}-"), ("baseline", f"b{c}-")):
            stats = json.loads(model.command(f"stats {prefix}"))
            level.model_requests[name] = {"requests": stats["requests"], "connections": stats["connections"]}
    finally:
        level.stopped_cleanly = served.close()
        level.server_errors_logged = [
            line for line in (root / "serve.log").read_text(errors="replace").splitlines() if " ERROR " in line or "Traceback" in line
        ]
        level.seconds = time.perf_counter() - started
    row = level_row(level)
    row["workers"] = workers
    row["turns_moved"] = moves() - moved
    row["load_avg_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    return row


def workers_main(workers_list: list[int], levels: list[int], *, json_output: bool, quick: bool, drive: Callable[..., Any], moves: Callable[[], int]) -> int:
    import actors.agent._http1 as http1

    # The client keeps an idle connection as long as the server does (75 s), not its default
    # 5 s: a round of the other side lasts longer, and a new connection may reach another worker.
    http1.KEEPALIVE_EXPIRY = 70.0
    plan = {100: (1, 2), 1000: (1, 2)} if quick else {100: (2, 3), 1000: (1, 3)}
    info = versions("pykka", "trio", "msgspec", "hypercorn", "h11", "openai")
    text = (
        f"workers {workers_list} x levels {levels}; real 'hermes serve --workers N'; each turn = 2 model round trips of "
        f"{MODEL_LATENCY * 1000:.0f} ms; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start\n"
    )
    print_header("server --workers", info, json_output, text)
    rows: list[dict[str, Any]] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp, model_process(Path(tmp)) as (model, model_url):
        for c in levels:
            for workers in workers_list:
                row = run_one(workers, c, plan.get(c, (1, 2)), model, model_url, Path(tmp), drive, moves)
                rows.append(row)
                failed = failed or bool(row["stack"]["errors"] or row["baseline"]["errors"])
                if json_output:
                    print_json([row])
                else:
                    print(f"-- {workers} worker(s), load average {row['load_avg_1m']['before']} -> {row['load_avg_1m']['after']}")
                    print_table([row])
    summary = [
        {
            "workers": r["workers"],
            "concurrency": r["concurrency"],
            "turns_per_s": r["stack"]["turns_per_s"],
            "baseline_turns_per_s": r["baseline"]["turns_per_s"],
            "throughput_ratio": r.get("throughput_ratio"),
            "added_p99_ms": r["stack"]["added_p99_ms"],
            "errors": r["stack"]["errors"],
            "turns_moved": r["turns_moved"],
            "load_avg_1m": r["load_avg_1m"],
        }
        for r in rows
    ]
    if json_output:
        print_json([{"bench": "server --workers", "summary": summary}])
    else:
        print(f"\n{'C':>5} {'workers':>7} {'turns/s':>8} {'baseline':>8} {'ratio':>6} {'added p99 ms':>12} {'err':>4} {'moved':>5}  load 1m")
        for s in summary:
            print(
                f"{s['concurrency']:>5} {s['workers']:>7} {s['turns_per_s'] or 0:>8.1f} {s['baseline_turns_per_s'] or 0:>8.1f} "
                f"{s['throughput_ratio'] or 0:>6.2f} {s['added_p99_ms'] or 0:>12.1f} {s['errors']:>4} {s['turns_moved']:>5}  {s['load_avg_1m']['before']} -> {s['load_avg_1m']['after']}"
            )
    return 1 if failed else 0
