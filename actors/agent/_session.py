"""The session actor: one per conversation; the session interpreter's port onto the kernel.

Decisions are in the pure cores (``_machine``, ``_session_core``), every line that is not
I/O in ``_session_host.SessionHost``, which the simulator runs too. Here: store writes go
to the store writer; model calls, tools, loads and timers are reactor waits; events go to
the hub. It never waits. One actor per session id (``session_address`` reserves it).
Beside the port, each concept has its own module: the cluster lease (``_session_ownership``),
the model and tool waits (``_session_calls``), what publishing an event also does (hooks,
nudges and reviews, memory providers: ``_session_events``).
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
import uuid
from typing import Any

from actors import Actor, HermesError, WaitHandle
from actors.store import store_address
from protocols import KeyLeased, LeaseKey, ReportKey, WaitFinished
from protocols._session import AnswerClarification, RefreshSettings, ResolveApproval, SessionEvent, SessionInbox, Subscribe, Unsubscribe
from protocols._store import ReopenWrites, StoreStatistics

from ._approvals import ApprovalGate
from ._clarify import Clarifier
from ._delegation import Delegation, SessionOverrides
from ._deps_table import DepsTable, deps_for
from ._loading import as_loaded, build_system_prompt
from ._machine import CallModel, RunTool, SessionState
from ._providers import Providers
from ._session_calls import SessionCalls
from ._session_core import Loaded, for_next_incarnation, told_once
from ._session_deps import SessionDeps, child_deps
from ._session_events import SessionEvents
from ._session_events_core import HOOKED_COMMANDS
from ._session_host import SessionHost
from ._session_ownership import SessionOwnership, start_load
from ._session_port import HostConfig, StoreDiverged, Write
from ._session_timers import IdleTimer, Timer
from ._tools import Workspace

log = logging.getLogger(__name__)


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
        surface = "cli" if deps.source == "cli" else "gateway"
        gate = ApprovalGate(self.hub.publish, home=deps.home, settings=deps.approvals, hooks=deps.hooks, session_id=session_id, surface=surface)
        self.workspace = Workspace(deps.workdir, gate, Clarifier(self.hub))
        parent = overrides.parent_session_id if overrides is not None else None
        self.host = SessionHost(HostConfig.of(deps, session_id, parent), self)
        self.ownership = SessionOwnership(self)
        self.calls = SessionCalls(self)
        self.events = SessionEvents(self)

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
        self.ownership.start()  # cluster mode: own the session before reading it; the grant (after its commit) starts the load

    def receive(self, message: SessionInbox | Timer) -> Any:
        if for_next_incarnation(self.host.alive, message):
            # This incarnation passivates (or reloads): it takes no new work. Told again, the
            # command lands behind its stop and the next incarnation takes it (the address hands
            # an exited incarnation's unread messages on; a passivated session holding messages
            # is started again).
            self._context().address.tell(message)
            return None
        if self.deps.hooks is not None and isinstance(message, HOOKED_COMMANDS):
            self.events.command(message)
        match message:
            case _ if self.ownership.receive(message):
                pass
            case Subscribe(subscriber=subscriber, after_seq=after_seq, observer=observer):
                return self.hub.subscribe(subscriber, after_seq=after_seq, observer=observer)
            case Unsubscribe(subscriber=subscriber):
                self.hub.unsubscribe(subscriber)
            case StoreStatistics() if self.host.state is None:
                start_load(self)
            case WaitFinished(tag="load"):
                self.host.receive(self.loaded(message))
            case WaitFinished(tag="review"):
                self.events.reviewed(message)
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
        interrupted = told_once(self.deps.interrupted.get(self.session_id), self.open_turns.seen)
        prompt = functools.partial(build_system_prompt, self.deps.model.model, self.deps.platform_hint, datetime.date.today())
        return as_loaded(finished.value, prompt, interrupted)

    def terminated(self, kind: str) -> None:
        self.events.session_ended()
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
        self.ownership.release()  # after those writes: the writer answers in order

    @property
    def registry(self) -> Any:
        """The runtime's registry of addresses (memory providers, child sessions, tools)."""
        return self._context().registry

    # -- the port ---------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def new_turn_id(self) -> str:
        return f"turn_{uuid.uuid4().hex[:12]}"

    def tell_store(self, command: Write) -> None:
        self.store.tell(self.ownership.fenced(command))

    def reopen_writes(self) -> None:
        self.store.tell(ReopenWrites(session_id=self.session_id))

    def lease(self, provider: str, request: LeaseKey) -> None:
        self.providers.lease(provider, request, self.address)

    def report(self, provider: str, outcome: ReportKey) -> None:
        self.providers.report(provider, outcome)

    def start_model(self, effect: CallModel, model: str, key: KeyLeased) -> WaitHandle:
        return self.calls.start_model(effect, model, key)

    def start_tool(self, effect: RunTool, turn_id: str) -> WaitHandle:
        return self.calls.start_tool(effect, turn_id)

    def after(self, delay: float, message: Timer) -> WaitHandle:
        return self.send_after(delay, message)

    def cancel(self, handle: WaitHandle) -> None:
        self.cancel_wait(handle)

    def publish(self, event: SessionEvent) -> None:
        self.events.publish(event)

    def reload(self, why: str) -> None:
        raise StoreDiverged(f"session {self.session_id}: {why}; reloading from the store")

    def passivate(self) -> None:
        log.info("session %s idle: passivating", self.session_id)
        self.stop()

    def idle(self, generation: int, state: SessionState) -> None:
        if self.deps.idle_timeout > 0:
            self.send_after(self.deps.idle_timeout, IdleTimer(generation=generation))
