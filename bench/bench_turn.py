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
  mode (no script: it streams ``echo: <last user message>``). Each round uses a new
  session: one untimed warm-up turn (it starts the session actor, loads and creates the
  session in the store), then 10 timed turns in a row (so the request grows from 4 to 22
  messages; turns are sequential, never overlapping).
  Baseline: right after each timed turn, the *exact request bodies the server received*
  for it (system prompt, whole history, tools schema, stream options, session header) are
  replayed with ``openai.AsyncOpenAI(...).chat.completions.create(stream=True, ...)``,
  reading the stream to its end, in a private ``trio.run`` thread that keeps one client
  for the whole run (timed inside that thread). Floor (``raw_*``), right after: the same
  bodies sent with a bare ``httpx.AsyncClient.stream``, each ``data:`` line decoded by
  ``msgspec`` (no SDK): what the HTTP round trip itself costs here. Reported: median /
  p90 / p99, ``overhead_us`` = median of the per-turn differences stack - SDK baseline
  (paired, so both samples of a pair see the same machine; goal <= 1,000 us per round
  trip), ``median_difference_us`` = median(stack) - median(baseline), ratios, and CPU
  time per turn (``time.process_time`` deltas over the timed turns / N, whole process, the
  in-process server included), split by thread (``pthread_getcpuclockid``: reactor,
  model server, session actor, store writer, main, baseline).
  ``phases_us``: median arrival time of the first event of each kind after ``StartTurn``.
- ``turn_tool``: the same for a two-round-trip tool turn (5 timed turns per session): the
  session's script is ``ToolCallsReply`` (one call of the ``noop`` tool, an ``async def``
  returning at once) then ``TextReply``; baselines: the turn's two recorded requests
  replayed back to back (the server is scripted the same two replies for each replay). The Hermes
  (``run_agent.py``) bar this compares with: 280-500 ms of CPU per such turn.
- ``turn_long``: a single-round-trip turn whose answer is 2,999 characters, streamed as
  ~500 content chunks (2 timed turns per session, every second round).
- ``cancel_stream``: the scripted reply stalls after two chunks
  (``TextReply(stall_after_chunks=2, stall_seconds=30)``); once the first ``TextDelta``
  reached the subscriber, ``CancelTurn`` is told; latency until ``TurnCancelled`` reaches
  the subscriber (goal p99 <= 50 ms). Baseline (``hop``): ``Subscribe(after_seq=last-1)``
  told to the same session actor until the one replayed event reaches a fresh subscriber:
  the same mailbox hop there and ``tell`` back, without the turn machine's work.
- ``cancel_tool_started``: the model calls the ``terminal`` tool (``actors.run_process``
  of ``bash -c "sleep 30.<n>"``); ``CancelTurn`` is told when ``ToolStarted`` reaches the
  subscriber (the group may not be spawned yet); latency until ``TurnCancelled``. Then
  ``/proc`` must show no ``sleep 30.<n>`` left (``leftover_processes``).
- ``cancel_tool_running``: the same, but the command first writes ``$$`` to a FIFO, so
  the bench cancels only once the group runs; besides ``TurnCancelled`` it reports
  ``group_exit_*_ms`` (cancel -> the bash leader exited, seen through a pidfd) and the
  survivors of the group.
- ``reactor_lag_max_warmup_ms`` / ``reactor_lag_max_ms``: the reactor's worst heartbeat
  lag during the warm-up (which holds the runtime's first model call) and after it.

Cancel samples use one session per kind, turn after turn. The runtime and the server are
stopped at the end; the exit status is 1 if a turn did not complete (or its tool failed),
a cancel did not end in ``TurnCancelled`` or a process outlived its cancel.

Run from the repository root: ``python bench/bench_turn.py [--quick] [--json]``
(about 35 s; ``--quick`` about 4 s).
"""

from __future__ import annotations

import json
import os
import queue
import select
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    fifo_reader,
    group_survivors,
    parse_options,
    percentile,
    print_header,
    versions,
)
from _turn_measure import (
    DEADLINE,
    ECHO_SCRIPT,
    LONG_SCRIPT,
    TOOL_SCRIPT,
    Baseline,
    CpuMeter,
    emit,
    make_tools,
    per_turn_us,
    us,
)

from actors import Address
from actors.agent import (
    HubRegistry,
    MachineConfig,
    ModelClients,
    ModelSettings,
    SessionDeps,
    reader_opener,
    session_address,
    start_agent_runtime,
)
from actors.chaos import ModelServer, Reply, ScriptedCall, TextReply, ToolCallsReply
from protocols._session import (
    TERMINAL_EVENTS,
    CancelTurn,
    StartTurn,
    Subscribe,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    Unsubscribe,
)
from supervisor import Runtime

OVERHEAD_TARGET_US = 1_000.0
CANCEL_P99_TARGET_US = 50_000.0
HERMES_TOOL_TURN_CPU_MS = (280, 500)
SETTLE = 0.005
"""Untimed pause after each sample, inside its CPU window: the work a side still does after
its last byte or event (trio finalizing the SDK's abandoned async generators, the store
commit of the reply...) is charged to it and does not run during the next sample."""
USER_TEXT = "Please answer this benchmark message number {i:04d}; it is about one hundred characters long."


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
            home=Path(workdir) / "home",
            workdir=Path(workdir),
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
        return [r.body for r in self.server.requests if r.session == session_id and r.path == "/v1/chat/completions" and isinstance(r.body, dict)]

    def stop(self) -> bool:
        try:
            return self.runtime.stop(timeout=DEADLINE)
        finally:
            self.server.stop(timeout=DEADLINE)


# -- turns through the stack, each followed by its baselines ---------------------------------------


class Series:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.phases: dict[str, list[float]] = {}
        self.cpu = CpuMeter()
        self.failures = 0

    def add_turn(self, start: float, events: list[tuple[float, Any]]) -> None:
        at, last = events[-1]
        if not isinstance(last, TurnCompleted) or any(isinstance(e, ToolFinished) and not e.ok for _, e in events):
            self.failures += 1
        self.wall.append(at - start)
        first: dict[str, float] = {}
        for stamp, event in events:
            first.setdefault(type(event).__name__, stamp - start)
        for name, offset in first.items():
            self.phases.setdefault(name, []).append(offset)


class Sides:
    """The samples of one kind of turn: the stack, the SDK baseline, the bare-httpx floor."""

    def __init__(self) -> None:
        self.stack = Series()
        self.sdk = Series()
        self.raw = Series()


def turn_round(stack: Stack, baseline: Baseline, tag: str, turns: int, sides: Sides, script: tuple[Reply, ...]) -> None:
    """A new session: one untimed warm-up turn, then ``turns`` timed turns, one after another.

    Right after each timed turn, the requests the server received for it are replayed
    through the SDK, then through bare httpx (same session header, and the server is
    scripted the same replies for them), so each pair of samples sees the same machine.
    """
    session_id = f"{tag}-{time.monotonic_ns()}"
    per_turn = max(1, len(script))
    if script:  # the stack's warm-up turn, then per timed turn: stack, SDK replay, httpx replay
        stack.server.script(list(script) * (1 + 3 * turns), session=session_id)
    address, subscriber = stack.session(session_id)
    address.tell(StartTurn(text=USER_TEXT.format(i=0)))
    if not isinstance(subscriber.until(TERMINAL_EVENTS)[-1][1], TurnCompleted):
        sides.stack.failures += 1
    seen = len(stack.bodies(session_id))
    for i in range(1, turns + 1):
        sides.stack.cpu.start()
        start = time.perf_counter()
        address.tell(StartTurn(text=USER_TEXT.format(i=i)))
        events = subscriber.until(TERMINAL_EVENTS)
        time.sleep(SETTLE)
        sides.stack.cpu.stop()
        sides.stack.add_turn(start, events)
        bodies = stack.bodies(session_id)[seen:]
        if len(bodies) != per_turn:
            msg = f"expected {per_turn} requests for turn {i} of {session_id}, found {len(bodies)}"
            raise AssertionError(msg)
        for series, raw in ((sides.sdk, False), (sides.raw, True)):
            series.cpu.start()
            series.wall.append(baseline.replay(bodies, session_id, raw=raw))
            time.sleep(SETTLE)
            series.cpu.stop()
        seen += 3 * per_turn


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
        leftovers += settle(lambda marker=marker: len(processes_with(f"sleep {marker}")))
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
        try:
            with fifo_reader(fifo, DEADLINE, "the terminal tool") as wait_running:
                address.tell(StartTurn(text=USER_TEXT.format(i=i)))
                pgid = wait_running()
        finally:
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
        leftovers += settle(lambda pgid=pgid: group_survivors(pgid))
    results.leftovers["cancel_tool_running"] = leftovers


def reset_lag_max(reactor: Any) -> bool:
    """Forget the worst heartbeat lag so far (the reactor has no public reset); False if it cannot."""
    if not isinstance(getattr(reactor, "_lag_max", None), float):
        return False
    reactor._lag_max = 0.0
    return True


# -- output -----------------------------------------------------------------------------------------


def turn_row(metric: str, sides: Sides, note: str) -> dict[str, Any]:
    stack, base, raw = sides.stack, sides.sdk, sides.raw
    median, base_median, raw_median = (statistics.median(x.wall) for x in (stack, base, raw))
    n = len(stack.wall)
    paired = [a - b for a, b in zip(stack.wall, base.wall, strict=True)]
    overhead = statistics.median(paired)
    target = OVERHEAD_TARGET_US * (2 if metric == "turn_tool" else 1)
    cpu, base_cpu, raw_cpu = stack.cpu.total / n, base.cpu.total / len(base.wall), raw.cpu.total / len(raw.wall)
    row: dict[str, Any] = {
        "bench": "turn",
        "metric": metric,
        "median_us": us(median),
        "p90_us": us(percentile(stack.wall, 90)),
        "p99_us": us(percentile(stack.wall, 99)),
        "baseline_median_us": us(base_median),
        "baseline_p90_us": us(percentile(base.wall, 90)),
        "baseline_p99_us": us(percentile(base.wall, 99)),
        "overhead_us": us(overhead),
        "overhead_p90_us": us(percentile(paired, 90)),
        "median_difference_us": us(median - base_median),
        "ratio": round(median / base_median, 2),
        "target_overhead_us": target,
        "meets_target": overhead * 1e6 <= target,
        "cpu_us_per_turn": us(cpu),
        "baseline_cpu_us_per_turn": us(base_cpu),
        "cpu_overhead_us_per_turn": us(cpu - base_cpu),
        "raw_median_us": us(raw_median),
        "raw_p90_us": us(percentile(raw.wall, 90)),
        "raw_cpu_us_per_turn": us(raw_cpu),
        "ratio_to_raw": round(median / raw_median, 2),
        "cpu_by_thread_us": per_turn_us(stack.cpu, n),
        "baseline_cpu_by_thread_us": per_turn_us(base.cpu, len(base.wall)),
        "raw_cpu_by_thread_us": per_turn_us(raw.cpu, len(raw.wall)),
        "phases_us": {name: us(statistics.median(values)) for name, values in stack.phases.items() if len(values) == n},
        "failed_turns": stack.failures,
        "n": n,
    }
    if metric == "turn_tool":
        low, high = HERMES_TOOL_TURN_CPU_MS
        row["hermes_cpu_ms_per_tool_turn"] = f"{low}-{high}"
        row["hermes_cpu_over_ours"] = f"{low / (cpu * 1e3):.0f}-{high / (cpu * 1e3):.0f}x"
    row["note"] = note
    return row


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


def main() -> int:
    options = parse_options(__doc__)

    rounds = 3 if options.quick else 30
    echo_turns = 5 if options.quick else 10
    tool_turns = 3 if options.quick else 5
    long_every = 3 if options.quick else 2  # every this many rounds, a session with two long-answer turns
    cancels = 10 if options.quick else 30

    setup = (
        "the test model server runs in this process (its own thread and trio.run): its CPU is part of every "
        "side's process CPU and is shown as the test-model-server thread"
    )
    text = (
        f"note: {setup}\n"
        f"{rounds} rounds, each a new session per kind (one untimed warm-up turn, then {echo_turns} echo turns "
        f"or {tool_turns} tool turns in a row; every {long_every} rounds 2 long-answer turns), each followed by "
        f"its two baseline replays; {cancels} cancels per kind\n"
    )
    info = versions("pykka", "trio", "msgspec", "openai", "httpx", "apsw")
    print_header("turn", info, options.json, text, setup=setup)

    echo, tool, long = Sides(), Sides(), Sides()
    cancel = CancelResults()
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as workdir:
        stack = Stack(workdir)
        try:
            with Baseline(stack.server.base_url) as baseline:
                # Warm-up of every side (lazy imports, first connections); discarded.
                turn_round(stack, baseline, "warmup-echo", 3, Sides(), ECHO_SCRIPT)
                turn_round(stack, baseline, "warmup-tool", 2, Sides(), TOOL_SCRIPT)
                warmup_lag_ms = stack.runtime.reactor.statistics().lag_max_ms
                lag_reset = reset_lag_max(stack.runtime.reactor)
                for index in range(rounds):
                    turn_round(stack, baseline, f"echo-{index}", echo_turns, echo, ECHO_SCRIPT)
                    turn_round(stack, baseline, f"tool-{index}", tool_turns, tool, TOOL_SCRIPT)
                    if index % long_every == 0:
                        turn_round(stack, baseline, f"long-{index}", 2, long, LONG_SCRIPT)
            cancel_stream(stack, cancels, cancel)
            cancel_tool_started(stack, cancels, cancel)
            cancel_tool_running(stack, cancels, cancel, workdir)
            lag_max_ms = stack.runtime.reactor.statistics().lag_max_ms
            server_errors = stack.server.internal_errors
        finally:
            stopped = stack.stop()

    rows = [
        turn_row("turn_echo", echo, "StartTurn -> TurnCompleted, 1 model round trip (echo); base: the same request via AsyncOpenAI"),
        turn_row("turn_tool", tool, "2 model round trips + 1 noop tool; base: the same 2 requests via AsyncOpenAI"),
        turn_row("turn_long", long, "1 model round trip, ~500 streamed content chunks; base: the same request via AsyncOpenAI"),
        cancel_row("cancel_stream", cancel, "first TextDelta seen, then CancelTurn -> TurnCancelled (stream stalled); base: session mailbox hop"),
        cancel_row("cancel_tool_started", cancel, "ToolStarted seen, then CancelTurn -> TurnCancelled (terminal: sleep 30)"),
        cancel_row("cancel_tool_running", cancel, "bash group running (FIFO), then CancelTurn -> TurnCancelled"),
    ]
    for row in rows:
        row["reactor_lag_max_warmup_ms"] = round(warmup_lag_ms, 2)
        row["reactor_lag_max_ms" if lag_reset else "reactor_lag_max_whole_run_ms"] = round(lag_max_ms, 2)
    emit(rows, options.json)
    leftovers = sum(cancel.leftovers.values())
    failures = echo.stack.failures + tool.stack.failures + long.stack.failures
    ok = stopped and not server_errors and not leftovers and not failures and not cancel.not_cancelled
    if not options.json:
        print(
            f"\nworst reactor heartbeat lag: {warmup_lag_ms:.2f} ms during the warm-up (it holds the first model call), "
            f"{lag_max_ms:.2f} ms {'after the warm-up' if lag_reset else 'over the whole run'}; "
            f"runtime stopped cleanly: {stopped}"
        )
        print(
            f"turns not completed: {failures}; cancels not ending in TurnCancelled: {cancel.not_cancelled}; model server internal errors: {len(server_errors)}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
