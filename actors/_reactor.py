"""The reactor: one thread running ``trio.run``, where every wait of every actor happens.

Actors never wait. An actor hands the reactor a coroutine function (a model stream, an
HTTP call, a subprocess, a timer) and gets a :class:`WaitHandle` back at once; the outcome
(value, exception, cancelled, timed out) comes back to that actor incarnation as a
``WaitFinished`` message ("pipe to self"). Cancelling is cancelling the wait's cancel scope.

Invariant: every wait has an owner and a deadline, and is cancelled when its owner dies.
Invariant: nothing an actor hands in can end the trio run; callbacks are guarded and a
failing wait becomes an ``error`` outcome.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pykka
import trio

from protocols import WaitFinished, WaitStatus

from ._errors import ReactorStopped, UsageError

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class WaitHandle:
    """What an actor keeps to cancel a wait; ``wait_id`` matches ``WaitFinished.wait_id``."""

    wait_id: int
    owner: str
    """The owner incarnation's actor URN."""
    tag: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReactorStatistics:
    """Reactor health: heartbeat lag, running waits, contained faults, lost outcomes."""

    lag_ms: float
    lag_max_ms: float
    waits: int
    faults: int
    undeliverable: int


class _Wait:
    __slots__ = ("args", "explicit", "fn", "handle", "owner", "scope", "timeout", "timer_message")

    def __init__(
        self,
        handle: WaitHandle,
        owner: pykka.ActorRef[Any],
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        timeout: float,
        timer_message: object | None,
    ) -> None:
        self.handle = handle
        self.owner = owner
        self.fn = fn
        self.args = args
        self.timeout = timeout
        self.timer_message = timer_message
        self.explicit = False
        self.scope: trio.CancelScope | None = None


class Reactor:
    """One trio thread shared by all actors of a runtime."""

    def __init__(self, *, heartbeat_interval: float = 0.05) -> None:
        self._interval = heartbeat_interval
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._at_stop: list[Callable[[], Awaitable[None]]] = []
        # Reactor-thread state (touched only inside the trio run):
        self._waits: dict[int, _Wait] = {}
        self._by_owner: dict[str, set[int]] = {}
        # Counters, read from any thread:
        self._lag = 0.0
        self._lag_max = 0.0
        self._faults = 0
        self._undeliverable = 0

    # -- lifecycle -----------------------------------------------------------------

    def start(self, *, timeout: float = 5.0) -> None:
        """Start the reactor thread and return once it accepts work."""
        if self._thread is not None:
            msg = "the reactor is already started; a runtime has exactly one"
            raise UsageError(msg)
        self._thread = threading.Thread(target=self._run, name="hermes-reactor", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            msg = f"the reactor thread did not start within {timeout} s"
            raise ReactorStopped(msg)

    def stop(self, *, timeout: float = 5.0) -> bool:
        """Cancel every wait, end the trio run and join the thread; True if it ended in time."""
        thread = self._thread
        if thread is None:
            return True
        stop = self._stop
        if stop is not None:
            try:
                self._call_soon(stop.set)
            except ReactorStopped:
                pass
        thread.join(timeout)
        return not thread.is_alive()

    def at_stop(self, cleanup: Callable[[], Awaitable[None]]) -> None:
        """Run ``await cleanup()`` in the reactor when it stops, after all waits are cancelled."""
        self._at_stop.append(cleanup)

    @property
    def running(self) -> bool:
        return self._token is not None and self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException:  # pragma: no cover - the guard below should make this impossible
            log.exception("the reactor's trio run ended with an error")
        finally:
            self._token = None

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._heartbeat)  # measuring before anyone can block the loop
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()
        # Waits are cancelled (their HTTP streams closed); now close shared resources.
        for cleanup in self._at_stop:
            with trio.move_on_after(5):
                try:
                    await cleanup()
                except Exception:
                    log.exception("a reactor cleanup raised")

    async def _heartbeat(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        before = trio.current_time()
        task_status.started()
        while True:
            await trio.sleep(self._interval)
            lag = max(0.0, trio.current_time() - before - self._interval)
            self._lag = lag
            self._lag_max = max(self._lag_max, lag)
            before = trio.current_time()

    # -- thread-safe entry points ----------------------------------------------------

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run a plain callable in the reactor thread; if it raises, the fault is contained."""
        self._call_soon(fn, *args)

    def start_wait(
        self,
        owner: pykka.ActorRef[Any],
        fn: Callable[..., Awaitable[Any]],
        *args: Any,
        tag: str,
        timeout: float,
    ) -> WaitHandle:
        """Run ``await fn(*args)`` in the reactor; ``owner`` gets a ``WaitFinished``.

        ``timeout`` is required: every wait has a deadline (``math.inf`` says so explicitly).
        """
        if not timeout > 0:
            msg = f"timeout must be positive seconds, got {timeout!r}"
            raise UsageError(msg)
        return self._submit(owner, fn, args, tag, timeout, None)

    def send_after(self, owner: pykka.ActorRef[Any], delay: float, message: object) -> WaitHandle:
        """Tell ``owner`` the ``message`` after ``delay`` seconds, unless cancelled first."""
        return self._submit(owner, trio.sleep, (max(0.0, delay),), "timer", math.inf, message)

    def cancel(self, handle: WaitHandle) -> None:
        """Cancel one wait; the owner receives ``status="cancelled"`` (timers stay silent)."""
        self._call_soon(self._cancel, handle.wait_id)

    def cancel_owner(self, owner: str) -> None:
        """Cancel every wait of an owner incarnation (called when it dies)."""
        if self._token is not None:
            try:
                self._call_soon(self._cancel_owner, owner)
            except ReactorStopped:
                pass

    def statistics(self) -> ReactorStatistics:
        return ReactorStatistics(
            lag_ms=self._lag * 1000,
            lag_max_ms=self._lag_max * 1000,
            waits=len(self._waits),
            faults=self._faults,
            undeliverable=self._undeliverable,
        )

    # -- inside the reactor thread ------------------------------------------------------

    def _call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        token = self._token
        if token is None:
            msg = "the reactor is not running; start the runtime first"
            raise ReactorStopped(msg)
        try:
            token.run_sync_soon(self._guarded, fn, args)
        except trio.RunFinishedError:
            msg = "the reactor has stopped; no new waits can start"
            raise ReactorStopped(msg) from None

    def _guarded(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        # An exception escaping a run_sync_soon callback would end the whole trio run.
        try:
            fn(*args)
        except Exception:
            self._faults += 1
            log.exception("a reactor callback raised; contained")

    def _submit(
        self,
        owner: pykka.ActorRef[Any],
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        tag: str,
        timeout: float,
        timer_message: object | None,
    ) -> WaitHandle:
        handle = WaitHandle(next(self._ids), owner.actor_urn, tag)
        self._call_soon(self._spawn, _Wait(handle, owner, fn, args, timeout, timer_message))
        return handle

    def _spawn(self, wait: _Wait) -> None:
        assert self._nursery is not None
        wait.scope = trio.CancelScope(deadline=trio.current_time() + wait.timeout)
        wait_id = wait.handle.wait_id
        self._waits[wait_id] = wait
        self._by_owner.setdefault(wait.handle.owner, set()).add(wait_id)
        self._nursery.start_soon(self._run_wait, wait)

    def _cancel(self, wait_id: int) -> None:
        wait = self._waits.get(wait_id)
        if wait is not None and wait.scope is not None:
            wait.explicit = True
            wait.scope.cancel()

    def _cancel_owner(self, owner: str) -> None:
        for wait_id in list(self._by_owner.get(owner, ())):
            self._cancel(wait_id)

    async def _run_wait(self, wait: _Wait) -> None:
        status: WaitStatus = "cancelled"
        value: object = None
        error = ""
        assert wait.scope is not None
        try:
            with wait.scope:
                try:
                    value = await wait.fn(*wait.args)
                    status = "ok"
                except Exception as exc:  # trio.Cancelled is a BaseException: not caught here
                    status, value, error = "error", exc, f"{type(exc).__name__}: {exc}"
            if wait.scope.cancelled_caught and not wait.explicit and status == "cancelled":
                status, error = "timeout", f"no outcome within {wait.timeout} s"
        finally:
            self._forget(wait)
            if wait.timer_message is not None:
                if status == "ok":
                    self._deliver(wait.owner, wait.timer_message)
            else:
                handle = wait.handle
                self._deliver(
                    wait.owner,
                    WaitFinished(wait_id=handle.wait_id, tag=handle.tag, status=status, value=value, error=error),
                )

    def _forget(self, wait: _Wait) -> None:
        wait_id = wait.handle.wait_id
        self._waits.pop(wait_id, None)
        owned = self._by_owner.get(wait.handle.owner)
        if owned is not None:
            owned.discard(wait_id)
            if not owned:
                del self._by_owner[wait.handle.owner]

    def _deliver(self, owner: pykka.ActorRef[Any], message: object) -> None:
        try:
            owner.tell(message)
        except pykka.ActorDeadError:
            self._undeliverable += 1
