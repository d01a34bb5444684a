"""``Lane``: the thread one plugin incarnation's callbacks run in, fed by a lock-free queue.

The dispatcher (in the reactor) puts a call on a lane and awaits every lane's answer under one
deadline. A lane is owned by its plugin's ``HookActor``: the actor loads the plugin, starts the
lane's thread with it, and closes the lane when it stops. A lane whose callback hangs is
abandoned (a daemon thread that never reads again); the dispatcher gives the plugin a new actor
and a new lane. The hop costs one ``SimpleQueue.put`` (a C lock release) there and one lock release back
(``Gather``); the reactor is woken through trio only when the answers are slow.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

from ._unit import Unit

Wake = Callable[[Callable[[], object]], object]
"""``TrioToken.run_sync_soon``: runs a callable in the reactor."""


class Gather:
    """One call's answers, told from the lanes' threads.

    The reactor first blocks briefly for them (``wait_briefly``: a lock, the GIL released; the
    cheapest hand-off CPython has), and only if they are not all in by then parks on ``done``,
    which the last answer sets through one wake-up of the reactor.
    """

    __slots__ = ("_all", "_complete", "_mutex", "_parked", "answers", "done", "expected", "wake")

    def __init__(self, wake: Wake, expected: int) -> None:
        self.wake = wake
        self.expected = expected
        self.answers: dict[str, tuple[tuple[Any, ...], str | None]] = {}
        self.done = trio.Event()
        self._all = threading.Lock()
        self._all.acquire()
        self._mutex = threading.Lock()
        self._complete = False
        self._parked = False

    def answer(self, plugin: str, values: tuple[Any, ...], error: str | None) -> None:
        """From a lane's thread (a dict store is atomic under the GIL)."""
        self.answers[plugin] = (values, error)
        if len(self.answers) < self.expected:
            return
        with self._mutex:
            if self._complete:
                return  # two answers both saw the count complete: the first one tells
            self._complete = True
            parked = self._parked
        self._all.release()
        if parked:
            try:
                self.wake(self.done.set)
            except trio.RunFinishedError:
                pass  # the reactor stopped: nobody waits any more

    def wait_briefly(self, seconds: float) -> bool:
        """In the reactor: block up to ``seconds`` for every answer; False: not all in, await ``done``."""
        return self._all.acquire(timeout=seconds) or self.park()

    def park(self) -> bool:
        """In the reactor, before awaiting ``done``: True if every answer is in already (no await)."""
        with self._mutex:
            self._parked = not self._complete
            return self._complete


_STOP = object()


class Lane:
    """A plugin incarnation's call queue; ``serve`` drains it in the lane's thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.closed = False

    def submit(self, event: str, kwargs: dict[str, Any], gather: Gather) -> None:
        """Queue a call (on a closed lane: answered at once, with nothing)."""
        if self.closed:
            gather.answer(self.name, (), None)
            return
        self.jobs.put((event, kwargs, gather))

    def start(self, unit: Unit | None) -> None:
        """Start draining (``unit`` None: the plugin did not load; every call is answered empty)."""
        self.thread = threading.Thread(target=self._serve, args=(unit,), name=f"hook-lane-{self.name}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """No more calls: the thread ends after those queued (a hung one never reads this)."""
        self.closed = True
        self.jobs.put(_STOP)

    def _serve(self, unit: Unit | None) -> None:
        name, jobs = self.name, self.jobs
        while (job := jobs.get()) is not _STOP:
            event, kwargs, gather = job
            callbacks = unit.callbacks(event) if unit is not None else ()
            values: list[Any] = []
            error: str | None = None
            for callback in callbacks:
                try:
                    value = callback(event, kwargs)
                    if inspect.iscoroutine(value):
                        value = asyncio.run(value)
                except (Exception, SystemExit) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    break
                values.append(value)
            gather.answer(name, tuple(values), error)
