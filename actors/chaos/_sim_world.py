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
import functools
import heapq
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from protocols import ChatMessage, KeyLeased, ToolCall, WaitFinished
from protocols._faults import FaultPlan

from ..agent._model import ModelFailure, ModelReply
from ..agent._retry import ErrorKind, classify
from ..agent._tokens import RequestSize, TokenRatio, request_size
from ..agent._tools import ToolOutput
from ..credentials import KeySpec, ProviderSpec
from ._faults import Dice
from ._invariants import Invariants
from ._sim_hooks import draw_hook_call
from ._sim_pool import SimPool
from ._sim_store import SimStore

if TYPE_CHECKING:
    from ._sim_memory import SimProvider
    from ._sim_review import SimReviews
    from ._sim_session import SimSession
    from ._sim_supervisor import Incarnation

TOOL_NAMES = ("read_file", "write_file", "terminal")
PATHS = ("notes.md", "main.py", "data.csv")
KEY_STATUSES = {"auth": 401, "billing": 402, "rate_limit": 429}
PROVIDER_RATIO = TokenRatio(chars_per_token=3.5)
"""How the simulated provider counts a prompt's tokens (the machine starts at 4 and learns this)."""
TOOL_SCHEMAS = RequestSize(chars=1_050, fixed=0)
"""The size of the simulated tools' schemas in a request that offers tools (``MachineConfig.tools_size``):
300 tokens at the provider's ratio."""


_KINDS: dict[tuple[int, str], ErrorKind] = {}
"""(status, detail) -> ``classify``'s kind: the simulated failures' words come from a small set."""


def _kind_of(status: int, detail: str) -> ErrorKind:
    kind = _KINDS.get((status, detail))
    if kind is None:
        if len(_KINDS) >= 1024:
            _KINDS.clear()
        kind = _KINDS[(status, detail)] = classify(status, detail).kind
    return kind


@functools.lru_cache(maxsize=4)
def _huge(chars: int) -> str:
    """A huge tool output of ``chars`` characters: one string for every such output (it is
    never changed, and writing 200,000 characters afresh each time only pushes the rest out of the cache)."""
    return "x" * chars


def _with_schemas(size: RequestSize, use_tools: bool) -> RequestSize:
    """A request's size with the tool schemas, when it offers tools (as the real provider counts them)."""
    return RequestSize(chars=size.chars + TOOL_SCHEMAS.chars, fixed=size.fixed + TOOL_SCHEMAS.fixed) if use_tools else size


SUMMARY_CHARS = 1_200
"""A summary's notes run up to this many characters."""
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
        self._message_draws = plan.messages.drop + plan.messages.delay + plan.messages.reorder > 0.0
        """Whether a delivery on a faulty channel draws drop, delay or reorder (``Dice.message``)."""
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
        self.reviews: SimReviews | None = None
        """Background reviews (``_sim_review``), when the plan enables them."""
        self.memory: SimProvider | None = None
        """The external memory provider (``_sim_memory``), when the plan enables one."""

    @property
    def down(self) -> bool:
        """The process is dead and not started again yet (``_sim_process``)."""
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        if value and not self._down:
            self.died_at = self.now
        self._down = value

    def close(self) -> None:
        """The run is over and read: break the reference cycles among its parts (sessions and
        their incarnations, hosts and clients, the checker and its parts, the world itself).

        Its memory is then freed at once by reference counting, while it is still in the cache,
        instead of surviving as cyclic garbage (a few thousand objects a seed) until the
        collector's next pass over an older generation: a sweep runs thousands of worlds."""
        for session in self.sessions.values():
            vars(session).clear()
        vars(self.checker).clear()
        vars(self).clear()

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
        heap, cancelled, pop = self._heap, self._cancelled, heapq.heappop
        checker = self.checker
        leases = checker.pool
        steps = self.steps
        while heap:
            if steps >= max_steps:
                return False
            when, _, order, action, args = pop(heap)
            if order in cancelled:
                cancelled.discard(order)
                continue
            self.now = when
            steps += 1
            self.steps = checker.step = steps
            action(*args)
            if when > checker.due or when > leases.next_due:  # a deadline may have passed: ``advance`` looks
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
        drawn = dice.message(faults) if self._message_draws else (0.0, 0.0)
        if drawn is None:
            self.note(f"fault: dropped a {channel} message")
            return
        extra, jitter = drawn
        delay += extra
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

    def start_model(
        self,
        incarnation: Incarnation,
        use_tools: bool,
        timeout: float,
        key: KeyLeased,
        prompt: Sequence[ChatMessage] = (),
        *,
        summary: bool = False,
        after: float = 0.0,
    ) -> tuple[int, int]:
        """Start a simulated model call with a leased ``key``; returns (wait id, heap entry).

        With a context window (``Workload.context_length``) the model counts ``prompt``'s tokens
        (as a provider would, at :data:`PROVIDER_RATIO`), refuses a request that does not fit,
        and answers a ``summary`` call (a compression's) with notes. ``after``: seconds the wait
        spends before the request goes out (a memory prefetch); the call's timeout counts them."""
        dice, faults, workload = self.dice, self.plan.model, self.plan.workload
        session_id = incarnation.session.session_id
        if self.pool.bug == "reuse_lease":  # planted: every call of a session on its first lease
            key = self._first_keys.setdefault(session_id, key)
        self.checker.pool.model_key(session_id, key.lease_id, key.key_id, self.now)
        wait_id = self.new_wait()
        base = dice.uniform("model", 0.01, max(0.01, workload.model_s))
        value: ModelReply | ModelFailure
        refused = self._key_fault(key.key_id) if self.key_faults else None
        window = workload.context_length
        tokens = _with_schemas(request_size(prompt), use_tools).tokens(PROVIDER_RATIO) if window else 0
        if refused is not None:
            value = refused
            done = self.now + dice.uniform("keys", 0.001, 0.05)
        elif window and (tokens > window or dice.fault("model", "overflow", faults.overflow)):
            detail = f"simulated HTTP 400: this model's maximum context length is {window} tokens, the request has {tokens} (context_length_exceeded)"
            value = ModelFailure(kind=_kind_of(400, detail), status=400, detail=detail)
            done = self.now + dice.uniform("model", 0.001, 0.05)
            self.note(f"fault: context overflow ({tokens} tokens, window {window})")
        elif dice.fault("model", "http_error", faults.http_error):
            status = dice.choice("model", faults.http_statuses)
            retry_after = dice.uniform("model", 0.0, 2.0) if status in (429, 503) and dice.below("model", 2) else None
            kind = _kind_of(status, f"simulated HTTP {status}")
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
            value = self.summary(tokens) if summary else self.reply(use_tools, tokens)
            done = self.now + base
        outcome = WaitFinished(wait_id=wait_id, tag="model", status="ok", value=value)
        if self.memory is not None:
            self.checker.memory.model_produced(outcome)
        entry = self.settle_wait("model_reply", incarnation, wait_id, self.now, done + after, timeout, outcome)
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
        return ModelFailure(kind=_kind_of(status, detail), status=status, detail=detail, retry_after=retry_after)

    def reply(self, use_tools: bool, prompt_tokens: int = 0) -> ModelReply:
        dice, workload = self.dice, self.plan.workload
        tokens = 10 + dice.below("model", 90)
        tokens = prompt_tokens or tokens  # reported as counted when there is a window (the machine calibrates on it)
        if not use_tools or dice.stream("model").random() >= workload.tool_calls:
            content = f"answer {self._calls}"
            if workload.answer_chars:
                content += " " + "a" * self._size(workload.answer_chars)
            return ModelReply(content=content, reasoning=None, tool_calls=(), finish_reason="stop", input_tokens=tokens, output_tokens=5)
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

    def summary(self, prompt_tokens: int) -> ModelReply:
        """A summary call's notes (they never name a call: the checker reads calls in requests)."""
        self._calls += 1
        content = f"## Goal\nsummary {self._calls}\n## Progress\n" + "s" * self.dice.below("model", SUMMARY_CHARS)
        return ModelReply(content=content, reasoning=None, tool_calls=(), finish_reason="stop", input_tokens=prompt_tokens, output_tokens=len(content) // 4)

    def _size(self, most: int) -> int:
        """A length between half of ``most`` and ``most``."""
        return most // 2 + self.dice.below("model", most - most // 2 + 1)

    # -- tools --------------------------------------------------------------------------------------

    def start_tool(self, incarnation: Incarnation, call_id: str, timeout: float) -> tuple[int, int]:
        dice, faults, workload = self.dice, self.plan.tools, self.plan.workload
        wait_id = self.new_wait()
        self.tool_runs[call_id] += 1
        duration = dice.uniform("tools", 0.001, max(0.001, workload.tool_s))
        hook = draw_hook_call(dice, self.plan.hooks) if self.plan.hooks.active else None
        if hook is not None:
            self.checker.hook_called(incarnation.session.session_id, call_id, hook.cost_s, self.plan.hooks.deadline_s, hook.skipped, hook.blocked, self.now)
            if hook.skipped is not None:
                self.note(f"hook pre_tool_call of {call_id} skipped ({hook.skipped}) after {hook.cost_s:.3f} s")
            duration += hook.cost_s
        if hook is not None and hook.blocked is not None:
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="ok", value=ToolOutput(content=f"[error] {hook.blocked}", ok=False))
        elif dice.fault("tools", "error", faults.error):
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="error", error="RuntimeError: the simulated tool raised")
        elif dice.fault("tools", "hang", faults.hang):
            duration = math.inf
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="ok")
        else:
            if dice.fault("tools", "slow", faults.slow):
                duration += dice.uniform("tools", 0.0, faults.slow_max_s)
            huge = dice.fault("tools", "huge_output", faults.huge_output)
            content = _huge(faults.huge_output_chars) if huge else f"result of {call_id}"
            if workload.result_chars and not huge:
                content += " " + "r" * (workload.result_chars // 2 + dice.below("tools", workload.result_chars - workload.result_chars // 2 + 1))
            outcome = WaitFinished(wait_id=wait_id, tag="tool", status="ok", value=ToolOutput(content=content))
        entry = self.settle_wait("tool_result", incarnation, wait_id, self.now, self.now + duration, timeout, outcome)
        return wait_id, entry
