"""``Lane``: the thread one plugin incarnation's callbacks run in, fed by a lock-free queue;
``SharedLane``: the one thread the well-behaved plugins share (``_placement``), a call's
plugins run one after the other there, so five plugins cost one hand-off, not five.

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
import time
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

    __slots__ = ("_all", "_complete", "_mutex", "_parked", "answers", "done", "expected", "jobs", "took", "wake")

    def __init__(self, wake: Wake, expected: int) -> None:
        self.wake = wake
        self.expected = expected
        self.answers: dict[str, tuple[tuple[Any, ...], str | None]] = {}
        self.took: dict[str, float] = {}
        """Seconds each shared-lane plugin's callbacks ran (own lanes do not tell)."""
        self.jobs: list[SharedJob] = []
        """This call's jobs on shared lanes (more than one when a lane was handed over)."""
        self.done = trio.Event()
        self._all = threading.Lock()
        self._all.acquire()
        self._mutex = threading.Lock()
        self._complete = False
        self._parked = False

    def answer(self, plugin: str, values: tuple[Any, ...], error: str | None, took: float | None = None) -> None:
        """From a lane's thread (a dict store is atomic under the GIL)."""
        if took is not None:
            self.took[plugin] = took
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

    def reopen(self) -> None:
        """Take calls again on a fresh queue (its actor was restarted by its supervisor with this
        lane: the dispatcher keeps feeding the same object). The old thread, if alive, drains the old queue."""
        self.jobs = queue.SimpleQueue()
        self.closed = False

    def _serve(self, unit: Unit | None) -> None:
        name, jobs = self.name, self.jobs
        while (job := jobs.get()) is not _STOP:
            event, kwargs, gather = job
            values, error = run_callbacks(unit, event, kwargs)
            gather.answer(name, values, error)


def run_callbacks(unit: Unit | None, event: str, kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], str | None]:
    """A unit's callbacks for ``event`` in order: their values, or the first one's error."""
    values: list[Any] = []
    for callback in unit.callbacks(event) if unit is not None else ():
        try:
            value = callback(event, kwargs)
            if value is not None and inspect.iscoroutine(value):
                value = asyncio.run(value)
        except (Exception, SystemExit) as exc:
            return tuple(values), f"{type(exc).__name__}: {exc}"
        values.append(value)
    return tuple(values), None


class SharedJob:
    """One call's part on a shared lane: several plugins, run one after the other.

    Each member is claimed before it runs, by the lane's thread or by the dispatcher when it
    hands the lane over (``claims.setdefault``: atomic, the first claim wins), so each member
    runs exactly once: on the old lane, or moved to another one.
    """

    __slots__ = ("claims", "event", "gather", "kwargs", "lane", "members", "running", "since")

    def __init__(self, lane: SharedLane, event: str, kwargs: dict[str, Any], gather: Gather, members: list[tuple[str, Unit]]) -> None:
        self.lane = lane
        self.event = event
        self.kwargs = kwargs
        self.gather = gather
        self.members = members
        self.claims: dict[int, bool] = {}
        """Member index -> True: the lane's thread runs it; False: moved away."""
        self.since = 0.0
        """``time.perf_counter()`` when the running member started."""
        self.running = -1
        """The member running now (-1: none)."""

    def hand_over(self) -> tuple[str | None, list[tuple[str, Unit]]]:
        """Stop the job here (in the reactor): the member running now (it keeps the old lane's
        thread) and the members not started (to run elsewhere)."""
        rest = [member for index, member in enumerate(self.members) if self.claims.setdefault(index, False) is False]
        answered = self.gather.answers
        holder = next((name for index, (name, _) in enumerate(self.members) if self.claims[index] and name not in answered), None)
        return holder, rest


class SharedLane:
    """The thread that well-behaved plugins share. The dispatcher owns it (in the reactor):
    ``open`` holds the jobs submitted and not yet finished (the thread drops those it finished,
    the dispatcher those whose call ended); ``retire`` hands it over."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.open: set[SharedJob] = set()
        self.retired = False
        self.thread = threading.Thread(target=self._serve, name="hook-lane-shared", daemon=True)
        self.thread.start()

    def submit(self, job: SharedJob) -> None:
        self.open.add(job)
        job.gather.jobs.append(job)
        self.jobs.put(job)

    def running(self) -> tuple[str, float] | None:
        """The member running longest now, and since when (``time.perf_counter``)."""
        oldest: tuple[str, float] | None = None
        for job in list(self.open):  # a copy: the lane's thread discards the jobs it finished
            index, since = job.running, job.since
            if index >= 0 and (oldest is None or since < oldest[1]):
                oldest = (job.members[index][0], since)
        return oldest

    def retire(self) -> tuple[str | None, list[tuple[SharedJob, list[tuple[str, Unit]]]]]:
        """Hand the lane over (in the reactor): every open job is cut. The plugin running now
        keeps the thread (it ends after that callback, or stays stuck in it); the members not
        started are returned, with their jobs, to be run elsewhere."""
        self.retired = True
        stuck: str | None = None
        moved: list[tuple[SharedJob, list[tuple[str, Unit]]]] = []
        for job in list(self.open):
            running, rest = job.hand_over()
            stuck = stuck or running
            if rest:
                moved.append((job, rest))
        self.open.clear()
        self.jobs.put(_STOP)
        return stuck, moved

    def close(self) -> None:
        self.retired = True
        self.jobs.put(_STOP)

    def _serve(self) -> None:
        jobs, now = self.jobs, time.perf_counter
        while (job := jobs.get()) is not _STOP:
            claim, gather, event, kwargs = job.claims.setdefault, job.gather, job.event, job.kwargs
            started = job.since = now()
            for index, (name, unit) in enumerate(job.members):
                if not claim(index, True):
                    break  # handed over: the rest runs elsewhere
                job.running = index
                values, error = run_callbacks(unit, event, kwargs)
                job.running = -1
                ended = job.since = now()
                gather.answer(name, values, error, ended - started)
                started = ended
            self.open.discard(job)  # atomic under the GIL; the reactor reads copies
