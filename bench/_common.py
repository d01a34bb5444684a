"""What the ``bench_*.py`` scripts share: the ``--json`` / ``--quick`` options, quiet kernel
loggers, the versions header, JSON lines, percentiles, latency rows, CPU pinning and the
``/proc`` and FIFO helpers of the cancel benches.

Imported as a sibling (``from _common import ...``): running a script puts this folder on
``sys.path``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import select
import signal
import statistics
from collections.abc import Callable, Iterable, Iterator
from typing import Any

QUICK_HELP = "a much shorter run (smoke test)"
KERNEL_LOGGERS = ("actors", "supervisor", "pykka")


# -- command line -------------------------------------------------------------------------------


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def bench_parser(doc: str | None, *, quick_help: str = QUICK_HELP) -> argparse.ArgumentParser:
    """The parser every bench starts from: its docstring's first line, ``--json`` and ``--quick``."""
    # SIGTERM (``kill``, ``timeout``) unwinds like Ctrl+C, so every bench's ``finally`` stops the
    # servers it started (before, a killed bench_server --workers left its serve processes running).
    signal.signal(signal.SIGTERM, _exit_on_term)
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser


def quiet_loggers() -> None:
    """Only critical records from the kernel (crashes and restarts are what some benches do)."""
    for name in KERNEL_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def parse_options(doc: str | None) -> argparse.Namespace:
    """``--json`` / ``--quick`` parsed, kernel loggers quieted."""
    options = bench_parser(doc).parse_args()
    quiet_loggers()
    return options


# -- header and JSON lines ----------------------------------------------------------------------


def versions(*packages: str | tuple[str, str]) -> dict[str, str]:
    """Python, then each package (a distribution name, or ``(name, version)``), then platform and CPUs."""
    info = {"python": platform.python_version()}
    for package in packages:
        name, version = package if isinstance(package, tuple) else (package, importlib.metadata.version(package))
        info[name] = version
    info["platform"] = platform.platform()
    info["cpus"] = str(os.cpu_count())
    return info


def versions_line(info: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in info.items())


def print_json(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        print(json.dumps(row), flush=True)


def print_header(bench: str, info: dict[str, str], as_json: bool, text: str, **fields: Any) -> None:
    """The first output: ``{"bench", "versions", **fields}`` as JSON, or the versions and ``text``."""
    if as_json:
        print_json([{"bench": bench, "versions": info, **fields}])
    else:
        print("versions: " + versions_line(info))
        print(text)


# -- statistics ---------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``; NaN for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def latency_row(
    bench: str,
    metric: str,
    values: list[float],
    baseline: list[float],
    *,
    target_us: float | None,
    note: str,
    baseline_p90: bool = False,
) -> dict[str, Any]:
    """Median / p90 / p99 of ``values`` (us) against the baseline's median, with an optional median target."""
    median, base = statistics.median(values), statistics.median(baseline)
    row: dict[str, Any] = {
        "bench": bench,
        "metric": metric,
        "median_us": round(median, 1),
        "p90_us": round(percentile(values, 90), 1),
        "p99_us": round(percentile(values, 99), 1),
        "baseline_median_us": round(base, 1),
    }
    if baseline_p90:
        row["baseline_p90_us"] = round(percentile(baseline, 90), 1)
    row["ratio"] = round(median / base, 2)
    row["n"] = len(values)
    if target_us is not None:
        row["target_median_us"] = target_us
        row["meets_target"] = median <= target_us
    row["note"] = note
    return row


# -- threads, processes, FIFOs --------------------------------------------------------------------


def can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1


@contextlib.contextmanager
def pinned(thread_ids: list[int]) -> Iterator[None]:
    """Pin the calling thread and the native ``thread_ids`` to one CPU for the block, then restore."""
    ids = [0, *thread_ids]  # 0 is the calling thread
    saved = [os.sched_getaffinity(tid) for tid in ids]
    cpu = min(saved[0])
    for tid in ids:
        os.sched_setaffinity(tid, {cpu})
    try:
        yield
    finally:
        for tid, cpus in zip(ids, saved, strict=True):
            with contextlib.suppress(OSError):  # the thread has ended
                os.sched_setaffinity(tid, cpus)


def group_survivors(pgid: int) -> int:
    """Live (non-zombie) processes still in group ``pgid`` (none may outlive a cancel)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            count += 1
    return count


@contextlib.contextmanager
def fifo_reader(fifo: str, deadline: float, writer: str = "the subprocess") -> Iterator[Callable[[], int]]:
    """Open ``fifo`` for reading (without blocking); yield a function that waits for the pid written to it."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:

        def wait_running() -> int:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(deadline * 1000):
                msg = f"{writer} did not write to {fifo} within {deadline} s"
                raise AssertionError(msg)
            return int(os.read(fd, 64).split()[0])

        yield wait_running
    finally:
        os.close(fd)
