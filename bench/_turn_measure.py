"""The tools, CPU accounting, baselines and output helpers of ``bench_turn.py`` (the same requests through the OpenAI
SDK and through bare httpx). Split out of ``bench_turn.py``.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import msgspec
import openai
import trio
from _common import print_json

from actors import run_process
from actors.agent import ToolContext, ToolOutput, ToolSpec, ToolTraits
from actors.chaos import Reply, ScriptedCall, TextReply, ToolCallsReply

DEADLINE = 15.0
"""Seconds any wait gives up after (the bench fails instead of hanging)."""
SESSION_HEADER = "X-Hermes-Session-Id"


# -- CPU accounting ----------------------------------------------------------------------------


def thread_group(name: str) -> str:
    if name.startswith("Trio thread"):
        return "trio-workers"
    return re.sub(r"-\d+$", "", name)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of every live thread, by ident."""
    result: dict[int, tuple[str, float]] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        with contextlib.suppress(OSError, ProcessLookupError):
            result[thread.ident] = (thread.name, time.clock_gettime(time.pthread_getcpuclockid(thread.ident)))
    return result


class CpuMeter:
    """Process CPU and per-thread-group CPU spent between ``start`` and ``stop``."""

    def __init__(self) -> None:
        self.total = 0.0
        self.by_group: dict[str, float] = {}
        self._process = 0.0
        self._threads: dict[int, tuple[str, float]] = {}

    def start(self) -> None:
        self._threads = thread_cpu()
        self._process = time.process_time()

    def stop(self) -> None:
        process = time.process_time()
        after = thread_cpu()
        self.total += process - self._process
        known = 0.0
        for ident, (name, seconds) in after.items():
            spent = seconds - self._threads.get(ident, (name, 0.0))[1]
            group = thread_group(name)
            self.by_group[group] = self.by_group.get(group, 0.0) + spent
            known += spent
        self.by_group["(threads that ended)"] = self.by_group.get("(threads that ended)", 0.0) + max(0.0, (process - self._process) - known)


# -- baselines: the same requests straight through the OpenAI SDK, and through bare httpx ------------


async def sdk_call(client: openai.AsyncOpenAI, body: dict[str, Any], session: str) -> None:
    stream = await client.chat.completions.create(**body, extra_headers={SESSION_HEADER: session})
    async for _chunk in stream:
        pass
    await stream.close()


async def raw_call(client: httpx.AsyncClient, body: dict[str, Any], session: str) -> None:
    headers = {SESSION_HEADER: session, "content-type": "application/json", "authorization": "Bearer bench-key"}
    async with client.stream("POST", "/chat/completions", content=msgspec.json.encode(body), headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                msgspec.json.decode(line[6:])


class Baseline:
    """A private ``trio.run`` thread holding one ``AsyncOpenAI`` and one ``httpx.AsyncClient``.

    ``replay`` runs the given request bodies one after another in that thread and returns
    the wall time measured there (the thread hop to and from it is not timed).
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.token: trio.lowlevel.TrioToken | None = None
        self.sdk: openai.AsyncOpenAI | None = None
        self.raw: httpx.AsyncClient | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name="baseline-trio", daemon=True)

    def __enter__(self) -> Baseline:
        self._thread.start()
        if not self._ready.wait(DEADLINE):
            msg = f"the baseline trio thread did not start within {DEADLINE} s"
            raise AssertionError(msg)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self.token is not None and self._stop is not None
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(self._stop.set)
        self._thread.join(DEADLINE)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        self.sdk = openai.AsyncOpenAI(base_url=self.base_url, api_key="bench-key", max_retries=0)
        async with httpx.AsyncClient(base_url=self.base_url) as raw:
            self.raw = raw
            try:
                self._ready.set()
                await self._stop.wait()
            finally:
                await self.sdk.close()

    async def _replay(self, bodies: list[dict[str, Any]], session: str, raw: bool) -> float:
        start = time.perf_counter()
        for body in bodies:
            if raw:
                assert self.raw is not None
                await raw_call(self.raw, body, session)
            else:
                assert self.sdk is not None
                await sdk_call(self.sdk, body, session)
        return time.perf_counter() - start

    def replay(self, bodies: list[dict[str, Any]], session: str, *, raw: bool) -> float:
        assert self.token is not None
        seconds: float = trio.from_thread.run(self._replay, bodies, session, raw, trio_token=self.token)
        return seconds


# -- tools ---------------------------------------------------------------------------------------


async def noop_tool(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
    return ToolOutput(content="ok")


async def terminal_tool(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
    result = await run_process(["bash", "-c", str(arguments["command"])], grace=0.5)
    return ToolOutput(content=result.stdout.decode(errors="replace"), ok=result.returncode == 0)


def make_tools() -> dict[str, ToolSpec]:
    empty = {"type": "object", "properties": {}}
    command = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    return {
        "noop": ToolSpec("noop", "Do nothing and answer ok.", empty, noop_tool, ToolTraits(read_only=True)),
        "terminal": ToolSpec("terminal", "Run a shell command.", command, terminal_tool, ToolTraits()),
    }


ECHO_SCRIPT: tuple[Reply, ...] = ()
"""No script: the server answers ``echo: <last user message>``."""
TOOL_SCRIPT: tuple[Reply, ...] = (ToolCallsReply(calls=(ScriptedCall(name="noop", arguments="{}"),)), TextReply(content="The noop tool said ok."))
"""What the model answers in a tool turn: one call of ``noop``, then text."""
LONG_SCRIPT: tuple[Reply, ...] = (TextReply(content=" ".join(["word"] * 600)),)
"""A 2,999-character answer: the server streams it as ~500 content chunks."""


# -- output -----------------------------------------------------------------------------------


def us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


def per_turn_us(meter: CpuMeter, n: int) -> dict[str, float]:
    ordered = sorted(meter.by_group.items(), key=lambda item: -item[1])
    return {group: us(seconds / n) for group, seconds in ordered if seconds / n >= 1e-6}


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    turns = [r for r in rows if r["metric"].startswith("turn_")]
    cancels = [r for r in rows if r["metric"].startswith("cancel_")]
    print(
        f"{'metric':<12} {'median us':>10} {'p90 us':>9} {'p99 us':>9} {'base med':>9} {'base p90':>9} "
        f"{'overhead':>9} {'ratio':>6} {'CPU us/turn':>12} {'base CPU':>9} {'raw med':>8} {'raw CPU':>8} {'n':>5}  target"
    )
    for r in turns:
        verdict = ("ok" if r["meets_target"] else "MISS") + f" overhead <= {r['target_overhead_us']:g}"
        print(
            f"{r['metric']:<12} {r['median_us']:>10.1f} {r['p90_us']:>9.1f} {r['p99_us']:>9.1f} {r['baseline_median_us']:>9.1f} "
            f"{r['baseline_p90_us']:>9.1f} {r['overhead_us']:>9.1f} {r['ratio']:>6.2f} {r['cpu_us_per_turn']:>12.1f} "
            f"{r['baseline_cpu_us_per_turn']:>9.1f} {r['raw_median_us']:>8.1f} {r['raw_cpu_us_per_turn']:>8.1f} {r['n']:>5}  {verdict}"
        )
    for r in turns:
        print(f"\n{r['metric']}: {r['note']}")
        print("  CPU per turn by thread (us), stack:    " + ", ".join(f"{k} {v:g}" for k, v in r["cpu_by_thread_us"].items()))
        print("  CPU per turn by thread (us), baseline: " + ", ".join(f"{k} {v:g}" for k, v in r["baseline_cpu_by_thread_us"].items()))
        print("  CPU per turn by thread (us), raw:      " + ", ".join(f"{k} {v:g}" for k, v in r["raw_cpu_by_thread_us"].items()))
        print("  first arrival after StartTurn (median us): " + ", ".join(f"{k} {v:g}" for k, v in r["phases_us"].items()))
        if "hermes_cpu_ms_per_tool_turn" in r:
            print(
                f"  Hermes run_agent.py: {r['hermes_cpu_ms_per_tool_turn']} ms CPU per such turn, "
                f"{r['hermes_cpu_over_ours']} the whole process's CPU here (model server included)"
            )
    print(f"\n{'metric':<20} {'p50 us':>9} {'p90 us':>9} {'p99 us':>9} {'max us':>9} {'hop us':>8} {'ratio':>6} {'n':>4}  target")
    for r in cancels:
        verdict = ("ok" if r["meets_target"] else "MISS") + f" p99 <= {r['target_p99_us']:g}"
        print(
            f"{r['metric']:<20} {r['median_us']:>9.1f} {r['p90_us']:>9.1f} {r['p99_us']:>9.1f} {r['max_us']:>9.1f} "
            f"{r['baseline_median_us']:>8.1f} {r['ratio']:>6.2f} {r['n']:>4}  {verdict}"
        )
    for r in cancels:
        extra = ""
        if "leftover_processes" in r:
            extra += f"; processes left after cancel: {r['leftover_processes']}"
        if "group_exit_median_ms" in r:
            extra += f"; cancel -> bash leader exited: median {r['group_exit_median_ms']} ms, p99 {r['group_exit_p99_ms']} ms"
        print(f"  {r['metric']}: {r['note']}{extra}")
