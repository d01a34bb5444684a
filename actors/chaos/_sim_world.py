"""The simulated world around a session: a virtual clock, message delivery, the store, model and tools.

Single-threaded and seeded: every future happening is an entry in one heap ordered by
virtual time, and every decision comes from :class:`~._faults.Dice`. Nothing here reads a
clock or sleeps, so a seed replays exactly.

What the real runtime guarantees, the world keeps: a message told to a session's address
reaches some incarnation (it waits while the session restarts); a reply or wait outcome
addressed to an incarnation that died is dropped; the store writer handles writes one at
a time, in arrival order, and replies only after the commit. What the fault plan breaks,
it breaks at delivery (drop, delay, duplicate, reorder), in the store (busy, slow commit,
crash between commit and acknowledgement), in the model (per call, and per API key: a
call fails by its key's faults before the model's own are drawn), in the tools, and in the
credential pool (``_sim_pool``: crashes, lost saves).
"""

from __future__ import annotations

import collections
import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocols import ChatMessage, KeyLeased, Token, ToolCall, WaitFinished
from protocols._faults import FaultPlan
from protocols._store import MessagesPersisted, SessionCreated, StoreFailed, TurnMark

from ..agent._model import ModelFailure, ModelReply
from ..agent._retry import classify
from ..agent._tools import ToolOutput
from ..credentials import KeySpec, ProviderSpec
from ._faults import Dice
from ._invariants import Invariants
from ._sim_pool import SimPool

if TYPE_CHECKING:
    from ._sim_session import SimSession
    from ._sim_supervisor import Incarnation

TOOL_NAMES = ("read_file", "write_file", "terminal")
PATHS = ("notes.md", "main.py", "data.csv")
KEY_STATUSES = {"auth": 401, "billing": 402, "rate_limit": 429}
"""The HTTP status of each kind of key fault (``KeyFaults``)."""


SIM_PROVIDER = ProviderSpec(
    name="sim", base_url="http://sim.invalid/v1", model="sim", keys=tuple(KeySpec(key_id=f"key-{n}", api_key=f"sk-sim-{n:04d}") for n in (1, 2, 3))
)


class World:
    """The event loop, the fault dice and the shared pieces (store, checker) of one simulated run."""

    def __init__(self, seed: int, plan: FaultPlan, *, mask: frozenset[str] = frozenset(), trace: bool = True) -> None:
        self.seed = seed
        self.plan = plan
        self.dice = Dice(seed, mask)
        self.now = 0.0
        self.steps = 0
        self._heap: list[tuple[float, float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0
        self._cancelled: set[int] = set()
        self._next_wait = 0
        self._calls = 0
        self.record = trace
        self.trace: list[tuple[int, float, str]] = []
        """(step, virtual time, what happened), when ``trace`` is on."""
        workload = plan.workload
        delays = plan.messages.delay_max_s + plan.messages.reorder_window_s if "timer" in plan.messages.channels else 0.0
        self.checker = Invariants(turn_timeout=workload.turn_timeout_s, slack=0.05 + delays)
        self.store = SimStore(self)
        self.pool = SimPool(self, SIM_PROVIDER)
        """The simulated provider's key pool (the actor ``/credentials/sim``; its state outlives sessions)."""
        self.key_faults = {
            k.key_id: (k, (("auth", k.auth), ("billing", k.billing), ("rate_limit", k.rate_limit)))
            for k in plan.model.key_faults
            if k.auth + k.billing + k.rate_limit > 0
        }
        """Key id -> its faults, and the chance of each kind (one draw per call made with the key)."""
        self._first_keys: dict[str, KeyLeased] = {}
        self.sessions: dict[str, SimSession] = {}
        self._down = False
        self.died_at = -math.inf
        """When the process last died (the pool learns of it later, and needs to know what happened before)."""
        self.tool_runs: collections.Counter[str] = collections.Counter()

    @property
    def down(self) -> bool:
        """The process is dead and not started again yet (``_sim_process``)."""
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        if value and not self._down:
            self.died_at = self.now
        self._down = value

    # -- the clock and the heap --------------------------------------------------------------

    def at(self, when: float, action: Callable[..., None], *args: Any, jitter: float = 0.0) -> int:
        """Run ``action(*args)`` at virtual time ``when``; returns an id for :meth:`cancel`."""
        self._order += 1
        heapq.heappush(self._heap, (when, jitter, self._order, action, args))
        return self._order

    def cancel(self, entry: int) -> None:
        self._cancelled.add(entry)

    def note(self, text: str) -> None:
        if self.record:
            self.trace.append((self.steps, self.now, text))

    def run(self, max_steps: int) -> bool:
        """Run until nothing is left to happen; False if ``max_steps`` ran out first."""
        heap = self._heap
        checker = self.checker
        while heap:
            if self.steps >= max_steps:
                return False
            when, _, order, action, args = heapq.heappop(heap)
            if order in self._cancelled:
                self._cancelled.discard(order)
                continue
            self.now = when
            self.steps += 1
            checker.step = self.steps
            action(*args)
            checker.advance(when)
        return True

    # -- delivery with message faults --------------------------------------------------------------

    def deliver(self, channel: str, delay: float, action: Callable[..., None], *args: Any, now: bool = False) -> None:
        """Hand a message to a session after ``delay``, through the plan's message faults.

        ``now``: the caller is a step of its own (not a session handling a message), so a
        message no fault delays is handled in this step instead of the next one at this time.
        """
        faults = self.plan.messages
        if channel not in faults.channels:
            if now and delay == 0.0:
                action(*args)
            else:
                self.at(self.now + delay, action, *args)
            return
        dice = self.dice
        if dice.fault("messages", "drop", faults.drop):
            self.note(f"fault: dropped a {channel} message")
            return
        jitter = 0.0
        if dice.fault("messages", "delay", faults.delay):
            delay += dice.uniform("messages", 0.0, faults.delay_max_s)
        if dice.fault("messages", "reorder", faults.reorder):
            delay += dice.uniform("messages", 0.0, faults.reorder_window_s)
            jitter = dice.uniform("messages", -1.0, 1.0)
        if now and delay == 0.0 and jitter == 0.0:
            action(*args)
        else:
            self.at(self.now + delay, action, *args, jitter=jitter)
        if dice.fault("messages", "duplicate", faults.duplicate):
            self.note(f"fault: duplicated a {channel} message")
            self.at(self.now + delay + dice.uniform("messages", 0.0, faults.reorder_window_s), action, *args)

    # -- waits (the reactor) --------------------------------------------------------------------------

    def new_wait(self) -> int:
        self._next_wait += 1
        return self._next_wait

    def settle_wait(self, channel: str, incarnation: Incarnation, wait_id: int, started: float, done: float, timeout: float, outcome: WaitFinished) -> int:
        """Deliver ``outcome`` at ``done``, or a timeout at ``started + timeout`` if that is sooner."""
        if done - started > timeout:
            outcome = WaitFinished(wait_id=wait_id, tag=channel, status="timeout", error=f"the wait took longer than {timeout:g} s")
            done = started + timeout
        return self.at(done, self._wait_done, channel, incarnation, outcome)

    def _wait_done(self, channel: str, incarnation: Incarnation, outcome: WaitFinished) -> None:
        if incarnation.waits_cancelled or outcome.wait_id in incarnation.cancelled_waits:
            return
        self.deliver(channel, 0.0, incarnation.session.on_message, incarnation, outcome, now=True)

    def send_after(self, incarnation: Incarnation, delay: float, message: object) -> int:
        return self.at(self.now + delay, self._timer_fired, incarnation, message)

    def _timer_fired(self, incarnation: Incarnation, message: object) -> None:
        if not incarnation.waits_cancelled:
            self.deliver("timer", 0.0, incarnation.session.on_message, incarnation, message, now=True)

    # -- the model ----------------------------------------------------------------------------------

    def start_model(self, incarnation: Incarnation, use_tools: bool, timeout: float, key: KeyLeased) -> tuple[int, int]:
        """Start a simulated model call with a leased ``key``; returns (wait id, heap entry)."""
        dice, faults, workload = self.dice, self.plan.model, self.plan.workload
        session_id = incarnation.session.session_id
        if self.pool.bug == "reuse_lease":  # planted: every call of a session on its first lease
            key = self._first_keys.setdefault(session_id, key)
        self.checker.pool.model_key(session_id, key.lease_id, key.key_id, self.now)
        wait_id = self.new_wait()
        base = dice.uniform("model", 0.01, max(0.01, workload.model_s))
        value: ModelReply | ModelFailure
        refused = self._key_fault(key.key_id) if self.key_faults else None
        if refused is not None:
            value = refused
            done = self.now + dice.uniform("keys", 0.001, 0.05)
        elif dice.fault("model", "http_error", faults.http_error):
            status = dice.choice("model", faults.http_statuses)
            retry_after = dice.uniform("model", 0.0, 2.0) if status in (429, 503) and dice.below("model", 2) else None
            kind = classify(status, f"simulated HTTP {status}").kind
            value = ModelFailure(kind=kind, status=status, detail=f"simulated HTTP {status}", retry_after=retry_after)
            done = self.now + dice.uniform("model", 0.001, 0.05)
        elif dice.fault("model", "cut", faults.cut):
            value = ModelFailure(kind="transport", status=None, detail="RemoteProtocolError: peer closed connection mid-stream")
            done = self.now + dice.uniform("model", 0.0, base)
        else:
            if dice.fault("model", "latency", faults.latency):
                base += dice.uniform("model", 0.0, faults.latency_max_s)
            if dice.fault("model", "stall", faults.stall):
                base += faults.stall_s
            value = self.reply(use_tools)
            done = self.now + base
        entry = self.settle_wait(
            "model_reply", incarnation, wait_id, self.now, done, timeout, WaitFinished(wait_id=wait_id, tag="model", status="ok", value=value)
        )
        return wait_id, entry

    def _key_fault(self, key_id: str) -> ModelFailure | None:
        """The failure a call made with ``key_id`` meets by its key's own faults, if one is drawn."""
        faults = self.key_faults.get(key_id)
        if faults is None:
            return None
        spec, kinds = faults
        kind = self.dice.pick("keys", kinds)
        if kind is None:
            return None
        status = KEY_STATUSES[kind]
        rng = self.dice.stream("keys")
        retry_after = rng.uniform(0.0, spec.reset_max_s) if kind == "rate_limit" and rng.random() < spec.reset_hint else None
        if self.record:
            self.note(f"fault: {key_id} answered HTTP {status}" + (f" (resets in {retry_after:.3f} s)" if retry_after is not None else ""))
        detail = f"simulated HTTP {status} for {key_id}"
        return ModelFailure(kind=classify(status, detail).kind, status=status, detail=detail, retry_after=retry_after)

    def reply(self, use_tools: bool) -> ModelReply:
        dice, workload = self.dice, self.plan.workload
        tokens = 10 + dice.below("model", 90)
        if not use_tools or dice.stream("model").random() >= workload.tool_calls:
            return ModelReply(content=f"answer {self._calls}", reasoning=None, tool_calls=(), finish_reason="stop", input_tokens=tokens, output_tokens=5)
        calls: list[ToolCall] = []
        for _ in range(1 + dice.below("model", workload.max_calls)):
            self._calls += 1
            name = dice.choice("model", TOOL_NAMES)
            arguments = f'{{"path": "{dice.choice("model", PATHS)}"}}' if name != "terminal" else '{"command": "true"}'
            calls.append(ToolCall(id=f"call_{self._calls}", name=name, arguments=arguments))
        if dice.fault("model", "malformed", self.plan.model.malformed_tool_calls):
            index = dice.below("model", len(calls))
            how = dice.below("model", 5)
            call = calls[index]
            if how == 0:
                call = ToolCall(id=call.id, name=call.name, arguments='{"path": ')
            elif how == 1:
                call = ToolCall(id=call.id, name="no_such_tool", arguments=call.arguments)
            elif how == 2:
                call = ToolCall(id="", name=call.name, arguments=call.arguments)
            elif how == 3:
                call = ToolCall(id=calls[index - 1].id, name=call.name, arguments=call.arguments)
            else:
                call = ToolCall(id=call.id, name=call.name, arguments="[1, 2]")
            calls[index] = call
            self.note(f"fault: malformed tool call ({('bad JSON', 'unknown tool', 'no id', 'repeated id', 'not an object')[how]})")
        return ModelReply(content="", reasoning=None, tool_calls=tuple(calls), finish_reason="tool_calls", input_tokens=tokens, output_tokens=20)

    # -- tools --------------------------------------------------------------------------------------

    def start_tool(self, incarnation: Incarnation, call_id: str, timeout: float) -> tuple[int, int]:
        dice, faults, workload = self.dice, self.plan.tools, self.plan.workload
        wait_id = self.new_wait()
        self.tool_runs[call_id] += 1
        duration = dice.uniform("tools", 0.001, max(0.001, workload.tool_s))
        if dice.fault("tools", "error", faults.error):
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="error", error="RuntimeError: the simulated tool raised")
        elif dice.fault("tools", "hang", faults.hang):
            duration = math.inf
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="ok")
        else:
            if dice.fault("tools", "slow", faults.slow):
                duration += dice.uniform("tools", 0.0, faults.slow_max_s)
            huge = dice.fault("tools", "huge_output", faults.huge_output)
            content = "x" * faults.huge_output_chars if huge else f"result of {call_id}"
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="ok", value=ToolOutput(content=content))
        entry = self.settle_wait("tool_result", incarnation, wait_id, self.now, self.now + duration, timeout, outcome)
        return wait_id, entry


class SimStore:
    """The store writer: one write at a time, in arrival order; replies after the commit."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.durable: dict[str, list[ChatMessage]] = {}
        self.user_texts: dict[str, collections.Counter[str]] = {}
        self.call_ids: dict[str, set[str]] = {}
        self.records: dict[str, str] = {}
        """session id -> stored system prompt."""
        self.turns: dict[str, dict[str, str]] = {}
        """session id -> turn id -> status (``running``, or how it ended): the turns table."""
        self.free_at = 0.0
        self.fenced: set[str] = set()
        """As StoreWriter: sessions whose transcript write was refused (until ``reopen``)."""
        self.writes = 0
        self.epoch = 0
        """Bumped when the process dies: commits scheduled before never happen."""
        self.ack_before_commit = False
        """A planted bug (tests only): acknowledge on arrival, commit later."""

    def idle(self) -> bool:
        return self.free_at <= self.world.now

    def submit(
        self,
        session_id: str,
        messages: tuple[ChatMessage, ...] | None,
        token: Token | str,
        reply_to: Incarnation | None,
        prompt: str = "",
        mark: TurnMark | None = None,
    ) -> None:
        """``AppendMessages`` (``messages``) or ``CreateSession`` (``messages`` None) arrives."""
        world = self.world
        faults = world.plan.store
        commit = world.plan.workload.commit_s
        if world.dice.fault("store", "slow_commit", faults.slow_commit):
            commit += world.dice.uniform("store", 0.0, faults.slow_commit_max_s)
        done = max(world.now, self.free_at) + commit
        self.free_at = done
        if self.ack_before_commit and reply_to is not None and messages is not None:
            self.reply(reply_to, MessagesPersisted(session_id=session_id, token=token))
            reply_to = None
        world.at(done, self._commit, self.epoch, session_id, messages, token, reply_to, prompt, mark)

    def reopen(self, session_id: str) -> None:
        """``ReopenWrites``: taken in order with the writes (after every one submitted before)."""
        self.world.at(max(self.world.now, self.free_at), self.fenced.discard, session_id)

    def _commit(
        self,
        epoch: int,
        session_id: str,
        messages: tuple[ChatMessage, ...] | None,
        token: Token | str,
        reply_to: Incarnation | None,
        prompt: str,
        mark: TurnMark | None,
    ) -> None:
        if epoch != self.epoch:
            return  # the process died before this commit: the write is lost
        world = self.world
        faults = world.plan.store
        self.writes += 1
        reply: Any
        if messages is not None and session_id in self.fenced:
            reply = StoreFailed(token=token, error="an earlier write of this session was refused", session_id=session_id)
        elif world.dice.fault("store", "busy", faults.busy):
            world.note(f"fault: store busy, write {token!r} of {session_id} failed")
            reply = StoreFailed(token=token, error="database is locked", session_id=session_id, retryable=True)
        elif messages is None:
            self.records.setdefault(session_id, prompt)
            reply = SessionCreated(session_id=session_id, token=token)
        elif session_id not in self.records:
            reply = StoreFailed(token=token, error="FOREIGN KEY constraint failed", session_id=session_id)
        elif mark is not None and mark.event == "started" and mark.turn_id in self.turns.get(session_id, {}):
            reply = StoreFailed(token=token, error=f"turn {mark.turn_id!r} was already started", session_id=session_id)
        else:
            self._apply(session_id, messages)
            if mark is not None:
                self._mark(session_id, mark)
            reply = MessagesPersisted(session_id=session_id, token=token)
            if world.dice.fault("store", "crash_after_commit", faults.crash_after_commit):
                world.note(f"fault: store crashed after committing {token!r} of {session_id}")
                reply = StoreFailed(token=token, error="the store writer stopped before committing it; send it again", session_id=session_id, retryable=True)
                self.free_at = max(self.free_at, world.now + 0.005)  # the writer restarts
        if type(reply) is StoreFailed:
            self.fenced.add(session_id)
        if reply_to is not None:
            self.reply(reply_to, reply, now=True)

    def _apply(self, session_id: str, messages: tuple[ChatMessage, ...]) -> None:
        durable = self.durable.get(session_id)
        if durable is None:  # first write of the session (setdefault would build three empties every time)
            durable = self.durable[session_id] = []
            self.user_texts[session_id] = collections.Counter()
            self.call_ids[session_id] = set()
        durable.extend(messages)
        texts, calls = self.user_texts[session_id], self.call_ids[session_id]
        for message in messages:
            if message.role == "user" and message.content is not None:
                texts[message.content] += 1
            for call in message.tool_calls:
                calls.add(call.id)

    def _mark(self, session_id: str, mark: TurnMark) -> None:
        turns = self.turns.setdefault(session_id, {})
        if mark.event == "started":
            turns[mark.turn_id] = "running"
        elif turns.get(mark.turn_id, "running") == "running":
            turns[mark.turn_id] = mark.event

    def reply(self, incarnation: Incarnation, reply: Any, *, now: bool = False) -> None:
        self.world.deliver("store_reply", 0.0, incarnation.session.on_message, incarnation, reply, now=now)

    def load(self, session_id: str) -> tuple[str | None, list[ChatMessage], dict[str, str]]:
        """What a store reader sees now: the session's system prompt (None: no row), messages and turns."""
        return self.records.get(session_id), list(self.durable.get(session_id, ())), dict(self.turns.get(session_id, {}))
