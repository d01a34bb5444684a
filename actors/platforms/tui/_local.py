"""The local session handle: the agent runtime (store + sessions) in this process.

Built the way ``hermes serve`` builds its runtime, without the API server: the store
writer and the sessions' dynamic supervisor under one root, the ``hermes-cli`` toolset
(clarify included), sessions tagged ``source="cli"``. Commands are told to the session's
address; events come from the session's hub through a subscriber whose ``tell`` hands
them to the UI's sink (thread-safe, never blocking the hub).

This module imports the model SDK and the tools: the UI imports it in a worker thread,
after the prompt is up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import queue
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors import DeliveryError, HermesError, claim_group_ledger, use_group_ledger
from actors.agent import (
    SESSIONS_PATH,
    ConfigError,
    SessionDeps,
    SessionHub,
    build_agent_runtime,
    tell_session,
)
from actors.credentials._report import pool_lines
from actors.store import STORE_PATH, HermesImportError, StoreError, StoreReader
from actors.store._owner import StoreServedByWorkers
from protocols import (
    AnswerClarification,
    ApprovalChoice,
    CancelTurn,
    ChatMessage,
    CompressContext,
    EnsureSession,
    GetStoreStatistics,
    PoolStatus,
    PoolStatusRequest,
    ResolveApproval,
    SessionCommand,
    SessionEvent,
    SessionRecord,
    StartTurn,
    SwitchModel,
    TreeSnapshot,
    UndoTurn,
)
from supervisor import ChildSpec, Runtime

from ._handle import EventSink, RequestRefused, SetupFailed

if TYPE_CHECKING:
    from actors.platforms._reload import Running

PLATFORM_HINT = "You are talking with a person in a terminal; format replies as Markdown (it is rendered)."
STOP_TIMEOUT = 30.0
FLUSH_TIMEOUT = 5.0
REPLY_TIMEOUT = 10.0

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Configured:
    """Where a local runtime's settings came from, for ``/reload``."""

    home: Path
    env: Mapping[str, str]
    settings: Running


class _Ignore:
    """A reply address for answers nobody waits for."""

    def tell(self, message: Any) -> None:
        pass


class _Reply:
    """A reply address a coroutine can wait on (answers arrive on actor threads)."""

    def __init__(self) -> None:
        self.answers: queue.Queue[Any] = queue.Queue()

    def tell(self, message: Any) -> None:
        self.answers.put(message)


class _Subscriber:
    """What the hub tells; forwards session events to the sink."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    def tell(self, message: Any) -> None:
        if isinstance(message, SessionEvent):
            self.sink(message)


class _LocalAttachment:
    def __init__(self, hub: SessionHub, subscriber: _Subscriber) -> None:
        self._hub = hub
        self._subscriber = subscriber

    def close(self) -> None:
        self._hub.unsubscribe(self._subscriber)


class LocalSession:
    """Sessions of an agent runtime running in this process."""

    def __init__(self, runtime: Runtime, deps: SessionDeps, store_file: str | Path, *, owned: bool = True, running: Configured | None = None) -> None:
        """Wrap a started runtime built with ``deps``; ``owned`` runtimes are stopped by :meth:`aclose`;
        ``running``: what config.yaml made of it (what ``/reload`` starts from)."""
        self.runtime = runtime
        self.running = running
        self.deps = deps
        self.store_file = store_file
        self._owned = owned
        self._attachments: list[_LocalAttachment] = []

    @classmethod
    def start(cls, deps: SessionDeps, store_file: str | Path, running: Configured | None = None, extra: Sequence[ChildSpec] = ()) -> LocalSession:
        """Start a runtime holding the store (``store_file``), the sessions built from ``deps`` and ``extra`` children."""
        if deps.store_file is None:
            deps = dataclasses.replace(deps, store_file=store_file)
        runtime = build_agent_runtime(store_file, deps, extra=extra)
        runtime.start()
        return cls(runtime, deps, store_file, running=running)

    @property
    def label(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self.deps.model.model

    async def open(self) -> None:
        if self.runtime.failed:
            msg = f"the local runtime stopped: {self.runtime.exit_reason}"
            raise RequestRefused(msg)

    async def attach(self, session_id: str, sink: EventSink, *, after_seq: int | None = None, observer: bool = False) -> _LocalAttachment:
        # The hub outlives session actors: subscribing to it does not start (or create) the
        # session, and the subscription survives the session's restarts and passivation.
        hub = self.deps.hubs.get(session_id)
        subscriber = _Subscriber(sink)
        hub.subscribe(subscriber, after_seq=hub.last_seq if after_seq is None else after_seq, observer=observer)
        attachment = _LocalAttachment(hub, subscriber)
        self._attachments.append(attachment)
        return attachment

    def _tell(self, session_id: str, message: SessionCommand) -> None:
        try:
            tell_session(self.runtime.registry, self.runtime.lookup(SESSIONS_PATH), session_id, message)
        except DeliveryError as exc:
            msg = f"session {session_id} cannot be reached ({exc}); the runtime may be stopping, restart hermes chat"
            raise RequestRefused(msg) from None

    async def start_turn(self, session_id: str, text: str, *, title: str | None = None) -> str:
        turn_id = f"turn_{uuid.uuid4().hex[:12]}"
        if title:
            self._tell(session_id, EnsureSession(title=title, reply_to=_Ignore()))
        self._tell(session_id, StartTurn(text=text, turn_id=turn_id))
        return turn_id

    async def compress(self, session_id: str, focus: str) -> str:
        turn_id = f"turn_{uuid.uuid4().hex[:12]}"
        self._tell(session_id, CompressContext(focus=focus, turn_id=turn_id))
        return turn_id

    async def cancel_turn(self, session_id: str) -> None:
        self._tell(session_id, CancelTurn(reason="cancelled from the terminal"))

    async def resolve_approval(self, session_id: str, request_id: str, choice: ApprovalChoice) -> None:
        self._tell(session_id, ResolveApproval(request_id=request_id, choice=choice))

    async def answer_clarification(self, session_id: str, request_id: str, answer: str) -> None:
        self._tell(session_id, AnswerClarification(request_id=request_id, answer=answer))

    async def _ask(self, session_id: str, make: Callable[[_Reply], Any]) -> Any:
        reply = _Reply()
        self._tell(session_id, make(reply))
        try:
            return await asyncio.to_thread(reply.answers.get, timeout=REPLY_TIMEOUT)
        except queue.Empty:
            msg = f"session {session_id} did not answer within {REPLY_TIMEOUT:g} s; try again"
            raise RequestRefused(msg) from None

    async def undo(self, session_id: str) -> tuple[int, str | None]:
        undone = await self._ask(session_id, lambda reply: UndoTurn(reply_to=reply))
        if undone.error:
            raise RequestRefused(undone.error)
        return undone.removed, undone.text

    async def switch_model(self, session_id: str, model: str) -> None:
        switched = await self._ask(session_id, lambda reply: SwitchModel(model=model, reply_to=reply))
        if switched.error:
            raise RequestRefused(f"the model was not switched: {switched.error}")

    def _read(self, work: Any) -> Any:
        if isinstance(self.store_file, Path) and not self.store_file.exists():
            return None  # the writer creates the file: nothing was saved yet
        try:
            with StoreReader(self.store_file) as reader:
                return work(reader)
        except StoreError as exc:
            msg = f"the session store {self.store_file} cannot be read: {exc}"
            raise RequestRefused(msg) from None

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        found = await asyncio.to_thread(self._read, lambda r: r.list_sessions(limit=limit))
        return list(found or [])

    async def get_session(self, session_id: str) -> SessionRecord | None:
        found = await asyncio.to_thread(self._read, lambda r: r.get_session(session_id))
        return found if isinstance(found, SessionRecord) else None

    async def transcript(self, session_id: str) -> list[ChatMessage]:
        found = await asyncio.to_thread(self._read, lambda r: r.load_messages(session_id))
        return list(found or [])

    async def tree(self) -> str:
        from actors.cli import render_tree

        snapshot = self.runtime.snapshot()
        pools = await asyncio.to_thread(_pool_statuses, self.runtime, snapshot)
        return "\n".join([render_tree(snapshot), *pool_lines(pools, time.time())])

    async def tools(self) -> list[str] | None:
        return sorted(self.deps.tools)

    async def jobs(self) -> list[str] | None:
        return None  # jobs run under 'hermes serve', whose store this runtime only reads

    async def reset_session(self, old_session_id: str, new_session_id: str) -> None:
        hooks = self.deps.hooks
        if hooks is None:
            return
        platform = self.deps.source
        old_hub, new_hub = self.deps.hubs.get(old_session_id), self.deps.hubs.get(new_session_id)
        reset = {"platform": platform, "user_id": "", "session_id": new_session_id, "session_key": new_session_id}
        hooks.fire_soon_in_order(
            [
                ("on_session_finalize", {"session_id": old_session_id, "platform": platform}, {"session_id": old_session_id, "publish": old_hub.publish}),
                ("on_session_reset", {"session_id": new_session_id, "platform": platform}, {"session_id": new_session_id, "publish": new_hub.publish}),
                ("session:reset", reset, {"session_id": new_session_id, "publish": new_hub.publish}),
            ]
        )

    async def reload(self) -> list[str]:
        from actors.platforms._reload import reloaded

        if self.running is None:
            raise RequestRefused("this runtime was not started from a config.yaml; there is nothing to reload")
        running = self.running
        settings, lines = await asyncio.to_thread(reloaded, running.home, running.env, running.settings, self.runtime)
        self.running = dataclasses.replace(running, settings=settings)
        self.deps = settings.deps
        return lines

    def close(self) -> bool:
        """Detach and stop the runtime (if this handle started it); True if it stopped in time."""
        for attachment in self._attachments:
            attachment.close()
        self._attachments.clear()
        if not self._owned or self.runtime.wait(0):
            return True
        try:
            # Barrier: the writer answers in order, so the acknowledgements of writes still in
            # flight reach their (still running) sessions before the tree stops.
            self.runtime.lookup(STORE_PATH).ask(GetStoreStatistics(), timeout=FLUSH_TIMEOUT)
        except (HermesError, TimeoutError) as exc:
            log.warning("the store did not answer before the shutdown: %s", exc)
        stopped = self.runtime.stop(timeout=STOP_TIMEOUT, reason="hermes chat ended")
        use_group_ledger(None)  # this process starts no more commands for the home
        return stopped

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def hermes_home(env: Mapping[str, str]) -> Path:
    """HERMES_HOME, as ``actors.agent.hermes_home`` resolves it."""
    from actors.agent import hermes_home as resolve

    return resolve(env)


def open_local_session(home: Path | None = None, *, env: Mapping[str, str] | None = None, yolo: bool = False) -> LocalSession:
    """Read the configuration under ``home`` and start the runtime; :class:`SetupFailed` says what is missing."""
    from actors.config import load_config
    from actors.hooks import build_hooks, hooks_spec
    from actors.platforms._reload import Running
    from actors.platforms._runtime_deps import Platform, configured_deps

    env = dict(os.environ if env is None else env)
    home = home or hermes_home(env)
    platform = Platform(name="cli", source="cli", hint=PLATFORM_HINT)
    try:
        loaded = load_config(home, env)
        # No consent prompt inside the TUI: a shell hook not yet allowed stays unregistered (logged).
        hooks, hook_lines = build_hooks(home, loaded.config.hooks, env=env, auto_accept=loaded.config.hooks_auto_accept, tty=False)
        deps = configured_deps(home, env, loaded, platform, yolo=yolo, hooks=hooks)
    except ConfigError as exc:
        raise SetupFailed(str(exc)) from None
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"HERMES_HOME {home} cannot be created ({exc}); set HERMES_HOME to a writable directory"
        raise SetupFailed(msg) from None
    store = deps.store_file or home / "state.db"  # HERMES_DATABASE_URL / database.url: Postgres
    claim_group_ledger(home / "run" / "groups")  # what a killed hermes left running is stopped (logged)
    mcp = None
    if any(server.enabled for server in loaded.config.mcp_servers.values()):
        from actors.platforms._serve_mcp import with_mcp  # the mcp SDK loads only where servers are configured

        deps, mcp = with_mcp(deps, loaded.config.mcp_servers)
    for line in hook_lines:
        log.warning("hooks: %s", line)
    configured = Configured(home=home, env=env, settings=Running(loaded=loaded, deps=deps, platform=platform, yolo=yolo))
    extra = (*((hooks_spec(),) if hooks is not None else ()), *((mcp.tree,) if mcp is not None else ()))
    try:
        session = LocalSession.start(deps, store, configured, extra)
    except (HermesImportError, StoreServedByWorkers) as exc:  # a Hermes state.db that could not be imported (left as it was); a --workers server
        raise SetupFailed(str(exc)) from None
    if hooks is not None:
        hooks.bind(session.runtime.registry, session.runtime.reactor)
    if mcp is not None:  # the first turn sees the servers' tools (each up, or failed once)
        mcp.wait_started()
    return session


def _pool_statuses(runtime: Runtime, snapshot: TreeSnapshot) -> list[PoolStatus]:
    """Ask each credential pool for its status (a second each at most; a silent one is left out)."""
    credentials = next((n for n in snapshot.root.children if n.path == "/credentials"), None)
    statuses = []
    for node in credentials.children if credentials is not None else ():
        try:
            status = runtime.lookup(node.path).ask(PoolStatusRequest(), timeout=1.0)
        except (HermesError, LookupError, TimeoutError):
            continue
        if isinstance(status, PoolStatus):
            statuses.append(status)
    return statuses
