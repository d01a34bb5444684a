"""An external memory provider in the simulator: its actor, its faults, and a turn's prefetch.

One provider actor per world (the runtime's ``/memory/<name>``), shared by its sessions. Like
``ProviderActor`` it does one operation at a time, so an operation starts when the one before
it is done (``free_at``, as ``SimStore``); each operation's fate is drawn from the plan
(``ProviderFaults``, stream ``providers``): answered, answered late, hung for ``hang_s``, raised
(answered as an error), or crashed (answered as an error, then ``/memory`` restarts the actor
after ``restart_s``, within ``MEMORY_INTENSITY``; past it the supervisor gives up and the
address closes: later asks find no actor, ``unavailable``). A process death starts a fresh one.
(``_sim_supervisor`` is a session's supervisor, built around its ``SessionHost``: a provider
needs only the restart delay and the intensity, kept here.)

A turn's first model call asks the prefetch first, inside the call's wait, as
``_memory_turn.with_memory`` does, with its pure pieces: :func:`first_call_of_turn` (later calls
of the turn reuse the block), :func:`turn_query`, the outcome by :func:`prefetch_result` /
:func:`missed` at the deadline, :func:`recalled` (the block and the ``MemorySkipped`` events) and
:func:`with_block` (the request). The request goes out when the provider answered or at the
deadline, whichever is first; the events are published then, if the wait still lives. As the
session actor does, a turn that starts tells the provider ``turn_start`` (ahead of its prefetch
in the inbox) and one that answered tells it ``sync_turn``: notices, whose faults only hold or
restart the actor. Not modelled: the built-in provider's prefetch (it recalls nothing and is
not faulted here), summary calls' ``on_pre_compress``.
"""

from __future__ import annotations

import collections
import math
from typing import TYPE_CHECKING, Literal

from protocols import ChatMessage, WaitFinished
from protocols._memory import ProviderReply
from protocols._session import MemorySkipped

from ..agent._machine import CallModel
from ..agent._memory_turn import TurnMemory, first_call_of_turn, recalled, turn_query, with_block
from ..memory import missed, prefetch_result
from ..memory._tree import MEMORY_INTENSITY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._sim_session import SimSession
    from ._sim_supervisor import Incarnation
    from ._sim_world import World

MemoryBug = Literal["provider_fails_call", "prefetch_no_deadline", "skip_unreported", "prefetch_every_call", "block_in_transcript"]
"""Memory provider bugs a test plants on purpose (with the ``review`` preset):

- ``provider_fails_call``: a prefetch that fails ends the model call's wait with its error (the failure escapes the wait).
- ``prefetch_no_deadline``: the turn waits for the provider's answer however late it comes.
- ``skip_unreported``: a skipped prefetch publishes no ``MemorySkipped``.
- ``prefetch_every_call``: every model call of a turn prefetches (and reports its skips), not only the first.
- ``block_in_transcript``: the recalled block is stored with the turn's user message.
"""
PROVIDER = "sim"
"""The simulated provider's name (``memory.provider``)."""


class Prefetch:
    """One turn's prefetch, from its ask to the moment its model request goes out."""

    __slots__ = ("asked_at", "block", "ends", "failure", "key", "memo", "messages", "skips")

    def __init__(self, key: tuple[str, str, str], asked_at: float, ends: float, memo: TurnMemory) -> None:
        self.key, self.asked_at, self.ends, self.memo = key, asked_at, ends, memo
        self.block = ""
        self.skips: list[MemorySkipped] = []
        self.messages: Sequence[ChatMessage] = ()
        self.failure = ""
        """The provider's error, when it failed (for the planted ``provider_fails_call``)."""


class SimProvider:
    """The external provider's actor in one world."""

    def __init__(self, world: World) -> None:
        self.world, self.faults = world, world.plan.providers
        self.free_at = 0.0
        """When its thread is free for the next operation."""
        self.born = 0.0
        self.gone_at = math.inf
        """When ``/memory`` gave up on it (its address closed)."""
        self.restarts: collections.deque[float] = collections.deque()
        self.memos: dict[Incarnation, TurnMemory] = {}
        """Each session actor's ``TurnMemory`` (a restarted actor starts a fresh one)."""
        self.bug: MemoryBug | None = None

    # -- the actor ------------------------------------------------------------------------------

    def _operate(self, op: str, query: str = "") -> tuple[float, ProviderReply | None]:
        """One operation told now: when it is answered (inf: never) and with what (None: no actor at the address)."""
        world, faults, dice = self.world, self.faults, self.world.dice
        now = world.now
        if world.died_at > self.born:  # a new process: a fresh actor
            self.born, self.free_at, self.gone_at = now, now, math.inf
            self.restarts.clear()
        if self.gone_at <= now:
            return now, None
        start = max(now, self.free_at)
        kinds = ((f"{op}_raises", faults.raises), (f"{op}_crash", faults.crash), (f"{op}_hang", faults.hang), (f"{op}_late", faults.late))
        kind = dice.pick("providers", kinds)
        done = start + dice.uniform("providers", 0.0, faults.answer_max_s)
        reply = ProviderReply(provider=PROVIDER, text=f"fact {dice.below('providers', 1000)} about {query[:24]!r}")
        if kind is not None:
            world.note(f"fault: memory provider {kind.replace('_', ' ')}")
        if kind == f"{op}_raises":
            reply = ProviderReply(provider=PROVIDER, ok=False, text="ProviderError: simulated")
        elif kind == f"{op}_crash":
            reply = ProviderReply(provider=PROVIDER, ok=False, text=f"the {PROVIDER} memory provider failed (RuntimeError: simulated); it is restarted")
            self.free_at = self._crashed(done)
            return (done if start < self.gone_at else math.inf), reply
        elif kind == f"{op}_hang":
            done = start + faults.hang_s
        elif kind == f"{op}_late":
            done = start + faults.deadline_s + dice.uniform("providers", 1e-3, max(1e-3, faults.late_max_s))
        self.free_at = done
        return (done if start < self.gone_at else math.inf), reply

    def _crashed(self, at: float) -> float:
        """The actor crashes at ``at``: when it is up again (within the intensity), else it is gone."""
        self.world.checker.counts["provider_restarts"] += 1
        self.restarts.append(at)
        while self.restarts and at - self.restarts[0] > MEMORY_INTENSITY.within:
            self.restarts.popleft()
        if len(self.restarts) > MEMORY_INTENSITY.max_restarts:
            self.gone_at = min(self.gone_at, at)
            return math.inf
        return at + self.faults.restart_s

    # -- a turn's prefetch ------------------------------------------------------------------------

    def prefetch(self, session: SimSession, incarnation: Incarnation, effect: CallModel) -> tuple[float, Sequence[ChatMessage], Prefetch | None]:
        """A model call of a turn: how long until its request goes out, the request, and the prefetch (its first call only)."""
        world, faults = self.world, self.faults
        memo = self.memos.get(incarnation)
        if memo is None:
            memo = self.memos[incarnation] = TurnMemory()
        if self.bug == "prefetch_every_call":
            memo.turn_id = ""
        if not first_call_of_turn(memo, effect.turn_id):
            return 0.0, with_block(effect.messages, memo.block), None
        now = world.now
        answered, reply = self._operate("prefetch", turn_query(effect.messages))
        deadline = math.inf if self.bug == "prefetch_no_deadline" else faults.deadline_s
        key = (session.session_id, effect.turn_id, PROVIDER)
        world.checker.memory.asked_prefetch(key, now, answered, reply is not None and reply.ok, faults.deadline_s)
        if answered - now <= deadline:
            result, ends = prefetch_result(PROVIDER, reply), answered
        else:
            result, ends = missed(PROVIDER, faults.deadline_s), now + min(deadline, faults.hang_s * 2)
        prefetch = Prefetch(key, now, ends, memo)
        prefetch.block, events = recalled([result], effect.turn_id)
        prefetch.skips = events
        prefetch.messages = with_block(effect.messages, prefetch.block)
        if result.outcome in ("error", "unavailable"):
            prefetch.failure = result.detail
        return ends - now, prefetch.messages, prefetch

    def started(self, session: SimSession, incarnation: Incarnation, prefetch: Prefetch, wait_id: int, timeout: float) -> None:
        """The model call's wait started (``wait_id``): its prefetch ends at ``prefetch.ends``."""
        world = self.world
        world.at(prefetch.ends, self._prefetched, session, incarnation, prefetch, wait_id)
        if self.bug == "provider_fails_call" and prefetch.failure:  # planted: the failure escapes the wait
            failed = WaitFinished(wait_id=wait_id, tag="model", status="error", error=f"ProviderFailure: {prefetch.failure}")
            world.settle_wait("model_reply", incarnation, wait_id, world.now, prefetch.ends, timeout, failed)

    def _prefetched(self, session: SimSession, incarnation: Incarnation, prefetch: Prefetch, wait_id: int) -> None:
        if incarnation.waits_cancelled or wait_id in incarnation.cancelled_waits or incarnation is not session.current:
            return  # the wait was cancelled with the prefetch in it: nothing is reported
        world = self.world
        world.checker.memory.prefetch_ended(prefetch.key, prefetch.asked_at, world.now)
        prefetch.memo.block = prefetch.block
        if prefetch.block:
            world.checker.counts["memory_blocks"] += 1
            if self.bug == "block_in_transcript":
                world.store.commit_now(session.session_id, (ChatMessage(role="user", content=prefetch.block),))
        if self.bug != "skip_unreported":
            for event in prefetch.skips:
                session.publish(event)

    # -- after a turn ----------------------------------------------------------------------------

    def told(self, op: str) -> None:
        """A notice told to the provider (no answer; it may hang, raise or crash): ``turn_start`` as a turn
        starts (ahead of its prefetch in the inbox), ``sync`` (``sync_turn``) after a turn that answered."""
        self.world.checker.counts[f"{op}s"] += 1
        self._operate(op)

    def session_down(self, incarnation: Incarnation | None) -> None:
        if incarnation is not None:
            self.memos.pop(incarnation, None)
