"""The real chaos run: the whole session stack under a fault plan, judged by the same invariants.

It starts the real runtime (store writer on a SQLite file, dynamic supervisor of session
actors, the reactor) against the test model server (:class:`~._server.ModelServer`),
drives N concurrent sessions from this thread as clients would (user messages, some while
a turn runs, busy policies, cancels), crashes session actors with ``InjectCrash``, and
records every session event (through a subscriber per session), every supervision event
and every tool run in one log. At the end it stops the runtime, reads the stored
transcripts and feeds everything to :class:`~._invariants.Invariants`.

What a real run can break: the model (the server's scripts: HTTP errors, latency, stalls,
cut streams, malformed tool calls), the tools (raise, hang past the timeout, huge output,
slow) and the session actors (kills). Message and store faults need hooks the kernel does
not have; they are exercised by the simulator only. Times are scaled down (timeouts of a
few seconds) so a run takes seconds; a real run is not reproducible to the event (threads),
only its plan and seed are.
"""

from __future__ import annotations

import dataclasses
import math
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from protocols import ChatMessage
from protocols._faults import FaultPlan
from protocols._session import TERMINAL_EVENTS, SessionEvent, TurnStarted

from ..agent import HubRegistry, MachineConfig, ModelClients, ModelSettings, SessionDeps, reader_opener, start_agent_runtime
from ..agent._tree import SESSIONS_INTENSITY
from ..store import StoreReader
from ._invariants import Invariants, Violation
from ._runner_world import Client, Driver, Log, faulty_tools, model_script
from ._script import HttpError, Reply, ToolCallsReply
from ._server import ModelServer

KillWhen = Literal["settled", "anytime"]


@dataclasses.dataclass(frozen=True, slots=True)
class RunOptions:
    sessions: int = 12
    kills: int = 6
    """Session actors to crash (``InjectCrash``) during the run."""
    kill_when: KillWhen = "anytime"
    """``settled``: only a session whose last turn completed, with nothing queued, after the
    store committed everything; ``anytime``: any session that has started, at any moment."""
    seed: int = 0
    timeout: float = 120.0
    """The run gives up (and reports what it has) after this many seconds."""
    store_dir: Path | None = None
    """Where the store file goes (a temporary directory when None)."""
    model_timeout: float = 2.0
    tool_timeout: float = 1.0
    turn_timeout: float = 20.0
    slack: float = 2.0
    """Seconds a turn may end after its deadline (thread scheduling) before it counts as late."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunReport:
    sessions: int
    turns: int
    counts: dict[str, int]
    faults: dict[str, int]
    kills: int
    restarts: int
    violations: tuple[Violation, ...]
    latencies_ms: tuple[float, ...]
    """TurnStarted to the turn's end, per turn that ended."""
    wall_s: float
    model_requests: int
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.violations and not self.timed_out

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return math.nan
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "turns": self.turns,
            "counts": self.counts,
            "faults": self.faults,
            "kills": self.kills,
            "restarts": self.restarts,
            "violations": [dataclasses.asdict(v) for v in self.violations],
            "p50_ms": round(self.percentile(0.5), 2),
            "p99_ms": round(self.percentile(0.99), 2),
            "wall_s": round(self.wall_s, 3),
            "model_requests": self.model_requests,
            "timed_out": self.timed_out,
        }


def format_report(report: RunReport) -> str:
    c = report.counts
    lines = [
        f"chaos run: {report.sessions} sessions, {report.turns} turns in {report.wall_s:.1f} s" + (" (TIMED OUT)" if report.timed_out else ""),
        f"  turns: completed {c.get('completed', 0)}, failed {c.get('failed', 0)}, cancelled {c.get('cancelled', 0)}, "
        f"rejected {c.get('rejected', 0)}, queued {c.get('queued', 0)}",
        f"  turn latency: p50 {report.percentile(0.5):.1f} ms, p99 {report.percentile(0.99):.1f} ms",
        f"  faults: {', '.join(f'{k} {v}' for k, v in sorted(report.faults.items())) or 'none'}",
        f"  kills {report.kills}, restarts {report.restarts}, recoveries {c.get('recovered', 0)}, tool runs {c.get('tool_runs', 0)}, model requests {report.model_requests}",
    ]
    if report.violations:
        lines.append(f"  {len(report.violations)} violation(s):")
        lines += [f"    {v.describe()}" for v in report.violations]
    else:
        lines.append("  every invariant held")
    return "\n".join(lines)


def run_chaos(
    plan: FaultPlan, options: RunOptions = RunOptions(), *, server: ModelServer | None = None, progress: Callable[[str], None] | None = None
) -> RunReport:
    """Run the real stack under ``plan``; see the module docstring.

    Args:
        server: A running test model server to use (the run scripts its own session ids,
            ``chaos0``, ``chaos1``, ...); None starts one for the run.
        progress: Called with a one-line status about four times a second.
    """
    with tempfile.TemporaryDirectory(prefix="hermes-chaos-") as tmp:
        store_dir = options.store_dir or Path(tmp)
        if server is not None:
            return _run(plan, options, store_dir / "chaos.db", server, progress)
        own = ModelServer(seed=options.seed).start()
        try:
            return _run(plan, options, store_dir / "chaos.db", own, progress)
        finally:
            own.stop()


def _run(plan: FaultPlan, options: RunOptions, store_file: Path, server: ModelServer, progress: Callable[[str], None] | None) -> RunReport:
    rng = random.Random(f"{options.seed}/run")
    log = Log()
    tools = faulty_tools(plan, options, log)
    w = plan.workload
    config = MachineConfig(
        traits={name: spec.traits for name, spec in tools.items()},
        max_iterations=w.max_iterations,
        turn_timeout=options.turn_timeout,
        model_timeout=options.model_timeout,
        tool_timeout=options.tool_timeout,
        max_attempts=w.max_attempts,
        retry_base=0.01,
        retry_cap=0.2,
        queue_limit=w.queue_limit,
    )
    deps = SessionDeps(
        hubs=HubRegistry(),
        open_reader=reader_opener(store_file),
        model=ModelSettings(model="test-model", base_url=server.base_url, api_key="chaos"),
        clients=ModelClients(),
        tools=tools,
        config=config,
        recovery=w.recovery,
        idle_timeout=0,
        home=store_file.parent / "home",
        workdir=store_file.parent,
    )
    session_ids = [f"chaos{k}" for k in range(options.sessions)]
    scripts = {sid: model_script(plan, options, random.Random(f"{options.seed}/model/{sid}"), 60) for sid in session_ids}
    for sid, replies in scripts.items():
        server.script(replies, session=sid)
    clients = {sid: Client(sid, plan, random.Random(f"{options.seed}/client/{sid}")) for sid in session_ids}
    driver = Driver(options, log, rng, clients, start_agent_runtime(store_file, deps))
    started = time.monotonic()
    try:
        timed_out = driver.run(progress)
    finally:
        stopped = driver.stop()
    wall = time.monotonic() - started
    with StoreReader(store_file) as reader:
        transcripts = {sid: reader.load_messages(sid) for sid in session_ids}
    violations, counts, latencies = _judge(log, options, transcripts, wall)
    faults = dict(log.faults)
    served: dict[str, int] = {}
    for request in server.requests:
        if request.path == "/v1/chat/completions" and request.session is not None:
            served[request.session] = served.get(request.session, 0) + 1
    for sid, count in served.items():
        for reply in scripts[sid][:count]:
            kind = _reply_fault(reply)
            if kind:
                faults[kind] = faults.get(kind, 0) + 1
    if not stopped:
        violations = (*violations, Violation(rule="no_quiescence", session_id="-", detail="the runtime did not stop within 30 s", at=wall))
    return RunReport(
        sessions=options.sessions,
        turns=counts.get("turns", 0),
        counts=counts,
        faults=faults,
        kills=driver.kills,
        restarts=counts.get("restarts", 0),
        violations=violations,
        latencies_ms=latencies,
        wall_s=wall,
        model_requests=sum(served.values()),
        timed_out=timed_out,
    )


def _judge(
    log: Log, options: RunOptions, transcripts: dict[str, list[ChatMessage]], wall: float
) -> tuple[tuple[Violation, ...], dict[str, int], tuple[float, ...]]:
    checker = Invariants(turn_timeout=options.turn_timeout, slack=options.slack, max_restarts=SESSIONS_INTENSITY.max_restarts, within=SESSIONS_INTENSITY.within)
    started: dict[tuple[str, str], float] = {}
    latencies: list[float] = []
    with log.lock:
        entries = list(log.entries)
    for at, kind, a, b, c in entries:
        if kind == "event":
            event: SessionEvent = b
            checker.event(a, event, at, subscriber=c)
            if isinstance(event, TurnStarted):
                started[(a, event.turn_id)] = at
            elif isinstance(event, TERMINAL_EVENTS) and (a, event.turn_id) in started:
                latencies.append((at - started.pop((a, event.turn_id))) * 1000)
        elif kind == "sup":
            checker.supervision(a, at)
        elif kind == "tool":
            checker.tool_ran(a, b, at)
    for sid, messages in transcripts.items():
        checker.durable_transcript(sid, messages, wall)
    violations = checker.finish(wall)
    return tuple(violations), dict(checker.counts), tuple(latencies)


def _reply_fault(reply: Reply) -> str:
    if isinstance(reply, HttpError):
        return "model_http_error"
    if reply.cut_after_chunks is not None:
        return "model_cut"
    if reply.stall_after_chunks is not None:
        return "model_stall"
    if isinstance(reply, ToolCallsReply) and any(c.name == "no_such_tool" or not c.arguments.startswith('{"') for c in reply.calls):
        return "model_malformed_tool_calls"
    if reply.latency > 0:
        return "model_latency"
    return ""
