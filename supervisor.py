"""Erlang/OTP supervision on top of pykka: child specs, strategies, intensity, the runtime.

A :class:`Supervisor` is an actor whose children are described by :class:`ChildSpec`
(id, start factory, restart type, shutdown timeout). When a child exits it decides, by
restart type, whether to restart it, and by strategy which siblings go with it:

- ``one_for_one``: only the child that exited;
- ``one_for_all``: every child (the others are stopped in reverse order first);
- ``rest_for_one``: the child and every child started after it.

More than ``Intensity.max_restarts`` restarts within ``Intensity.within`` seconds make the
supervisor give up: it stops its children in reverse start order and crashes with
:class:`Escalation`, which its own supervisor handles like any other child failure. The
root giving up ends the :class:`Runtime` with a clear reason.

A :class:`DynamicSupervisor` has many children of one template spec, started on demand
(sessions); :func:`start_child` reserves the child's address atomically, so two actors for
one id are impossible.

Invariant: no supervisor handler waits. Stops are asked for, their exits arrive as
``ChildExited`` messages, and shutdown timeouts are reactor timers.
Invariant: this module and ``actors``' kernel import nothing from ``actors.agent``,
``actors.tools``, ``actors.platforms`` or ``actors.memory``.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pykka

from actors import Actor, Address, HermesError, Reactor, ReactorStopped, Registry, RuntimeStopped, UsageError
from actors._actor import ActorContext, starting
from protocols import (
    ChildExited,
    ChildRestarted,
    ChildStarted,
    Escalated,
    Message,
    NodeSnapshot,
    NodeState,
    RestartDue,
    Shutdown,
    ShutdownTimedOut,
    StartChild,
    TerminateChild,
    TreeSnapshot,
)

log = logging.getLogger(__name__)

WORKER_SHUTDOWN = 5.0
SUPERVISOR_SHUTDOWN = 60.0


class Restart(enum.StrEnum):
    """When a child that exited is started again."""

    PERMANENT = "permanent"
    """Always."""
    TRANSIENT = "transient"
    """Only after an abnormal exit (crash, failed start)."""
    TEMPORARY = "temporary"
    """Never; the child is forgotten when it exits."""


class Strategy(enum.StrEnum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


@dataclasses.dataclass(frozen=True, slots=True)
class Intensity:
    """At most ``max_restarts`` restarts within ``within`` seconds, or the supervisor gives up.

    OTP defaults to 1 in 5 s; we allow 3 because an agent child (a tool, a provider pool)
    meets transient faults more often than an OTP worker, and escalation restarts siblings.
    """

    max_restarts: int = 3
    within: float = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before restart number n (counted within the intensity window): initial * factor**(n-1)."""

    initial: float = 0.01
    factor: float = 2.0
    maximum: float = 5.0

    def delay(self, attempt: int) -> float:
        return min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))


@dataclasses.dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start one child: ``actor.start(*args, **kwargs)`` under ``id``."""

    id: str
    actor: type[Actor]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    restart: Restart = Restart.PERMANENT
    shutdown: float | None = None
    """Seconds an orderly stop may take before the child is abandoned. Default: 5 s for a
    worker, 60 s for a supervisor (it stops its own children first)."""

    def __post_init__(self) -> None:
        _check_child_id(self.id)
        if not (isinstance(self.actor, type) and issubclass(self.actor, Actor)):
            msg = f"child {self.id!r}: actor must be a subclass of actors.Actor, got {self.actor!r}"
            raise UsageError(msg)
        if self.shutdown is not None and self.shutdown < 0:
            msg = f"child {self.id!r}: shutdown must be >= 0 seconds, got {self.shutdown}"
            raise UsageError(msg)

    @property
    def kind(self) -> str:
        return "supervisor" if issubclass(self.actor, Supervisor) else "worker"

    @property
    def shutdown_timeout(self) -> float:
        if self.shutdown is not None:
            return self.shutdown
        return SUPERVISOR_SHUTDOWN if self.kind == "supervisor" else WORKER_SHUTDOWN


def supervisor_spec(
    id: str,  # noqa: A002 - OTP's word
    children: Sequence[ChildSpec],
    *,
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    intensity: Intensity = Intensity(),
    backoff: Backoff | None = None,
    shutdown: float | None = None,
) -> ChildSpec:
    """A child spec for a nested supervisor."""
    return ChildSpec(
        id=id,
        actor=Supervisor,
        args=(tuple(children),),
        kwargs={"strategy": strategy, "intensity": intensity, "backoff": backoff},
        shutdown=shutdown,
    )


def _check_child_id(child_id: str) -> None:
    if not child_id or "/" in child_id or len(child_id) > 256 or not child_id.isprintable():
        msg = f"child id {child_id!r} is invalid: use 1-256 printable characters without '/'"
        raise UsageError(msg)


def _check_unique(children: Sequence[ChildSpec]) -> None:
    ids = [spec.id for spec in children]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        msg = f"child ids must be unique under one supervisor; repeated: {', '.join(duplicates)}"
        raise UsageError(msg)


def _join(parent: str, child_id: str) -> str:
    return f"{parent.rstrip('/')}/{child_id}"


def _reserve_tree(registry: Registry, path: str, children: Sequence[ChildSpec]) -> None:
    """Reserve the addresses of a static tree up front, so every path resolves at once.

    Children start asynchronously; their addresses buffer until each incarnation is up.
    """
    for spec in children:
        child_path = _join(path, spec.id)
        registry.reserve(child_path, kind=spec.kind)
        if issubclass(spec.actor, Supervisor) and not issubclass(spec.actor, DynamicSupervisor):
            nested = spec.kwargs.get("children", spec.args[0] if spec.args else ())
            _reserve_tree(registry, child_path, nested)


class Escalation(HermesError):
    """A supervisor exceeded its restart intensity and gave up; its parent decides next."""


class _Child:
    __slots__ = ("address", "incarnation", "ref", "restart_timer", "spec", "status", "stop_timer")

    def __init__(self, spec: ChildSpec, address: Address[Any]) -> None:
        self.spec = spec
        self.address = address
        self.incarnation = 0
        self.ref: pykka.ActorRef[Any] | None = None
        self.status: NodeState = "starting"
        self.stop_timer: Any = None
        self.restart_timer: Any = None


class Supervisor(Actor):
    """Supervises a fixed, ordered list of children."""

    dynamic = False
    parallel_stop = False

    def __init__(
        self,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: Intensity = Intensity(),
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__()
        _check_unique(children)
        self._specs = tuple(children)
        self._strategy = Strategy(strategy)
        self._intensity = intensity
        self._backoff = backoff
        self._children: dict[str, _Child] = {}
        self._restart_times: collections.deque[float] = collections.deque()
        self._stop_queue: collections.deque[str] = collections.deque()
        self._in_flight: set[str] = set()
        self._after_stops: Callable[[], None] | None = None
        self._backlog: list[ChildExited] = []
        self._shutting_down = False

    # -- lifecycle ---------------------------------------------------------------------

    def started(self) -> None:
        for spec in self._specs:
            self._start(self._add(spec))

    def receive(self, message: Any) -> Any:
        match message:
            case ChildExited():
                self._on_exit(message)
            case ShutdownTimedOut(child_id=child_id, incarnation=incarnation):
                self._on_stop_timeout(child_id, incarnation)
            case RestartDue(child_id=child_id):
                child = self._children.get(child_id)
                if child is not None and child.status == "restarting" and not self._shutting_down:
                    child.restart_timer = None
                    self._start(child)
            case Shutdown(reason=reason):
                self._shutdown(reason)
            case TerminateChild(child_id=child_id):
                self._terminate(child_id)
            case StartChild(child_id=child_id):
                # Misuse by a caller is not a reason to restart this whole subtree.
                log.error("%s has a fixed child list; StartChild(%s) needs a DynamicSupervisor", self.path, child_id)
            case _:
                super().receive(message)

    def terminated(self, kind: str) -> None:
        # Children never outlive their supervisor. An orderly shutdown has stopped them
        # already; after a crash we stop them here, in our own (dying) thread.
        for child in reversed(list(self._children.values())):
            ref = child.ref
            if ref is None or not ref.is_alive():
                continue
            _request_stop(child, "supervisor exited")
            ref.actor_stopped.wait(child.spec.shutdown_timeout)
        if self.dynamic and self.context is not None:
            # Dynamic children are not re-created by a new incarnation: close their addresses.
            for child in self._children.values():
                self.context.registry.remove(child.address.path)

    # -- starting ----------------------------------------------------------------------------

    def _add(self, spec: ChildSpec) -> _Child:
        assert self.context is not None
        address, _ = self.context.registry.reserve(_join(self.path, spec.id), kind=spec.kind)
        child = self._children[spec.id] = _Child(spec, address)
        return child

    def _start(self, child: _Child) -> None:
        assert self.context is not None
        # Incarnations count per path, across restarts of this supervisor too.
        child.address.starts += 1
        child.incarnation = child.address.starts
        context = ActorContext(
            path=child.address.path,
            child_id=child.spec.id,
            incarnation=child.incarnation,
            address=child.address,
            reactor=self.context.reactor,
            registry=self.context.registry,
            parent=self.actor_ref,
            publish=self.context.publish,
        )
        child.status = "running"
        child.address.phase = None
        if child.incarnation > 1:
            self._publish(
                ChildRestarted(path=context.path, incarnation=child.incarnation, restarts=child.incarnation - 1)
            )
        else:
            self._publish(ChildStarted(path=context.path, incarnation=child.incarnation))
        try:
            with starting(context):
                child.ref = child.spec.actor.start(*child.spec.args, **child.spec.kwargs)
        except Exception as exc:  # the constructor raised, in our thread
            log.error("%s could not be constructed: %s: %s", context.path, type(exc).__name__, exc)
            self.actor_ref.tell(
                ChildExited(
                    path=context.path,
                    child_id=child.spec.id,
                    incarnation=child.incarnation,
                    kind="start_failed",
                    error=f"{type(exc).__name__}: {exc}",
                )
            )

    # -- exits --------------------------------------------------------------------------------

    def _publish(self, event: Message) -> None:
        if self.context is not None and self.context.publish is not None:
            self.context.publish(event)

    def _on_exit(self, event: ChildExited) -> None:
        self._handle_child_exit(event)
        self._publish(event)

    def _handle_child_exit(self, event: ChildExited) -> None:
        child = self._children.get(event.child_id)
        if child is None or child.incarnation != event.incarnation or child.status == "abandoned":
            return  # a stale report from an incarnation already dealt with
        child.ref = None
        if child.status == "stopping":
            self._stopped(child)
            return
        if event.child_id in self._stop_queue:
            self._stop_queue.remove(event.child_id)
            child.status = "stopped"
            return
        if self._after_stops is not None or self._shutting_down:
            if not self._shutting_down:
                self._backlog.append(event)
            else:
                child.status = "stopped"
            return
        self._handle_exit(child, event)

    def _handle_exit(self, child: _Child, event: ChildExited) -> None:
        restart = child.spec.restart
        wanted = restart is Restart.PERMANENT or (restart is Restart.TRANSIENT and event.kind != "normal")
        if not wanted and restart is Restart.TRANSIENT and child.address.statistics().mailbox > 0:
            # It stopped (e.g. passivated when idle) while messages were on their way:
            # never close an address that holds messages; start it again to deliver them.
            wanted = True
        if event.kind != "normal":
            log.warning("%s exited (%s): %s", child.address.path, event.kind, event.error or "-")
        if not wanted:
            self._forget(child)
            return
        if not self._note_restart():
            intensity = self._intensity
            reason = (
                f"{child.address.path} failed {intensity.max_restarts + 1} times within "
                f"{intensity.within:g} s (last: {event.kind}{': ' + event.error if event.error else ''}); "
                f"{self.path} gave up"
            )
            self._escalate(reason)
            return
        ids = list(self._children)
        if self._strategy is Strategy.ONE_FOR_ONE:
            group = [child.spec.id]
        elif self._strategy is Strategy.ONE_FOR_ALL:
            group = ids
        else:
            group = ids[ids.index(child.spec.id) :]
        child.status = "restarting"
        others = [i for i in reversed(group) if i != child.spec.id]
        self._stop_then(others, lambda: self._restart(group))

    def _note_restart(self) -> bool:
        now = time.monotonic()
        times = self._restart_times
        times.append(now)
        while times and now - times[0] > self._intensity.within:
            times.popleft()
        return len(times) <= self._intensity.max_restarts

    def _restart(self, group: Sequence[str]) -> None:
        delay = self._backoff.delay(len(self._restart_times)) if self._backoff else 0.0
        for child_id in group:
            child = self._children.get(child_id)
            if child is None:
                continue
            if child.spec.restart is Restart.TEMPORARY and child.status == "stopped":
                self._forget(child)
                continue
            child.status = "restarting"
            if delay > 0:
                child.restart_timer = self.send_after(delay, RestartDue(child_id=child_id))
            else:
                self._start(child)

    def _forget(self, child: _Child) -> None:
        """The child will not run again: close its address (dead-letters are counted)."""
        assert self.context is not None
        child.status = "stopped"
        self.context.registry.remove(child.address.path)
        if child.spec.restart is Restart.TEMPORARY or self.dynamic:
            self._children.pop(child.spec.id, None)

    def _escalate(self, reason: str) -> None:
        log.error("%s", reason)
        self._publish(Escalated(path=self.path, reason=reason))
        running = [c.spec.id for c in reversed(self._children.values()) if c.ref is not None]
        self._shutting_down = True

        def give_up() -> None:
            raise Escalation(reason)

        self._stop_then(running, give_up)

    # -- stopping -------------------------------------------------------------------------------

    def _stop_then(self, child_ids: Sequence[str], then: Callable[[], None]) -> None:
        """Stop ``child_ids`` in the given order (one at a time, or all at once for a
        dynamic supervisor, whose children have no order), then call ``then``."""
        self._stop_queue.extend(child_ids)
        self._after_stops = then
        self._stop_next()

    def _stop_next(self) -> None:
        while self._stop_queue and (self.parallel_stop or not self._in_flight):
            child = self._children[self._stop_queue.popleft()]
            if child.restart_timer is not None:
                self.cancel_wait(child.restart_timer)
                child.restart_timer = None
            if child.ref is None or not child.ref.is_alive():
                child.status = "stopped"
                continue
            child.status = "stopping"
            child.address.phase = "stopping"
            self._in_flight.add(child.spec.id)
            _request_stop(child, "stop requested")
            try:
                child.stop_timer = self.send_after(
                    child.spec.shutdown_timeout, ShutdownTimedOut(child_id=child.spec.id, incarnation=child.incarnation)
                )
            except ReactorStopped:
                pass  # the runtime is ending: no timeout can fire; wait for the exit itself
        if self._stop_queue or self._in_flight:
            return
        then, self._after_stops = self._after_stops, None
        if then is not None:
            then()
        backlog, self._backlog = self._backlog, []
        for event in backlog:
            self._handle_child_exit(event)

    def _stopped(self, child: _Child) -> None:
        if child.stop_timer is not None:
            self.cancel_wait(child.stop_timer)
            child.stop_timer = None
        child.status = "stopped"
        child.address.phase = None
        self._in_flight.discard(child.spec.id)
        self._stop_next()

    def _on_stop_timeout(self, child_id: str, incarnation: int) -> None:
        child = self._children.get(child_id)
        if child is None or child.incarnation != incarnation or child.status != "stopping":
            return
        ref = child.ref
        what = "finish stopping its children" if child.spec.kind == "supervisor" else "stop (a handler is stuck)"
        log.error("%s did not %s within %g s; abandoning its thread", child.address.path, what, child.spec.shutdown_timeout)
        self._publish(
            ChildExited(path=child.address.path, child_id=child_id, incarnation=incarnation, kind="abandoned", error=f"did not {what}")
        )
        self._in_flight.discard(child_id)
        child.stop_timer = None
        child.status = "abandoned"
        child.address.phase = "abandoned"
        if ref is not None:
            # Take its unread messages for the next incarnation, and its waits away.
            child.address._unbind(incarnation, ref.actor_inbox)  # type: ignore[arg-type]  # noqa: SLF001
            self.reactor.cancel_owner(ref.actor_urn)
            try:
                ref.stop(block=False)  # it exits whenever its handler returns
            except pykka.ActorDeadError:
                pass
        child.ref = None
        self._stop_next()

    def _shutdown(self, reason: str) -> None:
        if self._shutting_down:
            return
        log.info("%s shutting down: %s", self.path, reason)
        self._shutting_down = True
        running = [c.spec.id for c in reversed(self._children.values())]
        self._stop_then(running, self.stop)

    def _terminate(self, child_id: str) -> None:
        child = self._children.get(child_id)
        if child is None:
            return

        def forget() -> None:
            self._forget(child)

        self._stop_then([child_id], forget)


def _request_stop(child: _Child, reason: str) -> None:
    ref = child.ref
    if ref is None:
        return
    try:
        if child.spec.kind == "supervisor":
            ref.tell(Shutdown(reason=reason))  # a supervisor stops its children first
        else:
            ref.stop(block=False)
    except pykka.ActorDeadError:
        pass


class DynamicSupervisor(Supervisor):
    """Many children of one template spec, started on demand (one_for_one)."""

    dynamic = True
    parallel_stop = True

    def __init__(
        self,
        template: ChildSpec,
        *,
        intensity: Intensity = Intensity(),
        backoff: Backoff | None = None,
        max_children: int = 10_000,
    ) -> None:
        super().__init__((), strategy=Strategy.ONE_FOR_ONE, intensity=intensity, backoff=backoff)
        self._template = template
        self._max_children = max_children

    def receive(self, message: Any) -> Any:
        if isinstance(message, StartChild):
            self._start_dynamic(message)
            return None
        return super().receive(message)

    def _start_dynamic(self, message: StartChild) -> None:
        existing = self._children.get(message.child_id)
        if existing is not None or self._shutting_down:
            return  # already running (start_child reserved one address for it)
        assert self.context is not None
        if len(self._children) >= self._max_children:
            log.error("%s is full (%d children); %s not started", self.path, self._max_children, message.child_id)
            self.context.registry.remove(_join(self.path, message.child_id))
            return
        spec = dataclasses.replace(self._template, id=message.child_id, args=self._template.args + message.args)
        self._start(self._add(spec))


def start_child(registry: Registry, supervisor: Address[Any], child_id: str, *args: Any) -> Address[Any]:
    """Start (or find) child ``child_id`` of a dynamic supervisor; return its address at once.

    Safe from any thread, including handlers: the address is reserved atomically, so
    concurrent calls for one id get the same address and start one actor. Messages told
    before the child is up are buffered and delivered to it.
    """
    _check_child_id(child_id)
    address, created = registry.reserve(_join(supervisor.path, child_id))
    if created:
        supervisor.tell(StartChild(child_id=child_id, args=args))
    return address


class Runtime:
    """The root of the tree: a registry, the reactor thread, and the root supervisor."""

    def __init__(
        self,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: Intensity = Intensity(),
        backoff: Backoff | None = None,
        buffer_limit: int = 1024,
        heartbeat_interval: float = 0.05,
    ) -> None:
        _check_unique(children)
        self.registry = Registry(buffer_limit=buffer_limit)
        self.reactor = Reactor(heartbeat_interval=heartbeat_interval)
        self._root_args = (tuple(children),)
        self._root_kwargs = {"strategy": strategy, "intensity": intensity, "backoff": backoff}
        self._root: Address[Any] | None = None
        self._ended = threading.Event()
        self._subscribers: tuple[Callable[[Message], None], ...] = ()
        self._exit_reason: str | None = None
        self._failed = False
        self._abandoned = 0

    def start(self) -> Runtime:
        """Start the reactor, then the root supervisor and its children (in order)."""
        if self._root is not None:
            msg = "this runtime was started already; make a new Runtime to start again"
            raise UsageError(msg)
        self.reactor.start()
        root, _ = self.registry.reserve("/", kind="supervisor")
        _reserve_tree(self.registry, "/", self._root_args[0])
        root.starts = 1
        self._root = root
        context = ActorContext(
            path="/",
            child_id="root",
            incarnation=1,
            address=root,
            reactor=self.reactor,
            registry=self.registry,
            parent=None,
            on_exit=self._root_exited,
            publish=self._publish,
        )
        try:
            with starting(context):
                Supervisor.start(*self._root_args, **self._root_kwargs)
        except BaseException:
            self.reactor.stop()
            self.registry.remove("/")
            self._exit_reason = "the root supervisor could not be constructed"
            self._failed = True
            self._ended.set()
            raise
        return self

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def root(self) -> Address[Any]:
        if self._root is None:
            msg = "the runtime is not started; call start() first"
            raise UsageError(msg)
        return self._root

    @property
    def exit_reason(self) -> str | None:
        """Why the runtime ended, or None while it runs."""
        return self._exit_reason

    @property
    def failed(self) -> bool:
        """True if the runtime ended because the root supervisor gave up."""
        return self._failed

    def lookup(self, path: str) -> Address[Any]:
        return self.registry.lookup(path)

    def subscribe(self, callback: Callable[[Message], None]) -> Callable[[], None]:
        """Call ``callback`` with every supervision event; returns an unsubscribe function.

        The callback runs in a supervisor's thread: it must be quick and must not block
        (put the event on a queue, or tell an address).
        """
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def _publish(self, event: Message) -> None:
        if isinstance(event, ChildExited) and event.kind == "abandoned":
            self._abandoned += 1
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("a supervision event subscriber raised; ignored")

    def start_child(self, supervisor_path: str, child_id: str, *args: Any) -> Address[Any]:
        """See :func:`start_child`."""
        if self._ended.is_set():
            raise RuntimeStopped(self._exit_reason or "stopped")
        return start_child(self.registry, self.lookup(supervisor_path), child_id, *args)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the runtime ends; True if it did within ``timeout``."""
        return self._ended.wait(timeout)

    def stop(self, *, timeout: float = 30.0, reason: str = "stop requested") -> bool:
        """Shut the tree down in reverse start order, then the reactor; True if all ended in time."""
        if self._root is None:
            return True
        if not self._ended.is_set():
            try:
                self._root.tell(Shutdown(reason=reason))
            except HermesError:
                pass  # the root is already gone; _root_exited has run or is running
        ended = self._ended.wait(timeout)
        reactor_ended = self.reactor.stop(timeout=max(1.0, timeout / 10))
        if self._abandoned:
            log.error("%d actor thread(s) were abandoned during shutdown (stuck or too slow)", self._abandoned)
        return ended and reactor_ended and not self._abandoned

    def _root_exited(self, event: ChildExited) -> None:
        if event.kind == "normal":
            self._exit_reason = "stopped"
        else:
            self._failed = True
            self._exit_reason = f"the supervision tree gave up: {event.error}"
            log.critical("runtime stopping: %s", self._exit_reason)
        self._publish(event)
        self.registry.remove("/")
        self.reactor.stop(timeout=5.0)
        self._ended.set()

    def snapshot(self) -> TreeSnapshot:
        """The live tree (path, state, restarts, mailbox, uptime) and reactor health."""
        items = self.registry.items()
        by_parent: dict[str, list[str]] = collections.defaultdict(list)
        for path, _ in items:
            if path != "/":
                by_parent[path.rsplit("/", 1)[0] or "/"].append(path)
        addresses = dict(items)

        def node(path: str) -> NodeSnapshot:
            address = addresses[path]
            stats = address.statistics()
            state: NodeState = address.phase or ("stopped" if stats.state == "closed" else stats.state)  # type: ignore[assignment]
            return NodeSnapshot(
                path=path,
                kind="supervisor" if address.kind == "supervisor" else "worker",
                state=state,
                incarnation=stats.incarnation,
                restarts=stats.restarts,
                mailbox=stats.mailbox,
                uptime_s=round(stats.uptime_s, 3),
                dropped=stats.dropped,
                children=tuple(node(p) for p in by_parent.get(path, ())),
            )

        if "/" in addresses:
            root = node("/")
        else:
            root = NodeSnapshot(path="/", kind="supervisor", state="stopped", incarnation=0, restarts=0, mailbox=0, uptime_s=0.0)
        reactor = self.reactor.statistics()
        return TreeSnapshot(
            root=root,
            reactor_lag_ms=round(reactor.lag_ms, 3),
            reactor_lag_max_ms=round(reactor.lag_max_ms, 3),
            reactor_waits=reactor.waits,
            reactor_faults=reactor.faults,
        )
