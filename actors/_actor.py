"""The actor base class: pykka's thread-per-actor, with every way of dying reported.

pykka reports a crash in a handler through ``on_failure`` but says nothing when
``on_start`` fails, treats an exception in an ``ask`` as the caller's problem, and stops
every actor in the process on ``SystemExit`` in a handler. :class:`Actor` closes those
gaps: subclasses write ``started`` / ``receive`` / ``stopping``, and whatever happens
(an exception, even a ``BaseException``, in any of them, or a plain stop) the incarnation
ends through one path, ``_exit``, which detaches its address (unread messages go to the
next incarnation), cancels its reactor waits and tells its supervisor ``ChildExited``.

Invariant: a handler never blocks; ``Address.ask`` raises ``UsageError`` inside one.

Types: ``Actor[M]`` declares its inbox ``M``, everything ``receive`` is handed:
``class StoreWriter(Actor[StoreCommand])``. ``M`` includes the outcomes of the actor's own
waits (``WaitFinished``: ``start_wait`` and ``run_process`` are only for an actor whose
inbox takes it) and its own timers (``send_after`` takes an ``M``). The kernel messages
(``InjectCrash``, the ``Ask`` wrapper) are handled by ``on_receive`` and are not part of
``M``: ``InjectCrash`` never reaches ``receive``, an ``Ask`` reaches it unwrapped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pykka

from protocols import ChildExited, ExitKind, Message, WaitFinished
from protocols._supervision import InjectCrash

from ._address import Address, Ask, set_in_handler
from ._errors import ActorCrashed, ExternalFailure, InjectedCrash, UsageError
from ._process import run_process
from ._reactor import Reactor, WaitHandle

if TYPE_CHECKING:
    from ._address import Registry

log = logging.getLogger(__name__)

M = TypeVar("M", contravariant=True)
"""The actor's inbox: what ``receive`` takes (contravariant, like ``Address``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ActorContext:
    """What a supervisor gives each incarnation it starts."""

    path: str
    child_id: str
    incarnation: int
    address: Address[Any]
    reactor: Reactor
    registry: Registry
    parent: pykka.ActorRef[Any] | None
    """The supervisor incarnation to tell ``ChildExited``; None for the root."""
    on_exit: Callable[[ChildExited], None] | None = None
    """For the root only: how the runtime learns that the tree ended."""
    publish: Callable[[Message], None] | None = None
    """Where supervisors announce supervision events (started, exited, restarted, escalated)."""


_starting = threading.local()


@contextlib.contextmanager
def starting(context: ActorContext) -> Iterator[None]:
    """Construct actors inside this block to hand them ``context`` (supervisor use)."""
    _starting.context = context
    try:
        yield
    finally:
        _starting.context = None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Actor(pykka.ThreadingActor, Generic[M]):
    """Base of every actor in the runtime. Override ``started``, ``receive``, ``stopping``.

    ``M`` is the inbox: ``class Worker(Actor[Job | WaitFinished])``.
    """

    # A handler stuck past its shutdown timeout must not keep the process alive.
    use_daemon_thread = True
    is_supervisor = False
    """True for supervisors (they stop their own children first, so they get longer to stop)."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        super().__init__()
        self.context: ActorContext | None = getattr(_starting, "context", None)
        self._exited = False

    # -- for subclasses ---------------------------------------------------------------

    def started(self) -> None:
        """Set up, in the actor's thread, before the first message. Raising fails the start."""

    def receive(self, message: M) -> Any:
        """Handle one message. Must not block: start a wait instead. Raising crashes the actor."""
        log.warning("%s ignored an unexpected %s", self.path, type(message).__name__)

    def stopping(self) -> None:
        """Clean up on an orderly stop (not called after a crash)."""

    def terminated(self, kind: ExitKind) -> None:
        """Called last, once, on every exit, after the address is detached."""

    @property
    def path(self) -> str:
        return self.context.path if self.context is not None else f"<unsupervised {type(self).__name__}>"

    @property
    def address(self) -> Address[M]:
        return self._context().address

    @property
    def reactor(self) -> Reactor:
        return self._context().reactor

    def start_wait(self: Actor[WaitFinished], fn: Callable[..., Awaitable[Any]], *args: Any, tag: str, timeout: float) -> WaitHandle:
        """Run ``await fn(*args)`` in the reactor; the outcome comes back as ``WaitFinished``
        (so only an actor whose inbox takes ``WaitFinished`` may start one)."""
        return self.reactor.start_wait(self.actor_ref, fn, *args, tag=tag, timeout=timeout)

    def send_after(self, delay: float, message: M) -> WaitHandle:
        """Receive ``message`` after ``delay`` seconds (cancel with ``cancel_wait``)."""
        return self.reactor.send_after(self.actor_ref, delay, message)

    def cancel_wait(self, handle: WaitHandle) -> None:
        self.reactor.cancel(handle)

    def run_process(self: Actor[WaitFinished], argv: Sequence[str], *, tag: str, timeout: float, **options: Any) -> WaitHandle:
        """Run a subprocess group in the reactor; ``WaitFinished.value`` is a ``ProcessResult``."""
        return self.start_wait(lambda: run_process(argv, **options), tag=tag, timeout=timeout)

    def _context(self) -> ActorContext:
        if self.context is None:
            msg = f"{type(self).__name__} was not started by a supervisor, so it has no address or reactor"
            raise UsageError(msg)
        return self.context

    # -- pykka hooks: final ------------------------------------------------------------

    def on_start(self) -> None:
        set_in_handler(True)  # this thread only ever runs this actor
        try:
            self.started()
        except BaseException as exc:
            log.error("%s failed to start: %s", self.path, _describe(exc), exc_info=exc)
            self._die("start_failed", exc)
            return
        if self.context is not None:
            self.context.address._bind(self.actor_ref, self.context.incarnation)

    def on_receive(self, message: Any) -> Any:
        if type(message) is InjectCrash:
            self._crash(InjectedCrash(message.reason))
            return None
        if type(message) is Ask:
            try:
                result = self.receive(message.message)
            except BaseException as exc:
                crashed = ActorCrashed(f"{self.path} crashed handling {type(message.message).__name__}: {_describe(exc)}")
                # Report the exit before answering, so the caller's next message to this
                # address (or to the supervisor) is ordered after the crash.
                self._crash(exc)
                message.reply.set_exception(exc_info=(ActorCrashed, crashed, exc.__traceback__))
                return None
            message.reply.set(result)
            return None
        try:
            return self.receive(message)
        except BaseException as exc:
            if self.context is None:
                # Unsupervised (tests, benchmarks): plain pykka semantics, minus stop_all.
                if isinstance(exc, Exception):
                    raise
                raise ActorCrashed(f"{self.path} raised {_describe(exc)}") from exc
            self._crash(exc)
            return None

    def on_stop(self) -> None:
        try:
            self.stopping()
        except BaseException as exc:
            log.error("%s crashed while stopping: %s", self.path, _describe(exc), exc_info=exc)
            self._exit("crashed", exc)
        else:
            self._exit("normal", None)

    def on_failure(self, *_exc_info: object) -> None:
        # Unreachable by design: on_receive never lets an exception reach pykka.
        self._exit("crashed", None)

    # -- the one way out ------------------------------------------------------------------

    def _crash(self, exc: BaseException) -> None:
        log.error("%s crashed: %s", self.path, _describe(exc), exc_info=None if isinstance(exc, ExternalFailure) else exc)
        self._die("crashed", exc)

    def _die(self, kind: ExitKind, exc: BaseException | None) -> None:
        """End this incarnation now, without processing the rest of the inbox."""
        self.actor_stopped.set()
        pykka.ActorRegistry.unregister(self.actor_ref)
        self._exit(kind, exc)

    def _exit(self, kind: ExitKind, exc: BaseException | None) -> None:
        if self._exited:
            return
        self._exited = True
        context = self.context
        if context is None:
            return
        context.address._unbind(context.incarnation, self.actor_inbox)  # type: ignore[arg-type]
        context.reactor.cancel_owner(self.actor_urn)
        try:
            self.terminated(kind)
        except Exception:
            log.exception("%s: terminated() raised", self.path)
        event = ChildExited(
            path=context.path,
            child_id=context.child_id,
            incarnation=context.incarnation,
            kind=kind,
            error=_describe(exc) if exc is not None else "",
        )
        if context.parent is not None:
            try:
                context.parent.tell(event)
            except pykka.ActorDeadError:
                pass  # the supervisor is gone too; its own exit covers this child
        elif context.on_exit is not None:
            context.on_exit(event)
