"""The adapter's two fast paths, executed (the decisions are pure: ``_inbound_lane``,
``_answer_plan``, ``Chats.answer_to``): what a poll's wait needs to tell a fresh message's
``StartTurn`` itself (:meth:`FastPaths.lane`, re-checked against the dispatch hooks when the
answer comes), and a completed turn's reply sent by the turn's own wait (the plan fired in the
reactor's :class:`AnswerDesk`, the chat's end decided by the actor on :class:`Answering`, the
reply marked sent with that decision). A mixin of :class:`GatewayAdapter`: it uses the
adapter's state and effects, declared below.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Callable
from typing import Any

import trio

from actors._errors import ReactorStopped
from protocols import TurnCompleted

from ._access import AccessPolicy
from ._answer_plan import AnswerDesk, Answering, AnswerPlan, Fired, answer_text
from ._burst import Burst
from ._chats import Chats
from ._dedup import SeenLog
from ._dispatch_hook import HOOK
from ._inbound_lane import Lane, Laned
from ._resets import ChatSession, ResetPolicy
from ._state_file import Outgoing, StateFile
from ._waits import follow_turn

log = logging.getLogger("actors.platforms.gateway._adapter")


class FastPaths:
    """The inbound lane and the planned replies of :class:`GatewayAdapter` (a mixin)."""

    platform: str
    hooks: Any
    chats: Chats
    seen: SeenLog
    sessions: dict[str, ChatSession]
    bursts: dict[str, Burst]
    burst_window: float
    takes_commands: bool
    policy: AccessPolicy
    reset_policy: ResetPolicy
    tz: Any
    context_line: str
    newest: Any
    reactor: Any
    address: Any
    state_file: StateFile
    final_call: Callable[[Outgoing, str], tuple[list[str], Any]]
    turn_ended: Callable[..., None]
    delivered: Callable[[str, Any, str], None]
    _deliver: Callable[..., Any]

    def start_fast_paths(self) -> None:
        """The fast paths' state, empty (the adapter's ``__init__`` calls it)."""
        self.laned: dict[str, Laned] = {}
        """Turn id -> the lane's decision for a message of the batch being decided (``_inbound_lane``)."""
        self.told_by_lane: set[str] = set()
        """Turns of this batch whose ``StartTurn`` the poll's wait told already."""
        self.retrying: set[str] = set()
        """Chat keys whose ``/retry`` is asked: no poll's lane starts a turn there meanwhile."""
        self.plans: dict[str, AnswerPlan] = {}
        """Turn id -> the reply its completed end gets, sent by its wait (``_answer_plan``)."""
        self.answered: set[str] = set()
        """Turn ids of plans fired whose chat end this actor decided (``Answering``)."""
        self.desk = AnswerDesk()
        """The fired plans, in the reactor thread only (this actor calls it by ``call_soon``)."""

    def close_desk(self) -> list[TurnCompleted]:
        """Revoke every plan, in the reactor (where the waits fire them): the answer lists the
        ends fired already (their replies go; the chat ends are decided here before the last save)."""
        answer: queue.SimpleQueue[list[TurnCompleted]] = queue.SimpleQueue()
        self.reactor.call_soon(lambda: answer.put(self.desk.close()))
        try:
            return answer.get(timeout=1.0)  # a call_soon answered at once; the stop has STOP_DEADLINE in all
        except queue.Empty:  # a reactor that busy: a reply it fires later is still marked sent (with the file's newest state)
            log.warning("gateway %s: the reactor did not answer the stop's revoke within 1 s", self.platform)
            return []

    async def _follow_and_answer(self, plan: AnswerPlan, *follow: Any) -> tuple[Any, Any]:
        """Follow the turn; if it completes (and ``plan`` was not revoked), send its reply from
        here, telling the actor at once: ``(the end, the delivery's outcome or None)``."""
        end = await follow_turn(*follow)
        fired = self.desk.fire(plan.turn_id, end) if isinstance(end, TurnCompleted) else None
        if fired is None:
            return end, None
        try:
            self.address.tell(Answering(fired.end))
            owed = Outgoing(turn_id=plan.turn_id, message=plan.message, text=answer_text(fired.end.text))
            pieces, markup = self.final_call(owed, "")  # no stream: a streamed turn has no plan
            return end, await self._deliver(owed.message, pieces, owed.turn_id, markup, fired)
        finally:
            self.desk.done(plan.turn_id)

    def lane(self) -> Lane | None:
        """What a poll's wait needs to start turns itself (``_inbound_lane``); None: no lane (the
        hooks screen messages, or bursts are held)."""
        if self.screened() or self.burst_window > 0 or not self.takes_commands:
            return None
        busy = frozenset(self.chats.chats) | frozenset(self.bursts) | frozenset(self.retrying)
        return Lane(self.seen, busy, dict(self.sessions), self.policy, self.reset_policy, self.tz, self.platform, self.context_line)

    def screened(self) -> bool:
        """Whether a ``pre_gateway_dispatch`` hook screens inbound messages now. The hooks'
        subscriptions change in the reactor only (a plugin's load, reload or disabling), so a
        poll's wait, which runs there, reads them as they are when its answer comes."""
        return self.hooks is not None and bool(self.hooks.wants(HOOK))

    def answering(self, end: TurnCompleted) -> None:
        """A planned reply is being sent by the turn's wait: decide the chat's end now (once)."""
        plan = self.plans.get(end.turn_id)
        if plan is None or end.turn_id in self.answered:
            return
        self.answered.add(end.turn_id)
        self.turn_ended("ok", end, "", sent=plan)

    def answered_turn(self, status: str, value: Any, error: str) -> None:
        if status != "ok":  # _follow_and_answer returns every end itself: only a bug lands here
            raise RuntimeError(f"following a turn failed ({status}: {error})")
        end, outcome = value
        self.plans.pop(end.turn_id, None)
        self.answered.discard(end.turn_id)
        if outcome is None:  # not completed (or revoked): decided here as any end
            self.turn_ended(status, end, error)
        else:
            self.delivered(status, outcome, error)

    def decided(self, plan: AnswerPlan) -> None:
        """Hand the state holding a fired plan's chat end to its wait (in the reactor)."""
        with contextlib.suppress(ReactorStopped):  # its wait is gone with the reactor
            self.reactor.call_soon(self.desk.decide, plan.turn_id, self.newest)

    async def _decision(self, turn_id: str, fired: Fired) -> Any:
        """The state the actor decided a sent reply's chat end in. Cancelled (the adapter stopped
        or crashed), the reply is marked sent all the same, with the best state known, first."""
        try:
            return await self.desk.decision(turn_id, fired)
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self.state_file.mark_sent(turn_id, fired.newest)
            raise
