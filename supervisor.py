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
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import pykka

from actors import Actor, Address, HermesError, ReactorStopped, Registry
from actors._actor import ActorContext, starting
from actors._spec import SUPERVISOR_SHUTDOWN as SUPERVISOR_SHUTDOWN
from actors._spec import WORKER_SHUTDOWN as WORKER_SHUTDOWN
from actors._spec import Backoff as Backoff
from actors._spec import ChildSpec as ChildSpec
from actors._spec import Intensity as Intensity
from actors._spec import Restart as Restart
from actors._spec import Strategy as Strategy
from actors._spec import _check_child_id, _check_unique, _join
from protocols import (
    ChildExited,
    ChildRestarted,
    ChildStarted,
    Escalated,
    Message,
    NodeState,
    ReplaceTemplate,
    RestartDue,
    Shutdown,
    ShutdownTimedOut,
    StartChild,
    SupervisorInbox,
    TerminateChild,
)

log = logging.getLogger(__name__)


def supervisor_spec(
    id: str,
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


class Supervisor(Actor[SupervisorInbox]):
    """Supervises a fixed, ordered list of children."""

    is_supervisor = True
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
        # What to do once the stop queue drains: each stop sequence adds its own, so a
        # terminate that arrives during a restart or a shutdown never drops the other's step.
        self._after_stops: list[Callable[[], None]] = []
        self._backlog: list[ChildExited] = []
        self._shutting_down = False

    # -- lifecycle ---------------------------------------------------------------------

    def started(self) -> None:
        for spec in self._specs:
            self._start(self._add(spec))

    def receive(self, message: SupervisorInbox) -> Any:
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
            case ReplaceTemplate():
                log.error("%s has a fixed child list; ReplaceTemplate needs a DynamicSupervisor", self.path)
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
            self._publish(ChildRestarted(path=context.path, incarnation=child.incarnation, restarts=child.incarnation - 1))
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
        if self._after_stops or self._shutting_down:
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
        if self._shutting_down:
            return  # a shutdown (or an escalation) came while the group stopped: nothing restarts
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
        self._stop_queue.extend(i for i in child_ids if i not in self._stop_queue and i not in self._in_flight)
        self._after_stops.append(then)
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
                child.stop_timer = self.send_after(child.spec.shutdown_timeout, ShutdownTimedOut(child_id=child.spec.id, incarnation=child.incarnation))
            except ReactorStopped:
                pass  # the runtime is ending: no timeout can fire; wait for the exit itself
        if self._stop_queue or self._in_flight:
            return
        thens, self._after_stops = self._after_stops, []
        for then in thens:
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
        self._publish(ChildExited(path=child.address.path, child_id=child_id, incarnation=incarnation, kind="abandoned", error=f"did not {what}"))
        self._in_flight.discard(child_id)
        child.stop_timer = None
        child.status = "abandoned"
        child.address.phase = "abandoned"
        if ref is not None:
            # Take its unread messages for the next incarnation, and its waits away.
            child.address._unbind(incarnation, ref.actor_inbox)  # type: ignore[arg-type]
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

    def receive(self, message: SupervisorInbox) -> Any:
        if isinstance(message, StartChild):
            self._start_dynamic(message)
            return None
        if isinstance(message, ReplaceTemplate):
            self._replace_template(message)
            return None
        return super().receive(message)

    def _replace_template(self, message: ReplaceTemplate) -> None:
        kept = len(self._template.args)
        self._template = dataclasses.replace(self._template, args=message.args)
        for child in self._children.values():  # a restart starts from the new arguments too
            child.spec = dataclasses.replace(child.spec, args=message.args + child.spec.args[kept:])
            if message.notify is not None and child.status == "running":
                child.address.tell(message.notify)

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


def start_child(registry: Registry, supervisor: Address[StartChild], child_id: str, *args: Any) -> Address[Any]:
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


# The root of the tree lives in the kernel; it is part of this module's public face.
from actors._runtime import Runtime as Runtime  # noqa: E402
