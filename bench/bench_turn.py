"""Cost of a whole agent turn through the session stack, and how fast a cancel lands.

Everything runs in this one process: the test model server (``actors.chaos.ModelServer``)
answers in 0 ms from its own thread with its own ``trio.run``; the agent runtime
(``actors.agent.start_agent_runtime``: store writer on a real SQLite file in a temporary
directory, dynamic supervisor of sessions, ``idle_timeout=0``) talks to it over real HTTP
on 127.0.0.1. A subscriber object (anything with ``tell``) stamps ``time.perf_counter()``
when each session event reaches it.

Measured:

- ``turn_echo``: wall time of one single-round-trip turn, from ``StartTurn`` told to the
  session's address until ``TurnCompleted`` reaches the subscriber. The server is in echo
  mode (no script: it streams ``echo: <last user message>``). The turns of a round run one
  after another in the same session (so the transcript, and the request, grow by two
  messages per turn); every round uses a new session whose first turn (it starts the
  session actor, loads and creates the session in the store) is an untimed warm-up.
  Baseline, same round: the *exact request bodies the server received* from the stack
  (system prompt, whole history, tools schema, stream options, session header) replayed
  with ``openai.AsyncOpenAI(...).chat.completions.create(stream=True, ...)`` inside
  ``trio.run`` on the main thread, reading each stream to its end; one client per round,
  warmed up by one untimed call (so both sides reuse a keep-alive connection). Reported:
  median / p90 / p99 of both, ``overhead_us`` = median(stack) - median(baseline) (goal
  <= 1,000 us), ratio, and CPU time per turn (``time.process_time`` delta over the timed
  turns / N, for the whole process, the in-process server included), split by thread
  (``pthread_getcpuclockid``: main, model server, reactor, session actor, store writer...).
  ``phases_us``: median arrival time of the first event of each kind after ``StartTurn``.
- ``turn_tool``: the same for a two-round-trip tool turn: the session's script is
  ``ToolCallsReply`` (one call of the ``noop`` tool, an ``async def`` returning at once) then
  ``TextReply``; baseline: the two recorded requests replayed back to back (the server
  is scripted the same two replies again). The Hermes (``run_agent.py``) bar this
  compares with: 280-500 ms of CPU per two-round-trip tool turn.
- ``cancel_stream``: the scripted reply stalls after two chunks
  (``TextReply(stall_after_chunks=2, stall_seconds=30)``); once the first ``TextDelta``
  reached the subscriber, ``CancelTurn`` is told; latency until ``TurnCancelled`` reaches
  the subscriber (goal p99 <= 50 ms). Baseline: an ``Address.tell`` of a no-op message to
  the same session actor until a reply object is told back (one mailbox hop each way).
- ``cancel_tool_started``: the model calls the ``terminal`` tool (``actors.run_process``
  of ``bash -c "sleep 30.<n>"``); ``CancelTurn`` is told when ``ToolStarted`` reaches the
  subscriber (the group may not be spawned yet); latency until ``TurnCancelled``. Then
  ``/proc`` must show no ``sleep 30.<n>`` left (``leftover_processes``).
- ``cancel_tool_running``: the same, but the command first writes ``$$`` to a FIFO, so
  the bench cancels only once the group runs; besides ``TurnCancelled`` it reports
  ``group_exit_ms`` (cancel -> the bash leader exited, seen through a pidfd) and the
  survivors of the group.

All cancel samples use one session per kind, turn after turn. The runtime and the server
are stopped at the end; the exit status is 1 if a turn did not complete, a cancel did not
end in ``TurnCancelled`` or a process outlived its cancel.

Run from the repository root: ``python bench/bench_turn.py [--quick] [--json]``
(about 25 s; ``--quick`` a few seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import queue
import re
import select
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai  # noqa: E402
import trio  # noqa: E402

from actors import Address, run_process  # noqa: E402
from actors.agent import (  # noqa: E402
    HubRegistry,
    MachineConfig,
    ModelClients,
    ModelSettings,
    SessionDeps,
    ToolOutput,
    ToolSpec,
    ToolTraits,
    reader_opener,
    session_address,
    start_agent_runtime,
)
from actors.chaos import ModelServer, ScriptedCall, TextReply, ToolCallsReply  # noqa: E402
from protocols._session import (  # noqa: E402
    TERMINAL_EVENTS,
    CancelTurn,
    StartTurn,
    Subscribe,
    TextDelta,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    Unsubscribe,
)
from supervisor import Runtime  # noqa: E402

OVERHEAD_TARGET_US = 1_000.0
CANCEL_P99_TARGET_US = 50_000.0
HERMES_TOOL_TURN_CPU_MS = (280, 500)
DEADLINE = 15.0
"""Seconds any wait gives up after (the bench fails instead of hanging)."""
SESSION_HEADER = "X-Hermes-Session-Id"
USER_TEXT = "Please answer this benchmark message number {i:04d}; it is about one hundred characters long."


# -- tools ---------------------------------------------------------------------------------------


async def noop_tool(arguments: dict[str, Any]) -> ToolOutput:
    return ToolOutput(content="ok")


async def terminal_tool(arguments: dict[str, Any]) -> ToolOutput:
    result = await run_process(["bash", "-c", str(arguments["command"])], grace=0.5)
    return ToolOutput(content=result.stdout.decode(errors="replace"), ok=result.returncode == 0)


def make_tools() -> dict[str, ToolSpec]:
    empty = {"type": "object", "properties": {}}
    command = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    return {
        "noop": ToolSpec("noop", "Do nothing and answer ok.", empty, noop_tool, ToolTraits(read_only=True)),
        "terminal": ToolSpec("terminal", "Run a shell command.", command, terminal_tool, ToolTraits()),
    }


# -- the stack -----------------------------------------------------------------------------------


class Subscriber:
    """Stamps every session event on arrival (in the publishing thread) and queues it."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[float, Any]] = queue.Queue()

    def tell(self, message: Any) -> None:
        self.inbox.put((time.perf_counter(), message))

    def until(self, kinds: type[Any] | tuple[type[Any], ...]) -> list[tuple[float, Any]]:
        """Events up to and including the first one of ``kinds``."""
        seen = []
        while True:
            try:
                item = self.inbox.get(timeout=DEADLINE)
            except queue.Empty:
                msg = f"no {kinds} reached the subscriber within {DEADLINE} s"
                raise AssertionError(msg) from None
            seen.append(item)
            if isinstance(item[1], kinds):
                return seen


class Pong:
    """The reply half of the mailbox-hop baseline: records when it was first told."""

    def __init__(self) -> None:
        self.at = 0.0
        self.event = threading.Event()

    def tell(self, message: Any) -> None:
        if not self.event.is_set():
            self.at = time.perf_counter()
            self.event.set()


class Stack:
    """The agent runtime + the in-process model server."""

    def __init__(self, workdir: str) -> None:
        self.server = ModelServer(seed=0).start()
        self.store_file = Path(workdir) / "state.db"
        tools = make_tools()
        deps = SessionDeps(
            hubs=HubRegistry(),
            open_reader=reader_opener(self.store_file),
            model=ModelSettings(model="test-model", base_url=self.server.base_url, api_key="bench-key"),
            clients=ModelClients(),
            tools=tools,
            config=MachineConfig(traits={name: spec.traits for name, spec in tools.items()}, retry_base=0.01, turn_timeout=60.0),
            idle_timeout=0,
        )
        try:
            self.runtime: Runtime = start_agent_runtime(self.store_file, deps)
        except BaseException:
            self.server.stop(timeout=DEADLINE)
            raise

    def session(self, session_id: str) -> tuple[Address[Any], Subscriber]:
        address = session_address(self.runtime.registry, self.runtime.lookup("/sessions"), session_id)
        subscriber = Subscriber()
        address.tell(Subscribe(subscriber=subscriber))
        return address, subscriber

    def bodies(self, session_id: str) -> list[dict[str, Any]]:
        return [
            r.body
            for r in self.server.requests
            if r.session == session_id and r.path == "/v1/chat/completions" and isinstance(r.body, dict)
        ]

    def stop(self) -> bool:
        try:
            return self.runtime.stop(timeout=DEADLINE)
        finally:
            self.server.stop(timeout=DEADLINE)


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
        self.by_group["(threads that ended)"] = self.by_group.get("(threads that ended)", 0.0) + max(
            0.0, (process - self._process) - known
        )


# -- turns through the stack -------------------------------------------------------------------------


class Series:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.phases: dict[str, list[float]] = {}
        self.cpu = CpuMeter()
        self.failures = 0

    def add_turn(self, start: float, events: list[tuple[float, Any]]) -> None:
        at, last = events[-1]
        if not isinstance(last, TurnCompleted):
            self.failures += 1
        self.wall.append(at - start)
        first: dict[str, float] = {}
        for stamp, event in events:
            first.setdefault(type(event).__name__, stamp - start)
        for name, offset in first.items():
            self.phases.setdefault(name, []).append(offset)


def stack_turns(stack: Stack, session_id: str, turns: int, series: Series, *, tool: bool) -> None:
    """One untimed warm-up turn, then ``turns`` timed turns, sequential, in one new session."""
    if tool:
        stack.server.script(
            [ToolCallsReply(calls=(ScriptedCall(name="noop", arguments="{}"),)), TextReply(content="The noop tool said ok.")]
            * (turns + 1),
            session=session_id,
        )
    address, subscriber = stack.session(session_id)
    address.tell(StartTurn(text=USER_TEXT.format(i=0)))
    if not isinstance(subscriber.until(TERMINAL_EVENTS)[-1][1], TurnCompleted):
        series.failures += 1
    series.cpu.start()
    for i in range(1, turns + 1):
        start = time.perf_counter()
        address.tell(StartTurn(text=USER_TEXT.format(i=i)))
        series.add_turn(start, subscriber.until(TERMINAL_EVENTS))
    series.cpu.stop()


# -- baseline: the same requests straight through the OpenAI SDK ------------------------------------


def baseline_calls(stack: Stack, session_id: str, bodies: list[dict[str, Any]], per_turn: int, series: Series, *, tool: bool) -> None:
    """Replay ``bodies`` with AsyncOpenAI in ``trio.run``; one sample per ``per_turn`` calls."""
    if tool:
        stack.server.script(
            [ToolCallsReply(calls=(ScriptedCall(name="noop", arguments="{}"),)), TextReply(content="The noop tool said ok.")]
            * (len(bodies) // 2),
            session=session_id,
        )

    async def call(client: openai.AsyncOpenAI, body: dict[str, Any], session: str) -> None:
        stream = await client.chat.completions.create(**body, extra_headers={SESSION_HEADER: session})
        async for _chunk in stream:
            pass
        await stream.close()

    async def main() -> None:
        client = openai.AsyncOpenAI(base_url=stack.server.base_url, api_key="bench-key", max_retries=0)
        try:
            await call(client, {**bodies[0], "messages": bodies[0]["messages"][:2]}, "baseline-warmup")
            series.cpu.start()
            for index in range(0, len(bodies), per_turn):
                start = time.perf_counter()
                for body in bodies[index : index + per_turn]:
                    await call(client, body, session_id)
                series.wall.append(time.perf_counter() - start)
            series.cpu.stop()
        finally:
            await client.close()

    trio.run(main)


def turn_round(stack: Stack, tag: str, turns: int, stack_series: Series, base_series: Series, *, tool: bool) -> None:
    session_id = f"{tag}-{time.monotonic_ns()}"
    stack_turns(stack, session_id, turns, stack_series, tool=tool)
    per_turn = 2 if tool else 1
    bodies = stack.bodies(session_id)[per_turn:]  # the warm-up turn's requests are not replayed
    if len(bodies) != turns * per_turn:
        msg = f"expected {turns * per_turn} recorded requests for {session_id}, found {len(bodies)}"
        raise AssertionError(msg)
    baseline_calls(stack, session_id, bodies, per_turn, base_series, tool=tool)


# -- cancels -------------------------------------------------------------------------------------------


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as file:
                cmdline = file.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry.name}/stat") as file:
                state = file.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in "ZX":
            found.append(int(entry.name))
    return found


def group_survivors(pgid: int) -> int:
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


def settle(check: Any, *, within: float = 3.0) -> int:
    """Poll ``check()`` (a count) until it is 0 or ``within`` s passed; return the last count."""
    deadline = time.monotonic() + within
    while True:
        count = int(check())
        if count == 0 or time.monotonic() > deadline:
            return count
        time.sleep(0.005)


class CancelResults:
    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {}
        self.not_cancelled = 0
        self.leftovers: dict[str, int] = {}

    def add(self, name: str, seconds: float) -> None:
        self.series.setdefault(name, []).append(seconds)


def cancel_and_time(address: Address[Any], subscriber: Subscriber, results: CancelResults, name: str) -> float:
    start = time.perf_counter()
    address.tell(CancelTurn())
    at, event = subscriber.until(TERMINAL_EVENTS)[-1]
    if not isinstance(event, TurnCancelled):
        results.not_cancelled += 1
    results.add(name, at - start)
    results.add("hop", mailbox_hop(address, event.seq))
    return start


def mailbox_hop(address: Address[Any], last_seq: int) -> float:
    """Baseline of a cancel: the session actor's mailbox there and a ``tell`` back.

    ``Subscribe(after_seq=last_seq - 1)`` makes the session replay exactly one event to the
    new subscriber: the same path as ``CancelTurn`` -> ``TurnCancelled`` minus the turn
    machine's work and the cancel effects.
    """
    pong = Pong()
    start = time.perf_counter()
    address.tell(Subscribe(subscriber=pong, after_seq=last_seq - 1))
    if not pong.event.wait(DEADLINE):
        msg = f"the session did not replay event {last_seq} within {DEADLINE} s"
        raise AssertionError(msg)
    address.tell(Unsubscribe(subscriber=pong))
    return pong.at - start


def cancel_stream(stack: Stack, count: int, results: CancelResults) -> None:
    session_id = f"cancel-stream-{time.monotonic_ns()}"
    stall = TextReply(content="one two three four five six seven eight nine ten", stall_after_chunks=2, stall_seconds=30)
    stack.server.script([stall] * count, session=session_id)
    address, subscriber = stack.session(session_id)
    for i in range(count):
        address.tell(StartTurn(text=USER_TEXT.format(i=i)))
        subscriber.until(TextDelta)
        cancel_and_time(address, subscriber, results, "cancel_stream")


def terminal_call(command: str) -> ToolCallsReply:
    return ToolCallsReply(calls=(ScriptedCall(name="terminal", arguments=json.dumps({"command": command})),))


def cancel_tool_started(stack: Stack, count: int, results: CancelResults) -> None:
    session_id = f"cancel-tool-started-{time.monotonic_ns()}"
    address, subscriber = stack.session(session_id)
    leftovers = 0
    for i in range(count):
        marker = f"30.{os.getpid()}{i:03d}1"
        stack.server.script([terminal_call(f"sleep {marker}")], session=session_id)
        address.tell(StartTurn(text=USER_TEXT.format(i=i)))
        subscriber.until(ToolStarted)
        cancel_and_time(address, subscriber, results, "cancel_tool_started")
        leftovers += settle(lambda: len(processes_with(f"sleep {marker}")))
    results.leftovers["cancel_tool_started"] = leftovers


def cancel_tool_running(stack: Stack, count: int, results: CancelResults, workdir: str) -> None:
    session_id = f"cancel-tool-running-{time.monotonic_ns()}"
    address, subscriber = stack.session(session_id)
    leftovers = 0
    for i in range(count):
        fifo = os.path.join(workdir, f"running-{i}")
        os.mkfifo(fifo)
        marker = f"30.{os.getpid()}{i:03d}2"
        stack.server.script([terminal_call(f"echo $$ > {fifo}; sleep {marker}; echo never")], session=session_id)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            address.tell(StartTurn(text=USER_TEXT.format(i=i)))
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(DEADLINE * 1000):
                msg = f"the terminal tool did not write to {fifo} within {DEADLINE} s"
                raise AssertionError(msg)
            pgid = int(os.read(fd, 64).split()[0])
        finally:
            os.close(fd)
            os.unlink(fifo)
        pidfd = os.pidfd_open(pgid)
        try:
            start = cancel_and_time(address, subscriber, results, "cancel_tool_running")
            exits = select.poll()
            exits.register(pidfd, select.POLLIN)
            if exits.poll(DEADLINE * 1000):
                results.add("group_exit", time.perf_counter() - start)
        finally:
            os.close(pidfd)
        leftovers += settle(lambda: group_survivors(pgid))
    results.leftovers["cancel_tool_running"] = leftovers


# -- output -----------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def versions() -> dict[str, str]:
    info = {"python": platform.python_version()}
    for package in ("pykka", "trio", "msgspec", "openai", "httpx", "apsw"):
        info[package] = importlib.metadata.version(package)
    info["platform"] = platform.platform()
    info["cpus"] = str(os.cpu_count())
    return info


def us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


def per_turn_us(meter: CpuMeter, n: int) -> dict[str, float]:
    ordered = sorted(meter.by_group.items(), key=lambda item: -item[1])
    return {group: us(seconds / n) for group, seconds in ordered if seconds / n >= 1e-6}


def turn_row(metric: str, stack: Series, base: Series, note: str) -> dict[str, Any]:
    median, base_median = statistics.median(stack.wall), statistics.median(base.wall)
    n = len(stack.wall)
    overhead = median - base_median
    return {
        "bench": "turn",
        "metric": metric,
        "median_us": us(median),
        "p90_us": us(percentile(stack.wall, 90)),
        "p99_us": us(percentile(stack.wall, 99)),
        "baseline_median_us": us(base_median),
        "baseline_p90_us": us(percentile(base.wall, 90)),
        "baseline_p99_us": us(percentile(base.wall, 99)),
        "overhead_us": us(overhead),
        "ratio": round(median / base_median, 2),
        "target_overhead_us": OVERHEAD_TARGET_US * (2 if metric == "turn_tool" else 1),
        "meets_target": overhead * 1e6 <= OVERHEAD_TARGET_US * (2 if metric == "turn_tool" else 1),
        "cpu_us_per_turn": us(stack.cpu.total / n),
        "baseline_cpu_us_per_turn": us(base.cpu.total / len(base.wall)),
        "cpu_overhead_us_per_turn": us(stack.cpu.total / n - base.cpu.total / len(base.wall)),
        "cpu_by_thread_us": per_turn_us(stack.cpu, n),
        "baseline_cpu_by_thread_us": per_turn_us(base.cpu, len(base.wall)),
        "phases_us": {name: us(statistics.median(values)) for name, values in stack.phases.items() if len(values) == n},
        "failed_turns": stack.failures,
        "n": n,
        "note": note,
    }


def cancel_row(metric: str, results: CancelResults, note: str) -> dict[str, Any]:
    values = results.series[metric]
    hop = results.series["hop"]
    p99 = percentile(values, 99)
    row: dict[str, Any] = {
        "bench": "turn",
        "metric": metric,
        "median_us": us(statistics.median(values)),
        "p90_us": us(percentile(values, 90)),
        "p99_us": us(p99),
        "max_us": us(max(values)),
        "baseline_median_us": us(statistics.median(hop)),
        "ratio": round(statistics.median(values) / statistics.median(hop), 2),
        "target_p99_us": CANCEL_P99_TARGET_US,
        "meets_target": p99 * 1e6 <= CANCEL_P99_TARGET_US,
        "not_cancelled": results.not_cancelled,
        "n": len(values),
    }
    if metric in results.leftovers:
        row["leftover_processes"] = results.leftovers[metric]
    if metric == "cancel_tool_running" and results.series.get("group_exit"):
        exits = results.series["group_exit"]
        row["group_exit_median_ms"] = round(statistics.median(exits) * 1e3, 2)
        row["group_exit_p99_ms"] = round(percentile(exits, 99) * 1e3, 2)
    row["note"] = note
    return row


def emit(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        for item in rows:
            print(json.dumps(item), flush=True)
        return
    turns = [r for r in rows if r["metric"].startswith("turn_")]
    cancels = [r for r in rows if r["metric"].startswith("cancel_")]
    print(
        f"{'metric':<12} {'median us':>10} {'p90 us':>9} {'p99 us':>9} {'base med':>9} {'base p90':>9} "
        f"{'overhead':>9} {'ratio':>6} {'CPU us/turn':>12} {'base CPU':>9} {'n':>5}  target"
    )
    for r in turns:
        verdict = ("ok" if r["meets_target"] else "MISS") + f" overhead <= {r['target_overhead_us']:g}"
        print(
            f"{r['metric']:<12} {r['median_us']:>10.1f} {r['p90_us']:>9.1f} {r['p99_us']:>9.1f} {r['baseline_median_us']:>9.1f} "
            f"{r['baseline_p90_us']:>9.1f} {r['overhead_us']:>9.1f} {r['ratio']:>6.2f} {r['cpu_us_per_turn']:>12.1f} "
            f"{r['baseline_cpu_us_per_turn']:>9.1f} {r['n']:>5}  {verdict}"
        )
    for r in turns:
        print(f"\n{r['metric']}: {r['note']}")
        print("  CPU per turn by thread (us), stack:    " + ", ".join(f"{k} {v:g}" for k, v in r["cpu_by_thread_us"].items()))
        print("  CPU per turn by thread (us), baseline: " + ", ".join(f"{k} {v:g}" for k, v in r["baseline_cpu_by_thread_us"].items()))
        print("  first arrival after StartTurn (median us): " + ", ".join(f"{k} {v:g}" for k, v in r["phases_us"].items()))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--quick", action="store_true", help="a much shorter run (smoke test)")
    options = parser.parse_args()
    for name in ("actors", "supervisor", "pykka"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    rounds = 2 if options.quick else 6
    echo_turns = 10 if options.quick else 50
    tool_turns = 5 if options.quick else 25
    cancels = 10 if options.quick else 30

    info = versions()
    setup = (
        "the test model server runs in this process (its own thread and trio.run): its CPU is part of both "
        "sides' process CPU and is shown as the test-model-server thread"
    )
    if options.json:
        print(json.dumps({"bench": "turn", "versions": info, "setup": setup}), flush=True)
    else:
        print("versions: " + ", ".join(f"{k} {v}" for k, v in info.items()))
        print(f"note: {setup}")
        print(
            f"{rounds} rounds (new session each, one untimed warm-up turn): {echo_turns} echo turns + "
            f"{tool_turns} tool turns per round, each followed by its baseline replay; {cancels} cancels per kind\n"
        )

    echo, echo_base, tool, tool_base = Series(), Series(), Series(), Series()
    cancel = CancelResults()
    ok = False
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as workdir:
        stack = Stack(workdir)
        try:
            # Warm-up of both sides (lazy imports, first connections); discarded.
            turn_round(stack, "warmup-echo", 5, Series(), Series(), tool=False)
            turn_round(stack, "warmup-tool", 2, Series(), Series(), tool=True)
            for index in range(rounds):
                turn_round(stack, f"echo-{index}", echo_turns, echo, echo_base, tool=False)
                turn_round(stack, f"tool-{index}", tool_turns, tool, tool_base, tool=True)
            cancel_stream(stack, cancels, cancel)
            cancel_tool_started(stack, cancels, cancel)
            cancel_tool_running(stack, cancels, cancel, workdir)
            lag_max_ms = stack.runtime.reactor.statistics().lag_max_ms
            server_errors = stack.server.internal_errors
        finally:
            stopped = stack.stop()

    rows = [
        turn_row("turn_echo", echo, echo_base, "StartTurn -> TurnCompleted, 1 model round trip (echo); base: the same request via AsyncOpenAI"),
        turn_row("turn_tool", tool, tool_base, "2 model round trips + 1 noop tool; base: the same 2 requests via AsyncOpenAI"),
        cancel_row("cancel_stream", cancel, "first TextDelta seen, then CancelTurn -> TurnCancelled (stream stalled); base: session mailbox hop"),
        cancel_row("cancel_tool_started", cancel, "ToolStarted seen, then CancelTurn -> TurnCancelled (terminal: sleep 30)"),
        cancel_row("cancel_tool_running", cancel, "bash group running (FIFO), then CancelTurn -> TurnCancelled"),
    ]
    for row in rows:
        row["reactor_lag_max_ms"] = round(lag_max_ms, 2)
    emit(rows, options.json)
    leftovers = sum(cancel.leftovers.values())
    failures = echo.failures + tool.failures
    ok = stopped and not server_errors and not leftovers and not failures and not cancel.not_cancelled
    if not options.json:
        print(f"\nworst reactor heartbeat lag during the run: {lag_max_ms:.2f} ms; runtime stopped cleanly: {stopped}")
        print(f"turns not completed: {failures}; cancels not ending in TurnCancelled: {cancel.not_cancelled}; "
              f"model server internal errors: {len(server_errors)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
