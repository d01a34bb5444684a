"""The session actor: one per conversation; the session interpreter's port onto the kernel.

Decisions are in the pure cores (``_machine``, ``_session_core``), every line that is not
I/O in ``_session_host.SessionHost``, which the simulator runs too. Here: store writes go
to the store writer; model calls, tools, loads and timers are reactor waits; events go to
the hub. It never waits. One actor per session id (``session_address`` reserves it).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import math
import time
import uuid
from typing import Any

import msgspec

from actors import Actor, HermesError, WaitHandle
from actors.memory import system_prompt_blocks, tell_providers
from actors.store import store_address
from protocols import KeyLeased, LeaseKey, ReportKey, WaitFinished
from protocols._leases import AcquireLease, Fence, LeaseGranted, LeaseRefused, ReleaseLease, RenewLease
from protocols._memory import ProviderNotice
from protocols._session import (
    TERMINAL_EVENTS,
    AnswerClarification,
    CancelTurn,
    CompressContext,
    EnsureSession,
    RefreshSettings,
    ResolveApproval,
    ReviewFinished,
    SessionEvent,
    SessionInbox,
    StartTurn,
    Subscribe,
    SwitchModel,
    ToolStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnRejected,
    TurnStarted,
    UndoTurn,
    Unsubscribe,
)
from protocols._store import GetStoreStatistics, ReopenWrites, StoreFailed, StoreStatistics

from ._approvals import ApprovalGate
from ._auxiliary import auxiliary_model
from ._clarify import Clarifier
from ._delegation import Delegation, SessionOverrides
from ._deps_table import DepsTable, deps_for
from ._hooked import TurnHooks, hooked_model, hooked_tool
from ._loading import as_loaded, build_system_prompt, load_with_retry
from ._machine import CallModel, RunTool, SessionState
from ._memory_turn import TurnMemory, with_memory, with_pre_compress
from ._model import ModelSettings, call_model
from ._node import LeaseLapsed
from ._nudges import NudgeCounters, TurnFacts, admit_review, plan_after_turn, seeded
from ._providers import Providers
from ._review import ReviewOutcome, run_review
from ._sanitize import INTERRUPTED_RESULT
from ._session_core import Loaded, offered_tools
from ._session_deps import SessionDeps, child_deps
from ._session_host import SessionHost
from ._session_port import HostConfig, Write
from ._session_timers import IdleTimer, LeaseRenewDue, Timer
from ._tools import ToolContext, Workspace

log = logging.getLogger(__name__)


class StoreDiverged(HermesError):
    """A write of this session was refused or lost, so its memory no longer matches the store."""


class SessionActor(Actor[SessionInbox | Timer]):
    """Hosts one conversation: the interpreter's port onto the actor kernel."""

    def __init__(self, deps: SessionDeps | DepsTable, session_id: str, overrides: SessionOverrides | None = None) -> None:
        super().__init__()
        self.overrides = overrides
        mine = deps_for(deps, session_id)  # a gateway chat's session takes its platform's deps
        self.deps = deps = child_deps(mine, overrides) if overrides is not None else mine
        self.session_id = session_id
        self.hub = deps.hubs.get(session_id)
        self.open_turns = self.hub.open_turns
        self.tools_schema = [tool.schema() for tool in deps.tools.values()]
        self.tools_version: object = getattr(deps.tools, "version", None)
        """A live tool table (MCP servers' tools) has a version; the schemas follow it."""
        surface = "cli" if deps.source == "cli" else "gateway"
        gate = ApprovalGate(self.hub.publish, home=deps.home, settings=deps.approvals, hooks=deps.hooks, session_id=session_id, surface=surface)
        self.workspace = Workspace(deps.workdir, gate, Clarifier(self.hub))
        host = HostConfig(
            session_id=session_id,
            model=deps.model.model,
            machine=deps.config,
            source=deps.source,
            recovery=deps.recovery,
            ack_timeout=deps.store_ack_timeout,
            parent_session_id=overrides.parent_session_id if overrides is not None else None,
        )
        self.host = SessionHost(host, self)
        self.turn_hooks = TurnHooks()
        self.turn_memory = TurnMemory()
        self.reviews: dict[int, tuple[str, str, str]] = {}
        """Running review wait -> (the turn it follows, its session id, its kind)."""
        self.nudge_counters: NudgeCounters | None = None
        """Seeded from the transcript at the first turn's end (None: not yet)."""
        self.fence: Fence | None = None
        """Cluster mode: this session's lease, carried by each of its writes (None: no lease)."""
        self.lease_lost = False
        """Cluster mode: the lease was refused or a write fenced; this incarnation is stopping."""
        self.lease_asked = 0.0
        """Cluster mode: this process's monotonic clock when the last acquire or renewal was sent."""
        self.lease_until = math.inf
        """Cluster mode: the lease is surely held until then (monotonic): the store granted it no
        earlier than it was asked. Past it (this process was paused, its renewals stalled), no
        model call starts: the session may be another node's by now (``LeaseLapsed``)."""
        self.turn_facts: dict[str, tuple[bool, set[str]]] = {}
        """Running turn -> (opened by a user message, tools it called), for the nudges."""

    # -- lifecycle ----------------------------------------------------------------------------

    def started(self) -> None:
        context = self._context()
        self.me = self.actor_ref
        self.store = store_address(context.registry, self.deps.store_path)
        self.providers = Providers(self.deps.model, self.deps.providers, context.registry)
        depth = self.overrides.depth if self.overrides is not None else 0
        self.delegation = Delegation(
            context.registry, context.reactor, self.deps.hubs, self.session_id, depth, self.deps.delegation, hooks=self.deps.hooks, memory=self.deps.memory
        )
        # Load only after the writer has committed everything sent before now: writes of a
        # dead incarnation may still be in its inbox (otherwise a tool result landing after
        # the reload would get a second, synthetic result). Those that build on a refused
        # one are refused (the fence); what this incarnation writes is not.
        self.reopen_writes()
        node = self.deps.node
        if node is None:
            self.store.tell(GetStoreStatistics(reply_to=self.actor_ref))
        else:  # cluster mode: own the session before reading it; the grant (after its commit) starts the load
            # A takeover too: a holder that stopped beating loses the lease, and what it (or a
            # dead process of this node) left open is settled before this incarnation loads.
            acquire = AcquireLease(
                session_id=self.session_id,
                node_id=node.node_id,
                ttl=node.lease_ttl,
                dead_after=node.lease_ttl,
                settle=INTERRUPTED_RESULT,
                token="lease",
                reply_to=self.actor_ref,
            )
            self.lease_asked = time.monotonic()
            self.store.tell(acquire)

    def receive(self, message: SessionInbox | Timer) -> Any:
        if not self.host.alive and isinstance(message, StartTurn | CompressContext | CancelTurn | EnsureSession | SwitchModel | UndoTurn):
            # This incarnation passivates (or reloads): it takes no new work. Told again, the
            # command lands behind its stop and the next incarnation takes it (the address hands
            # an exited incarnation's unread messages on; a passivated session holding messages
            # is started again).
            self._context().address.tell(message)
            return None
        if self.deps.hooks is not None and isinstance(message, SwitchModel | UndoTurn | CompressContext):
            self.command_hook(message)
        match message:
            case LeaseGranted() | LeaseRefused() | LeaseRenewDue():
                self.on_lease(message)
            case StoreFailed(token="lease") if self.deps.node is not None:
                self.lease_failed(message)
            case StoreFailed(fenced=Fence()) if self.deps.node is not None:
                try:
                    self.host.receive(message)  # the turn fails as for any refused write; then this node lets go
                except StoreDiverged:
                    pass  # no reload: the session is another node's now
                self.lost_lease(f"a write was refused: {message.error}")
            case Subscribe(subscriber=subscriber, after_seq=after_seq, observer=observer):
                return self.hub.subscribe(subscriber, after_seq=after_seq, observer=observer)
            case Unsubscribe(subscriber=subscriber):
                self.hub.unsubscribe(subscriber)
            case StoreStatistics() if self.host.state is None:
                deps = self.deps
                recall = functools.partial(system_prompt_blocks, self._context().registry, deps.memory)
                read = (deps.open_reader, self.session_id, deps.home, deps.workdir, deps.tool_settings.memory, recall)
                self.start_wait(load_with_retry, *read, tag="load", timeout=deps.load_timeout)
            case WaitFinished(tag="load"):
                self.host.receive(self.loaded(message))
            case WaitFinished(tag="review"):
                self.reviewed(message)
            case AnswerClarification(request_id=request_id, answer=answer) if self.workspace.clarifier is not None:
                self.reactor.call_soon(self.workspace.clarifier.answer, request_id, answer)
            case ResolveApproval(request_id=request_id, choice=choice) if self.workspace.approvals is not None:
                self.reactor.call_soon(self.workspace.approvals.resolve, request_id, choice)
            case RefreshSettings() if self.workspace.busy():
                log.info("session %s keeps its settings until it ends: commands it started still run in the background", self.session_id)
            case _ if self.host.receive(message):
                pass
            case _:
                return super().receive(message)
        return None

    def loaded(self, finished: WaitFinished) -> Loaded:
        if finished.status != "ok":
            raise RuntimeError(f"session {self.session_id}: could not load from the store: {finished.status} {finished.error}")
        # What settling the store at start found is told once: the hub outlives this incarnation.
        interrupted = self.deps.interrupted.get(self.session_id) if not self.open_turns.seen else None
        prompt = functools.partial(build_system_prompt, self.deps.model.model, self.deps.platform_hint, datetime.date.today())
        return as_loaded(finished.value, prompt, interrupted)

    def terminated(self, kind: str) -> None:
        if self.deps.hooks is not None:
            self.deps.hooks.fire_soon(
                "on_session_finalize", {"session_id": self.session_id, "platform": self.deps.source}, session_id=self.session_id, publish=self.hub.publish
            )
        if self.deps.memory.provider and self.context is not None:
            tell_providers(self.context.registry, self.deps.memory, ProviderNotice(op="session_end", arguments={"session_id": self.session_id}))
        if kind == "normal":
            self.hub.release()  # passivated: keep the numbering, not the events
        # Whatever tools left running (background commands) ends with the session.
        try:
            self.reactor.call_soon(self.workspace.close)
        except HermesError:
            pass  # the reactor is gone, and took those tasks with it

    def stopping(self) -> None:
        # An orderly stop (shutdown, passivation) settles the running turn first: its
        # cancelled results reach the store, which stops after the sessions.
        self.host.stop_turn("the server is shutting down")
        if self.fence is not None and self.deps.node is not None and not self.lease_lost:  # after those writes: the writer answers in order
            self.store.tell(ReleaseLease(session_id=self.session_id, node_id=self.fence.node_id, epoch=self.fence.epoch))

    # -- cluster mode: the session's lease --------------------------------------------------

    def on_lease(self, message: LeaseGranted | LeaseRefused | LeaseRenewDue) -> None:
        node = self.deps.node
        if node is None:
            return
        match message:
            case LeaseGranted(epoch=epoch):
                self.lease_until = self.lease_asked + node.lease_ttl
                first = self.fence is None
                self.fence = Fence(node_id=node.node_id, epoch=epoch)
                self.send_after(node.renew_every, LeaseRenewDue())
                if first:  # every write told before the grant is committed: load now
                    self.store.tell(GetStoreStatistics(reply_to=self.actor_ref))
            case LeaseRefused(reason=reason):
                self.refuse_waiting(message)
                self.lost_lease(reason)
            case LeaseRenewDue() if self.fence is not None and not self.lease_lost:
                renew = RenewLease(
                    session_id=self.session_id, node_id=node.node_id, epoch=self.fence.epoch, ttl=node.lease_ttl, token="lease", reply_to=self.actor_ref
                )
                self.lease_asked = time.monotonic()
                self.store.tell(renew)
            case LeaseRenewDue():
                pass

    def lease_failed(self, failed: StoreFailed) -> None:
        """The store could not answer an acquire or a renewal (its lock timeout: a stopped node's
        open transaction holds the lease row; or a broken connection). Neither granted nor refused:
        an acquire fails the turns waiting for the load at once (503, retry) and this incarnation
        stops, so no request waits on a lease that may never come; a renewal is sent again soon
        (while it fails, ``lease_until`` stops model calls and the fence refuses late writes)."""
        node = self.deps.node
        if node is None or self.lease_lost:
            return
        if self.fence is None:
            self.lost_lease(f"the store did not answer its lease request: {failed.error}")
            return
        log.warning("session %s: renewing its lease failed, trying again: %s", self.session_id, failed.error)
        self.send_after(node.renew_every / 4, LeaseRenewDue())

    def refuse_waiting(self, refused: LeaseRefused) -> None:
        """Each turn waiting for this session's load is refused, naming the node that holds it
        (until a request is forwarded to its owner, its caller asks again later)."""
        ttl = self.deps.node.lease_ttl if self.deps.node is not None else 1.0
        wait = max(1.0, min(refused.expires_at - time.time(), ttl))  # a file store's clock is this machine's
        reason = f"session {self.session_id} is being answered by node {refused.owner or 'another node'}; send it again in {wait:.0f} s"
        for message in self.host.stash:
            if isinstance(message, StartTurn) and message.turn_id:
                self.publish(TurnRejected(turn_id=message.turn_id, reason=reason, owner=refused.owner, retry_after=wait))

    def lost_lease(self, why: str) -> None:
        """This node does not (or no longer) own the session: stop, without restart (a later message starts it again)."""
        log.warning("session %s: not owned by node %s: %s", self.session_id, self.deps.node.node_id if self.deps.node else "", why)
        self.lease_lost = True  # the fence stays: whatever this incarnation still writes is refused
        if self.host.state is None:  # turns asked before the load: their callers hear it now (503, retry)
            error = f"this node does not own session {self.session_id!r} ({why}); retry the request"
            asked_ids = [m.turn_id for m in self.host.stash if isinstance(m, StartTurn | CompressContext) and m.turn_id]
            # So do the turns a crashed incarnation left open (a write it lost when the store's
            # connection broke): the recovery that would answer them runs at a load, and none comes.
            for turn_id in dict.fromkeys([*(t for t, _ in self.open_turns.snapshot()), *asked_ids]):
                self.hub.publish(TurnFailed(turn_id=turn_id, error=error, kind="not_owner"))
            self.host.stash.clear()
        elif not self.host.alive and self.host.state.turn is not None:  # a refused write ended this incarnation: no Cancel will run
            error = f"this node lost session {self.session_id!r} to another node mid-turn ({why}); nothing more of this turn is stored"
            self.hub.publish(TurnFailed(turn_id=self.host.state.turn.turn_id, error=error, kind="not_owner"))
        self.stop()

    def settings(self) -> ModelSettings:
        """The runtime's model settings with this session's own model choice."""
        model = self.host.model
        return self.deps.model if model == self.deps.model.model else dataclasses.replace(self.deps.model, model=model)

    def lease(self, provider: str, request: LeaseKey) -> None:
        self.providers.lease(provider, request, self.address)

    def report(self, provider: str, outcome: ReportKey) -> None:
        self.providers.report(provider, outcome)

    # -- the port ---------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def new_turn_id(self) -> str:
        return f"turn_{uuid.uuid4().hex[:12]}"

    def tell_store(self, command: Write) -> None:
        if self.deps.node is not None and hasattr(command, "fence"):  # cluster mode: no write without a lease
            command = msgspec.structs.replace(command, fence=self.fence or Fence(node_id=self.deps.node.node_id, epoch=0))
        self.store.tell(command)

    def reopen_writes(self) -> None:
        self.store.tell(ReopenWrites(session_id=self.session_id))

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> WaitHandle:
        version = getattr(self.deps.tools, "version", None)
        if version != self.tools_version:  # an MCP server's tools changed since the last call
            self.tools_schema, self.tools_version = [tool.schema() for tool in self.deps.tools.values()], version
        tools = offered_tools(self.tools_schema, effect)
        settings = self.providers.settings(effect.provider, model, key.api_key)

        async def request(sent: Any) -> Any:
            if time.monotonic() > self.lease_until:
                raise LeaseLapsed(f"session {self.session_id}: this node's lease may have lapsed (its renewals stalled); no model call is made")
            return await call_model(
                self.deps.clients, settings, sent, tools, hub=self.hub, turn_id=effect.turn_id, session_id=self.session_id, options=effect.options
            )

        send: Any = request
        memory = self.deps.memory
        if memory.provider and effect.token.step == "model":  # the built-in provider recalls nothing per turn
            registry, publish = self._context().registry, self.hub.publish
            send = functools.partial(
                with_memory,
                request,
                memo=self.turn_memory,
                turn_id=effect.turn_id,
                registry=registry,
                options=memory,
                session_id=self.session_id,
                publish=publish,
            )
        elif memory.provider and effect.token.step == "compress":
            registry, publish = self._context().registry, self.hub.publish
            send = functools.partial(
                with_pre_compress, request, turn_id=effect.turn_id, registry=registry, options=memory, session_id=self.session_id, publish=publish
            )
        hooks = self.deps.hooks
        if hooks is not None and effect.token.step == "model":
            where: dict[str, Any] = {
                "session_id": self.session_id,
                "turn_id": effect.turn_id,
                "model": model,
                "platform": self.deps.source,
                "publish": self.hub.publish,
            }
            hooked = functools.partial(hooked_model, hooks, send, effect.messages, self.turn_hooks, **where)
            return self.start_wait(hooked, tag="model", timeout=effect.timeout)
        return self.start_wait(send, effect.messages, tag="model", timeout=effect.timeout)

    def start_tool(self, effect: RunTool, turn_id: str) -> WaitHandle:
        deps = self.deps
        context = ToolContext(
            session_id=self.session_id,
            turn_id=turn_id,
            call_id=effect.call_id,
            home=deps.home,
            workspace=self.workspace,
            publish=self.hub.publish,
            store_file=deps.store_file,
            delegation=self.delegation if self.delegation.allowed else None,
            tools=deps.tools,
            settings=deps.tool_settings,
            hooks=deps.hooks,
            auxiliary=auxiliary_model(deps.clients, self.settings(), self.session_id, summary_model=deps.config.summary_model),
            registry=self._context().registry,
        )
        run = deps.tools[effect.name].run
        if deps.hooks is not None:
            return self.start_wait(hooked_tool, deps.hooks, run, effect.name, effect.arguments, context, tag="tool", timeout=effect.timeout)
        return self.start_wait(run, effect.arguments, context, tag="tool", timeout=effect.timeout)

    def after(self, delay: float, message: Timer) -> WaitHandle:
        return self.send_after(delay, message)

    def cancel(self, handle: WaitHandle) -> None:
        self.cancel_wait(handle)

    def publish(self, event: SessionEvent) -> None:
        model = self.settings()
        if type(event) is TurnCompleted and model.prices:
            event = msgspec.structs.replace(
                event, cost_usd=model.cost(event.input_tokens, event.output_tokens, event.cache_read_tokens, event.cache_write_tokens)
            )
        self.hub.publish(event)
        if self.deps.hooks is not None and type(event) in (TurnStarted, TurnCompleted, TurnFailed, TurnCancelled):
            self.turn_hook(event)
        if self.deps.nudges.enabled and self.deps.source != "cron":
            self.count_for_nudges(event)
        if self.deps.memory.provider and type(event) is TurnStarted:
            started = {"session_id": self.session_id, "model": self.host.model, "platform": self.deps.source, "tool_count": len(self.deps.tools)}
            tell_providers(self._context().registry, self.deps.memory, ProviderNotice(op="turn_start", arguments=started))
        if self.deps.memory.provider and type(event) is TurnCompleted and event.text and self.host.state is not None:
            user = next((m.content or "" for m in reversed(self.host.state.transcript) if m.role == "user"), "")
            sync = ProviderNotice(op="sync_turn", arguments={"session_id": self.session_id, "user": user, "answer": event.text})
            tell_providers(self._context().registry, self.deps.memory, sync)

    # -- nudges and background review (decisions in ``_nudges``; the review runs as a wait) -------

    def count_for_nudges(self, event: SessionEvent) -> None:
        if isinstance(event, TurnStarted):
            self.turn_facts[event.turn_id] = (bool(event.text) and not event.text.startswith("/compress"), set())
        elif isinstance(event, ToolStarted) and event.turn_id in self.turn_facts:
            self.turn_facts[event.turn_id][1].add(event.name)
        elif isinstance(event, TERMINAL_EVENTS) and event.turn_id in self.turn_facts and self.host.state is not None:
            user_turn, used = self.turn_facts.pop(event.turn_id)
            transcript = self.host.state.transcript
            answered = isinstance(event, TurnCompleted) and bool(event.text) and not event.tool_calls
            iterations = event.iterations if isinstance(event, TurnCompleted) else 0
            facts = TurnFacts(user_turn=user_turn, iterations=iterations, tools_used=frozenset(used), answered=answered)
            if self.nudge_counters is None:
                earlier = sum(1 for m in transcript if m.role == "user") - (1 if user_turn else 0)
                self.nudge_counters = seeded(max(0, earlier), self.deps.nudges)
            self.nudge_counters, due = plan_after_turn(self.nudge_counters, facts, self.deps.nudges, self.deps.tools.keys())
            plan = admit_review(due, len(self.reviews))
            if plan is None:
                return
            nudges, context = self.deps.nudges, self._context()
            review_id = f"{self.session_id}.review-{self.nudge_counters.user_turns}"
            review = functools.partial(run_review, iterations=nudges.review_iterations, timeout=nudges.review_timeout)
            args = (context.registry, context.reactor, self.deps.hubs, review_id, self.session_id, plan, plan.tools(self.deps.tools.keys()), transcript)
            self.reviews[self.start_wait(review, *args, tag="review", timeout=nudges.review_timeout + 30.0).wait_id] = (event.turn_id, review_id, plan.kind)

    def reviewed(self, finished: WaitFinished) -> None:
        turn_id, review_id, kind = self.reviews.pop(finished.wait_id, ("", "", ""))
        outcome = finished.value if finished.status == "ok" and isinstance(finished.value, ReviewOutcome) else None
        if outcome is None:
            why = f"the background review ended without an answer ({finished.status}: {finished.error or 'no detail'})"
            outcome = ReviewOutcome(ok=False, saved=(), summary=why)
        self.publish(ReviewFinished(turn_id=turn_id, review_session_id=review_id, kind=kind, saved=outcome.saved, summary=outcome.summary, ok=outcome.ok))

    # -- hooks that observe (answers ignored; they run in the background) -------------------------

    def turn_hook(self, event: SessionEvent) -> None:
        hooks, sid, platform, model = self.deps.hooks, self.session_id, self.deps.source, self.host.model
        assert hooks is not None
        if isinstance(event, TurnStarted):
            hooks.fire_soon(
                "agent:start", {"platform": platform, "user_id": "", "session_id": sid, "message": event.text}, session_id=sid, publish=self.hub.publish
            )
            return
        completed = isinstance(event, TurnCompleted)
        ended = {"session_id": sid, "completed": completed, "interrupted": isinstance(event, TurnCancelled), "model": model, "platform": platform}
        hooks.fire_soon("on_session_end", ended, session_id=sid, publish=self.hub.publish)
        if isinstance(event, TurnCompleted) and event.text:
            transcript = self.host.state.transcript if self.host.state is not None else ()
            user = next((m.content or "" for m in reversed(transcript) if m.role == "user"), "")
            history = [m.to_openai() for m in transcript] if hooks.wants("post_llm_call") else []
            answered = {
                "session_id": sid,
                "user_message": user,
                "assistant_response": event.text,
                "conversation_history": history,
                "model": model,
                "platform": platform,
            }
            hooks.fire_soon("post_llm_call", answered, session_id=sid, publish=self.hub.publish)
            hooks.fire_soon(
                "agent:end",
                {"platform": platform, "user_id": "", "session_id": sid, "message": user, "response": event.text},
                session_id=sid,
                publish=self.hub.publish,
            )

    def command_hook(self, message: SwitchModel | UndoTurn | CompressContext) -> None:
        assert self.deps.hooks is not None
        name, args = {
            SwitchModel: ("model", getattr(message, "model", "")),
            UndoTurn: ("undo", ""),
            CompressContext: ("compress", getattr(message, "focus", "")),
        }[type(message)]
        context = {"platform": self.deps.source, "user_id": "", "session_id": self.session_id, "command": name, "args": args}
        self.deps.hooks.fire_soon(f"command:{name}", context, session_id=self.session_id, publish=self.hub.publish)

    def reload(self, why: str) -> None:
        raise StoreDiverged(f"session {self.session_id}: {why}; reloading from the store")

    def passivate(self) -> None:
        log.info("session %s idle: passivating", self.session_id)
        self.stop()

    def idle(self, generation: int, state: SessionState) -> None:
        if self.deps.idle_timeout > 0:
            self.send_after(self.deps.idle_timeout, IdleTimer(generation=generation))
