"""What a session actor does as it publishes an event, beyond the event stream.

Each event the interpreter publishes goes to the session's hub, priced when it completes a
turn; then plugin hooks observe turns and commands (in the background, answers ignored), the
nudges count the turn and may fork a background review (a reactor wait of the actor, tag
``review``, ending in one ``ReviewFinished``), and memory providers hear of a turn's start and
answer. :class:`SessionEvents` sends all that; what to send is decided in
``_session_events_core`` (hooks, notices, price) and ``_nudges`` (counting, reviews).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from actors.memory import tell_providers
from protocols import WaitFinished
from protocols._memory import ProviderNotice
from protocols._session import TERMINAL_EVENTS, CompressContext, ReviewFinished, SessionEvent, SwitchModel, ToolStarted, TurnStarted, UndoTurn

from ._nudges import NudgeCounters, admit_review, earlier_user_turns, opens_user_turn, plan_after_turn, seeded, turn_facts
from ._review import ReviewOutcome, run_review
from ._session_events_core import TURN_HOOK_EVENTS, command_hook_call, priced, provider_notices, turn_hook_calls

if TYPE_CHECKING:
    from ._session import SessionActor


class SessionEvents:
    """One incarnation's publishing: the hub, the hooks, the nudges and reviews, the memory providers."""

    def __init__(self, actor: SessionActor) -> None:
        self.actor = actor
        self.reviews: dict[int, tuple[str, str, str]] = {}
        """Running review wait -> (the turn it follows, its session id, its kind)."""
        self.nudge_counters: NudgeCounters | None = None
        """Seeded from the transcript at the first turn's end (None: not yet)."""
        self.turn_facts: dict[str, tuple[bool, set[str]]] = {}
        """Running turn -> (opened by a user message, tools it called), for the nudges."""

    def publish(self, event: SessionEvent) -> None:
        actor = self.actor
        deps, state = actor.deps, actor.host.state
        event = priced(event, actor.calls.settings())
        actor.hub.publish(event)
        if deps.hooks is not None and type(event) in TURN_HOOK_EVENTS:
            transcript = state.transcript if state is not None else ()
            where = {"session_id": actor.session_id, "platform": deps.source, "model": actor.host.model}
            for name, kwargs in turn_hook_calls(event, transcript, **where, with_history=deps.hooks.wants("post_llm_call")):
                deps.hooks.fire_soon(name, kwargs, session_id=actor.session_id, publish=actor.hub.publish)
        if deps.nudges.enabled and deps.source != "cron":
            self.count_for_nudges(event)
        if deps.memory.provider:
            loaded = state.transcript if state is not None else None
            where = {"session_id": actor.session_id, "model": actor.host.model, "platform": deps.source}
            for notice in provider_notices(event, loaded, **where, tool_count=len(deps.tools)):
                tell_providers(actor.registry, deps.memory, notice)

    def command(self, message: SwitchModel | UndoTurn | CompressContext) -> None:
        """A command plugin hooks observe (``command:model|undo|compress``)."""
        hooks, actor = self.actor.deps.hooks, self.actor
        assert hooks is not None
        name, kwargs = command_hook_call(message, session_id=actor.session_id, platform=actor.deps.source)
        hooks.fire_soon(name, kwargs, session_id=actor.session_id, publish=actor.hub.publish)

    def session_ended(self) -> None:
        """The incarnation ended: ``on_session_finalize`` for plugins, ``session_end`` for memory providers."""
        actor, deps = self.actor, self.actor.deps
        if deps.hooks is not None:
            finalize = {"session_id": actor.session_id, "platform": deps.source}
            deps.hooks.fire_soon("on_session_finalize", finalize, session_id=actor.session_id, publish=actor.hub.publish)
        if deps.memory.provider and actor.context is not None:
            tell_providers(actor.context.registry, deps.memory, ProviderNotice(op="session_end", arguments={"session_id": actor.session_id}))

    # -- nudges and background review (decisions in ``_nudges``; the review runs as a wait) -------

    def count_for_nudges(self, event: SessionEvent) -> None:
        actor = self.actor
        if isinstance(event, TurnStarted):
            self.turn_facts[event.turn_id] = (opens_user_turn(event.text), set())
        elif isinstance(event, ToolStarted) and event.turn_id in self.turn_facts:
            self.turn_facts[event.turn_id][1].add(event.name)
        elif isinstance(event, TERMINAL_EVENTS) and event.turn_id in self.turn_facts and actor.host.state is not None:
            user_turn, used = self.turn_facts.pop(event.turn_id)
            transcript, nudges, tools = actor.host.state.transcript, actor.deps.nudges, actor.deps.tools
            if self.nudge_counters is None:
                self.nudge_counters = seeded(earlier_user_turns(transcript, user_turn), nudges)
            self.nudge_counters, due = plan_after_turn(self.nudge_counters, turn_facts(event, user_turn, used), nudges, tools.keys())
            plan = admit_review(due, len(self.reviews))
            if plan is None:
                return
            review_id = f"{actor.session_id}.review-{self.nudge_counters.user_turns}"
            review = functools.partial(run_review, iterations=nudges.review_iterations, timeout=nudges.review_timeout)
            args = (actor.registry, actor.reactor, actor.deps.hubs, review_id, actor.session_id, plan, plan.tools(tools.keys()), transcript)
            handle = actor.start_wait(review, *args, tag="review", timeout=nudges.review_timeout + 30.0)
            self.reviews[handle.wait_id] = (event.turn_id, review_id, plan.kind)

    def reviewed(self, finished: WaitFinished) -> None:
        turn_id, review_id, kind = self.reviews.pop(finished.wait_id, ("", "", ""))
        outcome = finished.value if finished.status == "ok" and isinstance(finished.value, ReviewOutcome) else None
        if outcome is None:
            why = f"the background review ended without an answer ({finished.status}: {finished.error or 'no detail'})"
            outcome = ReviewOutcome(ok=False, saved=(), summary=why)
        done = ReviewFinished(turn_id=turn_id, review_session_id=review_id, kind=kind, saved=outcome.saved, summary=outcome.summary, ok=outcome.ok)
        self.actor.publish(done)
