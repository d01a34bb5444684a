"""The real chaos run's moving parts: the event log, the clients, the faulty tools and model scripts, the driver.

Everything here runs in the driver's thread except :class:`Log` (appended to from the
session, reactor and supervisor threads, under its lock) and the tools (reactor thread).
"""

from __future__ import annotations

import dataclasses
import heapq
import http
import json
import math
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from protocols._faults import FaultPlan
from protocols._session import (
    TERMINAL_EVENTS,
    CancelTurn,
    SessionEvent,
    SessionInbox,
    StartTurn,
    Subscribe,
    TurnQueued,
    TurnRejected,
    TurnStarted,
)
from protocols._store import GetStoreStatistics
from protocols._supervision import ChildRestarted, InjectCrash

from .._address import Address
from .._runtime import Runtime
from ..agent import SESSIONS_PATH, ToolContext, ToolOutput, ToolSpec, session_address
from ..store import STORE_PATH
from ._script import HttpError, Reply, ScriptedCall, TextReply, ToolCallsReply
from ._sim import TRAITS
from ._sim_world import TOOL_NAMES

if TYPE_CHECKING:
    from ._runner import RunOptions

_KNOWN_STATUSES = frozenset(int(s) for s in http.HTTPStatus)


class Log:
    """Everything the run saw, in one order (session events, supervision events, tool runs)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.entries: list[tuple[float, str, Any, Any, Any]] = []
        self.wake: queue.SimpleQueue[tuple[str, SessionEvent]] = queue.SimpleQueue()
        self.faults: dict[str, int] = {}

    def add(self, kind: str, a: Any, b: Any = None, c: Any = None) -> None:
        with self.lock:
            self.entries.append((time.monotonic() - self.t0, kind, a, b, c))

    def fault(self, kind: str) -> None:
        with self.lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1


class Recorder:
    """A session's subscriber: records each event (in the publishing thread) and wakes the driver."""

    def __init__(self, log: Log, session_id: str) -> None:
        self.log = log
        self.session_id = session_id

    def tell(self, event: Any) -> None:
        self.log.add("event", self.session_id, event, self)
        if isinstance(event, (*TERMINAL_EVENTS, TurnRejected, TurnStarted, TurnQueued)):
            self.log.wake.put((self.session_id, event))


def faulty_tools(plan: FaultPlan, options: RunOptions, log: Log) -> dict[str, ToolSpec]:
    faults = plan.tools
    rng = random.Random(f"{options.seed}/tools")
    lock = threading.Lock()

    async def run(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        log.add("tool", context.session_id, context.call_id)
        with lock:
            draws = [rng.random() for _ in range(4)]
            duration = rng.uniform(0.001, min(plan.workload.tool_s, 0.2))
            slow = rng.uniform(0.0, min(faults.slow_max_s, options.tool_timeout * 1.5))
        if draws[0] < faults.error:
            log.fault("tool_error")
            raise RuntimeError("chaos: the tool raised")
        if draws[1] < faults.hang:
            log.fault("tool_hang")
            await trio.sleep_forever()
        if draws[2] < faults.slow:
            log.fault("tool_slow")
            duration += slow
        await trio.sleep(duration)
        if draws[3] < faults.huge_output:
            log.fault("tool_huge_output")
            return ToolOutput(content="x" * faults.huge_output_chars)
        return ToolOutput(content=f"result of {context.call_id}")

    schema = {"type": "object", "properties": {"path": {"type": "string"}, "command": {"type": "string"}}}
    return {name: ToolSpec(name, f"A chaos {name}.", schema, run, traits) for name, traits in TRAITS.items()}


def model_script(plan: FaultPlan, options: RunOptions, rng: random.Random, count: int) -> list[Reply]:
    """A session's model replies, faults included (consumed in order, across its turns)."""
    model, workload = plan.model, plan.workload
    # The test model server can only send statuses http.HTTPStatus knows (529 is not one).
    statuses = [s for s in model.http_statuses if s in _KNOWN_STATUSES] or [500]
    replies: list[Reply] = []
    stall = min(model.stall_s, options.model_timeout + 1.0)
    for i in range(count):
        if rng.random() < model.http_error:
            status = statuses[rng.randrange(len(statuses))]
            retry = round(rng.uniform(0.01, 0.2), 3) if status in (429, 503) else None
            replies.append(HttpError(status=status, message=f"chaos HTTP {status}", retry_after=retry))
            continue
        modifiers: dict[str, Any] = {}
        if rng.random() < model.cut:
            modifiers["cut_after_chunks"] = 1
        elif rng.random() < model.stall:
            modifiers.update(stall_after_chunks=1, stall_seconds=stall)
        if rng.random() < model.latency:
            modifiers["latency"] = rng.uniform(0.0, min(model.latency_max_s, 0.5))
        if rng.random() < workload.tool_calls:
            calls = []
            for _ in range(1 + rng.randrange(workload.max_calls)):
                name = TOOL_NAMES[rng.randrange(len(TOOL_NAMES))]
                arguments = json.dumps({"path": f"f{rng.randrange(3)}.txt"} if name != "terminal" else {"command": "true"})
                calls.append(ScriptedCall(name=name, arguments=arguments))
            if rng.random() < model.malformed_tool_calls:
                index = rng.randrange(len(calls))
                broken = ('{"path": ', "[1, 2]")[rng.randrange(2)]
                name = "no_such_tool" if rng.randrange(3) == 0 else calls[index].name
                calls[index] = ScriptedCall(name=name, arguments=broken)
            replies.append(ToolCallsReply(calls=tuple(calls), **modifiers))
        else:
            replies.append(TextReply(content=f"answer {i}: " + "words " * 20, **modifiers))
    return replies


@dataclasses.dataclass(frozen=True, slots=True)
class ClientMessage:
    turn_id: str
    text: str
    policy: Any
    mid_turn: bool
    think: float
    cancel_after: float | None


class Client:
    """One session's person: messages (some mid-turn), busy policies, cancels; what it saw of its turns."""

    def __init__(self, session_id: str, plan: FaultPlan, rng: random.Random) -> None:
        w = plan.workload
        self.session_id = session_id
        count = w.min_messages + rng.randrange(w.max_messages - w.min_messages + 1)
        self.messages: list[ClientMessage] = []
        for i in range(count):
            mid = i > 0 and rng.random() < w.mid_turn
            policy = w.policies[rng.randrange(len(w.policies))]
            think = rng.uniform(0.0, 0.3 if mid else 0.2)
            cancel = rng.uniform(0.0, 0.6) if rng.random() < w.cancel else None
            self.messages.append(ClientMessage(f"{session_id}-t{i}", f"message {i} of {session_id}", policy, mid, think, cancel))
        self.index = {m.turn_id: i for i, m in enumerate(self.messages)}
        self.sent = 0
        self.expect_until: dict[str, float] = {}
        """Turn id -> when the client stops waiting for it (its deadline, plus slack)."""
        self.running: str | None = None
        self.queued: set[str] = set()
        self.last_terminal = ""

    def finished(self, now: float) -> bool:
        return self.sent == len(self.messages) and all(now > until for until in self.expect_until.values())

    def settled(self) -> bool:
        return self.sent > 0 and self.running is None and not self.queued and self.last_terminal == "TurnCompleted"


class Driver:
    """Plays every client from one thread: timed sends, cancels and kills, reacting to events."""

    def __init__(self, options: RunOptions, log: Log, rng: random.Random, clients: dict[str, Client], runtime: Runtime) -> None:
        self.options = options
        self.log = log
        self.rng = rng
        self.clients = clients
        self.runtime = runtime
        self.restarted = threading.Semaphore(0)
        """Released once per restart of a session actor (the supervisor's thread)."""
        self.unsubscribe = runtime.subscribe(self.on_supervision)
        self.sessions = runtime.lookup(SESSIONS_PATH)
        self.store = runtime.lookup(STORE_PATH)
        self.actions: list[tuple[float, int, Callable[[], None]]] = []
        self.order = 0
        self.kills = 0
        self.kills_left = options.kills
        self.seen_restarts = 0

    def on_supervision(self, event: Any) -> None:
        self.log.add("sup", event)
        if isinstance(event, ChildRestarted) and event.path.startswith(SESSIONS_PATH.path + "/"):
            self.restarted.release()

    def later(self, delay: float, action: Callable[[], None]) -> None:
        self.order += 1
        heapq.heappush(self.actions, (time.monotonic() + delay, self.order, action))

    def address(self, session_id: str) -> Address[SessionInbox]:
        return session_address(self.runtime.registry, self.sessions, session_id)

    def send_later(self, client: Client, index: int, delay: float) -> None:
        """Send message ``index`` after ``delay``, unless it was sent meanwhile."""
        self.later(delay, lambda: self.send(client) if client.sent == index else None)

    def send(self, client: Client) -> None:
        message = client.messages[client.sent]
        client.sent += 1
        client.expect_until[message.turn_id] = time.monotonic() + self.options.turn_timeout + self.options.slack
        self.address(client.session_id).tell(StartTurn(text=message.text, turn_id=message.turn_id, policy=message.policy))
        if message.cancel_after is not None:
            cancel = CancelTurn(reason="chaos cancel", turn_id=message.turn_id if self.rng.random() < 0.5 else "")
            self.later(message.cancel_after, lambda: self.address(client.session_id).tell(cancel))
        if client.sent < len(client.messages):
            following = client.messages[client.sent]
            # Mid-turn: after a moment. Otherwise after this turn ends, or (if its end never
            # shows) after its deadline.
            delay = following.think if following.mid_turn else self.options.turn_timeout + self.options.slack
            self.send_later(client, client.sent, delay)

    def kill(self) -> None:
        candidates = [c for c in self.clients.values() if c.sent > 0]
        if self.options.kill_when == "settled":
            candidates = [c for c in candidates if c.settled()]
            if candidates:
                self.store.ask(GetStoreStatistics(), timeout=10.0)  # barrier: every write so far is committed
        if not candidates:
            if any(not c.finished(time.monotonic()) for c in self.clients.values()):
                self.later(0.05, self.kill)
            else:
                self.kills_left -= 1  # nobody left to kill
            return
        victim = candidates[self.rng.randrange(len(candidates))]
        self.kills += 1
        self.kills_left -= 1
        self.address(victim.session_id).tell(InjectCrash(reason="chaos kill"))
        # Queued turns wait for the running one; after a crash the recovery must end them
        # soon or never (the checker reports those it never ends): do not wait for long.
        grace = time.monotonic() + 2 * self.options.slack
        for turn_id in victim.queued:
            victim.expect_until[turn_id] = min(victim.expect_until.get(turn_id, grace), grace)

    def on_event(self, client: Client, event: SessionEvent) -> None:
        turn_id = event.turn_id
        now = time.monotonic()
        if isinstance(event, TurnStarted):
            client.queued.discard(turn_id)
            client.running = turn_id
            client.expect_until[turn_id] = now + self.options.turn_timeout + self.options.slack
            return
        if isinstance(event, TurnQueued):
            client.queued.add(turn_id)
            client.expect_until[turn_id] = math.inf  # its deadline starts when it starts
            return
        if not turn_id:
            turn_id = client.running or ""  # a restarted session failed the open turn
        client.expect_until.pop(turn_id, None)
        client.queued.discard(turn_id)
        if client.running == turn_id:
            client.running = None
        if not isinstance(event, TurnRejected):
            client.last_terminal = type(event).__name__
        index = client.index.get(turn_id)
        if index is not None and index + 1 == client.sent < len(client.messages):
            following = client.messages[client.sent]
            if not following.mid_turn:
                self.send_later(client, client.sent, following.think)

    def run(self, progress: Callable[[str], None] | None) -> bool:
        """Drive until every client is done and every kill happened; True if it timed out."""
        options = self.options
        for sid in self.clients:
            self.address(sid).tell(Subscribe(subscriber=Recorder(self.log, sid)))
        for i, client in enumerate(self.clients.values()):
            self.send_later(client, 0, 0.002 * i)
        horizon = 0.5 + 0.4 * max(len(c.messages) for c in self.clients.values())
        for _ in range(options.kills):
            self.later(self.rng.uniform(0.1, horizon), self.kill)
        started = time.monotonic()
        deadline = started + options.timeout
        last_progress = 0.0
        while True:
            now = time.monotonic()
            while self.actions and self.actions[0][0] <= now:
                heapq.heappop(self.actions)[2]()
            if self.kills_left <= 0 and all(c.finished(now) for c in self.clients.values()) and self.restarts_seen():
                return False
            if now > deadline:
                return True
            wait = min(0.1, max(0.0, self.actions[0][0] - now)) if self.actions else 0.1
            try:
                sid, event = self.log.wake.get(timeout=wait)
            except queue.Empty:
                pass
            else:
                self.on_event(self.clients[sid], event)
            if progress is not None and now - last_progress > 0.25:
                last_progress = now
                waiting = sum(len(c.expect_until) for c in self.clients.values())
                sent = sum(c.sent for c in self.clients.values())
                total = sum(len(c.messages) for c in self.clients.values())
                progress(f"chaos run: {now - started:5.1f} s, messages sent {sent}/{total}, turns open {waiting}, kills {self.kills}/{options.kills}")

    def restarts_seen(self) -> bool:
        """Every kill has restarted its session (a restart may wait for its backoff after the turns ended)."""
        while self.seen_restarts < self.kills and self.restarted.acquire(blocking=False):
            self.seen_restarts += 1
        return self.seen_restarts >= self.kills

    def stop(self) -> bool:
        try:
            self.store.ask(GetStoreStatistics(), timeout=10.0)  # let the last writes land
        finally:
            self.unsubscribe()
        return self.runtime.stop(timeout=30.0)
