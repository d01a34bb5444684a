"""Delegation: a session's tool starts child sessions and waits for their final answers.

Children are sessions like any other (one actor each under ``/sessions``), started with
:class:`SessionOverrides`: a parent, a depth, a smaller iteration budget and a tool set
without the blocked tools. The waiting happens in the parent's tool call (a reactor
wait), so cancelling the parent's turn cancels the wait, which cancels each child's turn:
their model streams stop and their process groups are killed.

Invariant: a child never outlives its parent's interest: the wait's ``finally`` cancels
every child turn that has not ended, shielded from the cancellation itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import TYPE_CHECKING, Literal

import trio

from actors import Address, Reactor, Registry
from actors.memory import MemoryOptions, tell_providers
from protocols import SessionInbox, StartTurn, TurnCompleted, TurnFailed
from protocols._memory import ProviderNotice

from ._hub import HubRegistry
from ._reader import run_turn

if TYPE_CHECKING:
    from actors.hooks import Hooks

BLOCKED_IN_CHILDREN = frozenset({"delegate_task", "clarify", "memory", "execute_code"})
MAX_CHILDREN = 3
CHILD_ITERATIONS = 50
ChildStatus = Literal["completed", "failed", "interrupted", "error"]


@dataclasses.dataclass(frozen=True, slots=True)
class DelegationLimits:
    """``delegation:`` in config.yaml."""

    max_children: int = MAX_CHILDREN
    """Children of one session running at once (``max_concurrent_children``)."""
    spawn_depth: int = 1
    """Levels of children under a top session (``max_spawn_depth``): a session at this depth cannot delegate (the top one is depth 0)."""
    child_iterations: int = CHILD_ITERATIONS
    """A child turn's tool-calling iterations (``max_iterations``)."""


@dataclasses.dataclass(frozen=True)
class SessionOverrides:
    """How a child session differs from the runtime's defaults."""

    parent_session_id: str | None
    depth: int
    blocked_tools: frozenset[str] = BLOCKED_IN_CHILDREN
    allowed_tools: frozenset[str] | None = None
    """Only these tools (a background review's memory and skill tools); None: all but ``blocked_tools``."""
    max_iterations: int = CHILD_ITERATIONS
    source: str = "delegate"


class Delegation:
    """One per session: starts that session's children (used from the reactor thread only)."""

    def __init__(
        self,
        registry: Registry,
        reactor: Reactor,
        hubs: HubRegistry,
        session_id: str,
        depth: int,
        limits: DelegationLimits = DelegationLimits(),
        *,
        hooks: Hooks | None = None,
        memory: MemoryOptions | None = None,
    ) -> None:
        self.registry = registry
        self.memory = memory
        """The runtime's memory providers: an external one is told each child's result (``on_delegation``)."""
        self.limits = limits
        self.reactor = reactor
        self.hubs = hubs
        self.session_id = session_id
        self.depth = depth
        self._numbers = itertools.count(1)
        self._slots = trio.Semaphore(limits.max_children)
        self.hooks = hooks
        """``subagent_stop`` observes each child's end (in the background)."""

    @property
    def allowed(self) -> bool:
        return self.depth < self.limits.spawn_depth

    def next_child_id(self) -> str:
        """Name the next child (in task order, so runs are reproducible)."""
        return f"{self.session_id}.child-{next(self._numbers)}"

    async def run_child(self, child_id: str, goal: str, context: str | None, *, timeout: float) -> tuple[bool, str]:
        """Run one child turn to its end; ``(ok, final answer or error)``."""
        started = time.monotonic()
        status: ChildStatus = "error"
        summary: str | None = None
        try:
            status, summary = await self._run_child(child_id, goal, context, timeout=timeout)
            return status == "completed", summary
        except trio.Cancelled:
            status = "interrupted"
            raise
        finally:
            if self.memory is not None and self.memory.provider and status == "completed":
                tell_providers(self.registry, self.memory, ProviderNotice(op="delegation", arguments={"task": goal, "result": summary or ""}))
            if self.hooks is not None:
                stopped = {
                    "parent_session_id": self.session_id,
                    "child_role": None,
                    "child_summary": summary,
                    "child_status": status,
                    "duration_ms": int((time.monotonic() - started) * 1000),
                    "child_session_id": child_id,
                }
                self.hooks.fire_soon("subagent_stop", stopped, session_id=self.session_id, publish=self.hubs.get(self.session_id).publish)

    async def _run_child(self, child_id: str, goal: str, context: str | None, *, timeout: float) -> tuple[ChildStatus, str]:
        from supervisor import start_child

        from ._address import SESSIONS_PATH

        async with self._slots:  # at most limits.max_children children of this session at once
            turn_id = f"{child_id}.turn"
            overrides = SessionOverrides(parent_session_id=self.session_id, depth=self.depth + 1, max_iterations=self.limits.child_iterations)
            address: Address[SessionInbox] = start_child(self.registry, self.registry.lookup(SESSIONS_PATH), child_id, child_id, overrides)
            prompt = goal if not context else f"{goal}\n\nContext from the parent task:\n{context}"
            with trio.fail_after(timeout):
                end = await run_turn(
                    self.reactor, self.hubs.get(child_id), address, StartTurn(text=prompt, turn_id=turn_id), cancel_reason="the parent task was cancelled"
                )
            if isinstance(end, TurnCompleted):
                return "completed", end.text
            if isinstance(end, TurnFailed):
                return "failed", end.error
            return "interrupted", end.reason
