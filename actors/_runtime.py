"""The runtime: a registry, the reactor thread, and the root supervisor, started and stopped together."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from protocols import ChildExited, Message, Shutdown, SupervisorInbox, TreeSnapshot

from ._actor import ActorContext, starting
from ._address import ActorPath, Address, Registry
from ._errors import HermesError, RuntimeStopped, UsageError
from ._reactor import Reactor
from ._snapshot import build_snapshot
from ._spec import Backoff, ChildSpec, Intensity, Strategy, _check_unique, _join

log = logging.getLogger("supervisor")

T = TypeVar("T")


def _reserve_tree(registry: Registry, path: str, children: Sequence[ChildSpec]) -> None:
    """Reserve the addresses of a static tree up front, so every path resolves at once.

    Children start asynchronously; their addresses buffer until each incarnation is up.
    """
    for spec in children:
        child_path = _join(path, spec.id)
        registry.reserve(child_path, kind=spec.kind)
        if spec.actor.is_supervisor and not getattr(spec.actor, "dynamic", False):
            nested = spec.kwargs.get("children", spec.args[0] if spec.args else ())
            _reserve_tree(registry, child_path, nested)


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
        self._root: Address[SupervisorInbox] | None = None
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
        from supervisor import Supervisor  # the root's class; supervisor.py imports this module

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
    def root(self) -> Address[SupervisorInbox]:
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

    @overload
    def lookup(self, path: ActorPath[T]) -> Address[T]: ...

    @overload
    def lookup(self, path: str) -> Address[Any]: ...

    def lookup(self, path: str | ActorPath[Any]) -> Address[Any]:
        """See :meth:`Registry.lookup` (an :class:`ActorPath` gives a typed address)."""
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
        from supervisor import start_child

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
        return build_snapshot(self.registry, self.reactor)
