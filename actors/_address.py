"""Stable addresses: names that outlive the actor incarnations behind them.

Callers hold an :class:`Address`, never a raw ``pykka.ActorRef``. While the actor runs, a
``tell`` goes straight to its inbox. While it restarts (or before its first start) the
address buffers messages, bounded, and hands them to the next incarnation in order,
including the ones still unread in the dead incarnation's inbox.

Invariant: a message told to an address is delivered exactly once to some incarnation,
or refused at the call with a counted :class:`DeliveryError`. Never silently lost.
The invariant holds because ``tell`` checks-and-puts under the address lock, and a dying
incarnation drains its inbox under the same lock (see ``_unbind``).

Types: ``Address[M]`` takes the messages of inbox ``M`` (``tell``, ``ask``), plus the kernel
messages every actor takes (``InjectCrash``; ``tell`` only). Addresses are contravariant in
``M``: an actor that takes more is a valid address for fewer (``Address[StoreCommand]`` is an
``Address[AppendMessages]``). An :class:`ActorPath` names a path together with its inbox, so
``Registry.lookup(STORE_PATH)`` is an ``Address[StoreCommand]``; a plain string gives
``Address[Any]``.
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
from typing import Any, Generic, Literal, TypeVar, cast, overload

import pykka

from protocols._supervision import InjectCrash

from ._errors import AddressClosed, MailboxOverflow, UsageError

M = TypeVar("M", contravariant=True)
"""An inbox type. Contravariant: whoever takes more can stand in for whoever takes less."""
T = TypeVar("T")
"""An inbox type bound at a call (``lookup``)."""

KernelMessage = InjectCrash
"""Messages every actor takes whatever its inbox, handled by ``Actor`` itself (they never
reach ``receive``): ``InjectCrash`` crashes the incarnation (chaos)."""

AddressState = Literal["starting", "running", "restarting", "closed"]

DEFAULT_BUFFER_LIMIT = 1024
"""Messages an address holds while its actor is not running."""

_local = threading.local()


def in_handler() -> bool:
    """True when the calling thread is inside an actor's message handler."""
    return getattr(_local, "in_handler", False)


def set_in_handler(value: bool) -> None:
    _local.in_handler = value


class Ask:
    """A request wrapped with the future its answer goes to (for non-actor callers)."""

    __slots__ = ("message", "reply")

    def __init__(self, message: object, reply: pykka.Future[Any]) -> None:
        self.message: Any = message
        """Of the inbox type of the address it was asked through (``Address.ask`` checks it)."""
        self.reply = reply


@dataclasses.dataclass(frozen=True, slots=True)
class AddressStatistics:
    """A moment's view of an address, for the tree snapshot."""

    state: AddressState
    incarnation: int
    restarts: int
    mailbox: int
    uptime_s: float
    dropped: int


@dataclasses.dataclass(frozen=True)
class ActorPath(Generic[M]):
    """A path with the inbox type of the actor there, declared where the actor is defined:
    ``STORE_PATH: ActorPath[StoreCommand] = ActorPath("/store")``; then
    ``Registry.lookup(STORE_PATH)`` is an ``Address[StoreCommand]``.

    Not a ``str`` on purpose: a plain path gives ``Address[Any]``, and a typed path must never
    fall back to that overload.
    """

    path: str

    def __str__(self) -> str:
        return self.path


class Address(Generic[M]):
    """A stable, restart-proof name for an actor; ``M`` is the inbox type it accepts.

    ``tell`` also takes the kernel messages (``KernelMessage``) every actor handles itself.
    """

    __slots__ = (
        "_dropped",
        "_incarnation",
        "_limit",
        "_lock",
        "_pending",
        "_ref",
        "_started_at",
        "_state",
        "kind",
        "path",
        "phase",
        "starts",
    )

    def __init__(self, path: str, *, kind: str = "worker", buffer_limit: int = DEFAULT_BUFFER_LIMIT) -> None:
        self.path = path
        self.kind = kind
        self.starts = 0
        """Incarnations started at this path so far (restarts = starts - 1)."""
        self.phase: str | None = None
        """Supervisor's word on the child ("stopping", "abandoned"), shown in snapshots."""
        self._lock = threading.Lock()
        self._ref: pykka.ActorRef[Any] | None = None
        self._incarnation = 0
        self._state: AddressState = "starting"
        self._pending: collections.deque[object] = collections.deque()
        self._limit = buffer_limit
        self._dropped = 0
        self._started_at = 0.0

    def __repr__(self) -> str:
        return f"<Address {self.path} {self._state} #{self._incarnation}>"

    @property
    def state(self) -> AddressState:
        return self._state

    def tell(self, message: M | KernelMessage) -> None:
        """Send ``message`` to the current incarnation, or buffer it while none runs.

        Raises:
            MailboxOverflow: the actor is restarting and the buffer is full.
            AddressClosed: the actor was stopped for good.
        """
        with self._lock:
            if self._state == "running":
                assert self._ref is not None
                try:
                    self._ref.tell(message)
                    return
                except pykka.ActorDeadError:
                    # Dying: its exit hook will drain the inbox in front of this buffer.
                    self._state = "restarting"
            self._buffer(message)

    def ask(self, message: M, *, timeout: float = 10.0) -> Any:
        """Send ``message`` and block for the handler's return value (not from a handler).

        Raises:
            UsageError: called from inside an actor handler, which must never block.
            TimeoutError: no answer within ``timeout`` seconds.
            ActorCrashed: the handler raised; the actor is being restarted.
        """
        if in_handler():
            msg = f"ask({self.path}) would block an actor handler; tell the request with a reply address instead"
            raise UsageError(msg)
        try:
            return self.ask_future(message).get(timeout=timeout)
        except pykka.Timeout:
            msg = f"{self.path} did not answer within {timeout} s"
            raise TimeoutError(msg) from None

    def ask_future(self, message: M) -> pykka.Future[Any]:
        """Send ``message``; return a future for the handler's return value."""
        future: pykka.Future[Any] = pykka.ThreadingFuture()
        self.tell(cast(Any, Ask(message, future)))  # the kernel's wrapper: unwrapped before ``receive``
        return future

    def statistics(self) -> AddressStatistics:
        ref = self._ref
        inbox = 0
        if ref is not None:
            inbox = ref.actor_inbox.qsize()  # type: ignore[attr-defined]
        running = self._state == "running"
        return AddressStatistics(
            state=self._state,
            incarnation=self._incarnation,
            restarts=max(0, self.starts - 1),
            mailbox=inbox + len(self._pending),
            uptime_s=(time.monotonic() - self._started_at) if running else 0.0,
            dropped=self._dropped,
        )

    # -- kernel side: called by the actor base class and supervisors ---------------

    def _buffer(self, message: object) -> None:
        kind = type(message.message if isinstance(message, Ask) else message).__name__
        if self._state == "closed":
            self._dropped += 1
            msg = f"{self.path} is stopped for good; {kind} was not delivered"
            raise AddressClosed(msg)
        if len(self._pending) >= self._limit:
            self._dropped += 1
            msg = f"{self.path} is {self._state} and already holds {self._limit} messages; {kind} was refused (retry later or raise buffer_limit)"
            raise MailboxOverflow(msg)
        self._pending.append(message)

    def _bind(self, ref: pykka.ActorRef[Any], incarnation: int) -> None:
        """Point the address at a freshly started incarnation and flush the buffer to it."""
        with self._lock:
            if self._state == "closed":
                return
            self._ref = ref
            self._incarnation = incarnation
            self._state = "running"
            self._started_at = time.monotonic()
            while self._pending:
                try:
                    ref.tell(self._pending[0])
                except pykka.ActorDeadError:
                    self._state = "restarting"
                    return
                self._pending.popleft()

    def _unbind(self, incarnation: int, inbox: queue.Queue[Any]) -> None:
        """Detach a dying incarnation; its unread messages go in front of the buffer."""
        with self._lock:
            if incarnation != self._incarnation or self._state == "closed":
                return
            self._ref = None
            self._state = "restarting"
            unread: list[object] = []
            while True:
                try:
                    envelope = inbox.get_nowait()
                except queue.Empty:
                    break
                message = envelope.message
                if type(message).__module__ == "pykka.messages":
                    # pykka's own stop/proxy messages belong to the dead incarnation.
                    if envelope.reply_to is not None:
                        envelope.reply_to.set(None)
                    continue
                unread.append(message)
            self._pending.extendleft(reversed(unread))

    def _close(self) -> None:
        """Stop delivering for good: buffered messages are dead-lettered and counted."""
        with self._lock:
            self._state = "closed"
            self._ref = None
            for message in self._pending:
                self._dropped += 1
                if isinstance(message, Ask):
                    message.reply.set_exception(exc_info=(AddressClosed, AddressClosed(f"{self.path} was stopped for good"), None))
            self._pending.clear()


class Registry:
    """Every address of one runtime, by path. Reserving a path is atomic."""

    def __init__(self, *, buffer_limit: int = DEFAULT_BUFFER_LIMIT) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[str, Address[Any]] = {}
        self._kids: dict[str, set[str]] = {}
        """parent path -> child paths, so removing a subtree costs its size, not the registry's."""
        self._buffer_limit = buffer_limit

    def reserve(self, path: str, *, kind: str = "worker") -> tuple[Address[Any], bool]:
        """Return the address at ``path``, creating it if absent; the bool says "created"."""
        with self._lock:
            found = self._by_path.get(path)
            if found is not None and found.state != "closed":
                return found, False
            address: Address[Any] = Address(path, kind=kind, buffer_limit=self._buffer_limit)
            self._by_path[path] = address
            if path != "/":
                self._kids.setdefault(_parent(path), set()).add(path)
            return address, True

    @overload
    def lookup(self, path: ActorPath[T]) -> Address[T]: ...

    @overload
    def lookup(self, path: str) -> Address[Any]: ...

    def lookup(self, path: str | ActorPath[Any]) -> Address[Any]:
        """The address at ``path``; typed by its inbox when ``path`` is an :class:`ActorPath`.

        Raises:
            LookupError: nothing is registered there.
        """
        if isinstance(path, ActorPath):
            path = path.path
        with self._lock:
            found = self._by_path.get(path)
        if found is None:
            msg = f"no actor at {path!r}; known paths: {', '.join(sorted(self._by_path)) or 'none'}"
            raise LookupError(msg)
        return found

    def remove(self, path: str) -> None:
        """Close and forget ``path`` and everything under it."""
        with self._lock:
            doomed = [path]
            index = 0
            while index < len(doomed):
                doomed.extend(self._kids.pop(doomed[index], ()))
                index += 1
            if path != "/":
                siblings = self._kids.get(_parent(path))
                if siblings is not None:
                    siblings.discard(path)
            addresses = [a for a in (self._by_path.pop(p, None) for p in doomed) if a is not None]
        for address in addresses:
            address._close()

    def items(self) -> list[tuple[str, Address[Any]]]:
        with self._lock:
            return list(self._by_path.items())


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"
